"""Committed offsets against a real pylog broker: exact error codes on the wire (generation fencing,
heartbeat errors, simple commits), restart durability, auto.offset.reset, `pylog groups
reset-offsets`, and compaction keeping __consumer_offsets bounded."""
from __future__ import annotations

import datetime
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, KafkaError
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v4.request import LeaveGroupRequest, MemberIdentity
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kio.schema.sync_group.v5.request import SyncGroupRequestAssignment, SyncGroupRequest

from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic, produce
from tests.support.wire import WireClient

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500}
MS = datetime.timedelta(milliseconds=1)


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(settings=GROUP_SETTINGS)


def wire(b: BrokerProcess) -> WireClient:
    return WireClient("127.0.0.1", b.port)


def join(w: WireClient, group: str, member_id: str = "") -> Any:
    return w.request(JoinGroupRequest(group_id=group, session_timeout=10000 * MS, rebalance_timeout=10000 * MS,
                                      member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                      protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00"),)))


def sync(w: WireClient, group: str, generation: int, member_id: str, assignments: dict[str, bytes]) -> Any:
    return w.request(SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                                      group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                      assignments=tuple(SyncGroupRequestAssignment(member_id=m, assignment=a)
                                                        for m, a in assignments.items())))


def heartbeat(w: WireClient, group: str, generation: int, member_id: str, instance: str | None = None) -> ErrorCode:
    return w.request(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                      group_instance_id=instance)).error_code


def commit(w: WireClient, group: str, generation: int, member_id: str, offset: int, *, topic: str = "t",
           epoch: int = -1, metadata: str | None = "") -> ErrorCode:
    resp = w.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name=topic, partitions=(OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=epoch, committed_metadata=metadata),)),)))
    return resp.topics[0].partitions[0].error_code


def fetch(w: WireClient, group: str, topic: str = "t") -> Any:
    resp = w.request(OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
        group_id=group, topics=(OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)),), require_stable=False))
    return resp.groups[0].topics[0].partitions[0]


def test_generation_fencing_and_heartbeat_errors_match_kafka(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "t", 1)
    with wire(broker) as w1, wire(broker) as w2:
        first = join(w1, "g")
        assert first.error_code == ErrorCode.member_id_required and first.member_id
        m1 = first.member_id
        joined = join(w1, "g", m1)
        assert joined.error_code == ErrorCode.none and joined.leader == m1 and joined.generation_id == 1
        assert [m.member_id for m in joined.members] == [m1]
        assert sync(w1, "g", 1, m1, {m1: b"plan"}).assignment == b"plan"
        assert commit(w1, "g", 1, m1, 5, epoch=3, metadata="cp-1") == ErrorCode.none
        assert heartbeat(w1, "g", 1, "bogus") == ErrorCode.unknown_member_id
        assert heartbeat(w1, "g", 7, m1) == ErrorCode.illegal_generation
        assert commit(w1, "g", -1, "", 6) == ErrorCode.unknown_member_id   # a live group: members only

        m2 = join(w2, "g").member_id
        second: dict[str, Any] = {}
        t = threading.Thread(target=lambda: second.update(resp=join(w2, "g", m2)))
        t.start()
        deadline = time.monotonic() + 5
        while heartbeat(w1, "g", 1, m1) != ErrorCode.rebalance_in_progress:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        rejoined = join(w1, "g", m1)
        t.join(5)
        assert rejoined.generation_id == 2 == second["resp"].generation_id
        assert commit(w1, "g", 1, m1, 7) == ErrorCode.illegal_generation    # the stale generation is fenced
        assert commit(w1, "g", 2, m1, 7) == ErrorCode.rebalance_in_progress  # before SyncGroup completes
        sync(w1, "g", 2, m1, {m1: b"a", m2: b"b"})
        assert sync(w2, "g", 2, m2, {}).assignment == b"b"
        assert commit(w1, "g", 2, m1, 8, epoch=4, metadata="cp-2") == ErrorCode.none

        left = w1.request(LeaveGroupRequest(group_id="g", members=(
            MemberIdentity(member_id=m1, group_instance_id=None), MemberIdentity(member_id=m2, group_instance_id=None))))
        assert [m.error_code for m in left.members] == [ErrorCode.none, ErrorCode.none]
        assert heartbeat(w1, "g", 2, m1) == ErrorCode.unknown_member_id
        got = fetch(w1, "g")
        assert (got.committed_offset, got.committed_leader_epoch, got.metadata) == (8, 4, "cp-2")
        # an empty group accepts simple commits from outside (generation -1), as the Spark connector does
        assert commit(w1, "g", -1, "", 11, metadata=None) == ErrorCode.none
        assert fetch(w1, "g").committed_offset == 11
        assert commit(w1, "nobody-yet", -1, "", 3) == ErrorCode.none
        assert commit(w1, "never-joined", 4, "someone", 3) == ErrorCode.illegal_generation
        assert commit(w1, "g", -1, "", 1, topic="no-such-topic") == ErrorCode.unknown_topic_or_partition


def test_offset_delete_and_delete_groups(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "t", 1)
    with wire(broker) as w:
        assert commit(w, "g-del", -1, "", 4) == ErrorCode.none
        resp = w.request(OffsetDeleteRequest(group_id="g-del", topics=(OffsetDeleteRequestTopic(
            name="t", partitions=(OffsetDeleteRequestPartition(partition_index=0),)),)))
        assert resp.error_code == ErrorCode.none
        assert fetch(w, "g-del").committed_offset == -1
    out = subprocess.run([sys.executable, "-m", "pylog", "groups", "delete", "--group", "g-del",
                          "--bootstrap-server", broker.bootstrap], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([sys.executable, "-m", "pylog", "groups", "list", "--bootstrap-server", broker.bootstrap],
                         capture_output=True, text=True, timeout=60)
    assert "g-del" not in out.stdout.split()


def consume_n(c: Consumer, n: int, timeout: float = 30) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append(m)
    return out


def group_consumer(b: BrokerProcess, group: str, **conf: Any) -> Consumer:
    return Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                     **conf})


def test_committed_offsets_survive_a_broker_crash_and_the_group_resumes_exactly(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "r", 3)
    produce(broker.bootstrap, "r", [(b"k%d" % i, b"v%d" % i) for i in range(90)])
    c = group_consumer(broker, "g-resume")
    c.subscribe(["r"])
    first = consume_n(c, 40)
    assert len(first) == 40
    c.commit(asynchronous=False)
    c.close()
    broker.kill()
    broker.start()
    c = group_consumer(broker, "g-resume")
    c.subscribe(["r"])
    rest = consume_n(c, 50)
    c.close()
    seen = [(m.partition(), m.offset()) for m in first + rest]
    assert len(rest) == 50 and len(set(seen)) == 90


def test_auto_offset_reset_earliest_latest_and_none(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "a", 1)
    produce(broker.bootstrap, "a", [b"old-%d" % i for i in range(5)])
    earliest = group_consumer(broker, "g-earliest")
    earliest.subscribe(["a"])
    assert consume_n(earliest, 1)[0].offset() == 0
    earliest.close()

    latest = group_consumer(broker, "g-latest", **{"auto.offset.reset": "latest"})
    latest.subscribe(["a"])
    got: list[Any] = []
    deadline = time.monotonic() + 20
    i = 0
    while not got:   # keep producing until the reset-to-latest has happened and a record arrives
        assert time.monotonic() < deadline
        if latest.assignment():
            produce(broker.bootstrap, "a", [b"new-%d" % i])
            i += 1
        got = consume_n(latest, 1, timeout=0.5)
    latest.close()
    assert got[0].value().startswith(b"new-") and got[0].offset() >= 5

    none = group_consumer(broker, "g-none", **{"auto.offset.reset": "error"})
    none.subscribe(["a"])
    deadline = time.monotonic() + 20
    error = None
    while error is None and time.monotonic() < deadline:
        m = none.poll(0.2)
        if m is not None and m.error():
            error = m.error()
        assert m is None or m.error(), "no record may be read without a committed offset"
    none.close()
    assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET


def pylog_groups(b: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pylog", "groups", *args, "--bootstrap-server", b.bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_reset_offsets_moves_the_next_consumer_and_refuses_an_active_group(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "rs", 2)
    produce(broker.bootstrap, "rs", [b"x%d" % i for i in range(40)], partition=0)
    active = group_consumer(broker, "g-reset")
    active.subscribe(["rs"])
    assert len(consume_n(active, 40)) == 40
    active.commit(asynchronous=False)
    refused = pylog_groups(broker, "reset-offsets", "--group", "g-reset", "--topic", "rs", "--to-earliest", "--execute")
    assert refused.returncode == 1 and "inactive" in refused.stderr
    active.close()

    described = pylog_groups(broker, "describe", "--group", "g-reset")
    assert described.returncode == 0
    row = next(line.split() for line in described.stdout.splitlines() if line.startswith("g-reset rs") or
               line.split()[:3] == ["g-reset", "rs", "0"])
    assert row[3:6] == ["40", "40", "0"]

    dry = pylog_groups(broker, "reset-offsets", "--group", "g-reset", "--topic", "rs:0", "--to-offset", "10")
    assert dry.returncode == 0 and dry.stdout.splitlines()[0].startswith("Dry run: nothing was changed")
    assert dry.stdout.splitlines()[-1].split() == ["g-reset", "rs", "0", "40", "10"]
    done = pylog_groups(broker, "reset-offsets", "--group", "g-reset", "--topic", "rs:0", "--shift-by", "-25",
                        "--execute")
    assert done.returncode == 0, done.stderr
    assert "Dry run" not in done.stdout and done.stdout.splitlines()[-1].startswith("Reset the offsets")
    assert done.stdout.splitlines()[-2].split() == ["g-reset", "rs", "0", "40", "15"]
    after = group_consumer(broker, "g-reset")
    after.subscribe(["rs"])
    got = consume_n(after, 25)
    after.close()
    assert [m.offset() for m in got if m.partition() == 0][:1] == [15] and len(got) == 25


def test_consumer_offsets_stays_bounded_under_repeated_commits(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory(settings={**GROUP_SETTINGS, "offsets.topic.num.partitions": 1,
                                 "offsets.topic.segment.bytes": 4096, "log.cleaner.backoff.ms": 200})
    create_topic(b.bootstrap, "t", 1)
    with wire(b) as w:
        for i in range(3000):
            assert commit(w, f"g{i % 4}", -1, "", i, metadata="m") == ErrorCode.none
    directory = Path(b.data_dir) / "__consumer_offsets-0"
    deadline = time.monotonic() + 15

    def log_bytes() -> int:
        return sum(p.stat().st_size for p in directory.glob("*.log"))
    while log_bytes() > 20_000 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert log_bytes() <= 20_000, "3000 commits of ~100 bytes must compact to a few segments"
    assert len(list(directory.glob("*.log"))) <= 6
    b.stop()
    b.start()
    with wire(b) as w:
        assert [fetch(w, f"g{g}").committed_offset for g in range(4)] == [2996, 2997, 2998, 2999]


def static_join(w: WireClient, group: str, instance: str, member_id: str = "") -> Any:
    return w.request(JoinGroupRequest(group_id=group, session_timeout=10000 * MS, rebalance_timeout=10000 * MS,
                                      member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                                      protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00"),)))


def test_static_member_restart_keeps_generation_and_fences_the_old_id(broker: BrokerProcess) -> None:
    with wire(broker) as wa, wire(broker) as wb:
        a = static_join(wa, "g-static", "inst-a")
        assert a.error_code == ErrorCode.none and a.member_id.startswith("inst-a-")   # no MEMBER_ID_REQUIRED
        sync(wa, "g-static", a.generation_id, a.member_id, {a.member_id: b"A"})
        result: dict[str, Any] = {}
        t = threading.Thread(target=lambda: result.update(b=static_join(wb, "g-static", "inst-b")))
        t.start()
        deadline = time.monotonic() + 5
        while heartbeat(wa, "g-static", a.generation_id, a.member_id) != ErrorCode.rebalance_in_progress:
            assert time.monotonic() < deadline
        a2 = static_join(wa, "g-static", "inst-a", a.member_id)
        t.join(5)
        b = result["b"]
        gen = a2.generation_id
        sync(wa, "g-static", gen, a.member_id, {a.member_id: b"A", b.member_id: b"B"})
        assert sync(wb, "g-static", gen, b.member_id, {}).assignment == b"B"
        # inst-b restarts: a new member id, the same generation and assignment, no rebalance
        restarted = static_join(wb, "g-static", "inst-b")
        assert restarted.error_code == ErrorCode.none and restarted.generation_id == gen
        assert restarted.member_id != b.member_id
        assert sync(wb, "g-static", gen, restarted.member_id, {}).assignment == b"B"
        assert heartbeat(wa, "g-static", gen, a.member_id) == ErrorCode.none
        assert heartbeat(wb, "g-static", gen, b.member_id, "inst-b") == ErrorCode.fenced_instance_id


def test_initial_rebalance_delay_gathers_members_into_one_generation(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory(settings={**GROUP_SETTINGS, "group.initial.rebalance.delay.ms": 1000})
    results: list[Any] = []

    def member() -> None:
        with wire(b) as w:
            m = join(w, "g-delay").member_id
            results.append(join(w, "g-delay", m))
    started = time.monotonic()
    threads = [threading.Thread(target=member) for _ in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.2)
    for t in threads:
        t.join(10)
    took = time.monotonic() - started
    assert [r.generation_id for r in results] == [1, 1, 1]
    assert sum(1 for r in results if r.members) == 1 and len(next(r for r in results if r.members).members) == 3
    assert 1.0 <= took < 3.5


def test_a_deleted_consumer_offsets_topic_comes_back_whole_on_the_next_commit(broker_factory):
    """Found by fuzzing: Kafka lets a client delete __consumer_offsets; pylog then failed every commit
    with a traceback and Metadata re-created the topic with one partition. Now the next write
    recreates it with its partition count, and nothing auto-creates internal topics."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka import TopicPartition as TP
    b = broker_factory(settings={"offsets.topic.num.partitions": 5})
    create_topic(b.bootstrap, "data")
    produce(b.bootstrap, "data", [b"a", b"b"])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.delete_topics(["__consumer_offsets"])["__consumer_offsets"].result(timeout=10)
    assert "__consumer_offsets" not in admin.list_topics(timeout=10).topics
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "after-delete", "enable.auto.commit": False})
    try:
        committed = c.commit(offsets=[TP("data", 0, 2)], asynchronous=False)
        assert [(t.partition, t.offset, t.error) for t in committed] == [(0, 2, None)]
        assert [t.offset for t in c.committed([TP("data", 0)], timeout=10)] == [2]
    finally:
        c.close()
    topics = admin.list_topics(timeout=10).topics
    assert len(topics["__consumer_offsets"].partitions) == 5
    assert "Traceback" not in b.log_text()
