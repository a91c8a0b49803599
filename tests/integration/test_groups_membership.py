"""Consumer group membership against a real pylog broker with real clients (confluent-kafka, kcat):
assignments with each client-side assignor, reassignment after close and after kill -9, kcat -G."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic, produce

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500}
SESSION_MS = 3000


def consumer(bootstrap: str, group: str, strategy: str = "range", **conf: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "partition.assignment.strategy": strategy,
                     "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
                     "heartbeat.interval.ms": 300, **conf})


def poll_until(consumers: list[Consumer], done: Callable[[], bool], timeout: float = 30.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        for c in consumers:
            c.poll(0.05)
        if done():
            return time.monotonic() - started
    raise AssertionError("condition not reached in time")


def close_all(consumers: list[Consumer]) -> None:
    """Leave the group in poll(), then close: librdkafka 2.16 can wait for ever inside close() when close has an
    assignment to revoke (its rebalance callback's rd_kafka_assign waits on the group thread; seen once in CI,
    a consumer of the roundrobin case stuck 20 minutes with the broker idle)."""
    for c in consumers:
        c.unsubscribe()
    deadline = time.monotonic() + 15
    while any(c.assignment() for c in consumers) and time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
    for c in consumers:
        c.close()


def assignments(consumers: list[Consumer]) -> list[set[int]]:
    return [{tp.partition for tp in c.assignment()} for c in consumers]


def disjoint_and_covering(parts: list[set[int]], n: int) -> bool:
    return all(parts) and sum(len(p) for p in parts) == n and set().union(*parts) == set(range(n))


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(settings=GROUP_SETTINGS)


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_members_get_disjoint_assignments_covering_all_partitions(broker: BrokerProcess, strategy: str) -> None:
    create_topic(broker.bootstrap, "six", 6)
    members = [consumer(broker.bootstrap, f"g-{strategy}", strategy) for _ in range(3)]
    try:
        for c in members:
            c.subscribe(["six"])
        poll_until(members, lambda: disjoint_and_covering(assignments(members), 6))
        time.sleep(1.0)   # no further rebalance takes partitions away
        poll_until(members, lambda: disjoint_and_covering(assignments(members), 6), timeout=5)
    finally:
        close_all(members)


def test_closed_member_partitions_are_reassigned_in_one_rebalance(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "six", 6)
    assigned_calls = [0, 0, 0]

    def counter(i: int) -> Callable[[Consumer, list[TopicPartition]], None]:
        def on_assign(_c: Consumer, _parts: list[TopicPartition]) -> None:
            assigned_calls[i] += 1
        return on_assign

    members = [consumer(broker.bootstrap, "g-close") for _ in range(3)]
    for i, c in enumerate(members):
        c.subscribe(["six"], on_assign=counter(i))
    poll_until(members, lambda: disjoint_and_covering(assignments(members), 6))
    time.sleep(0.5)
    for c in members:
        c.poll(0.05)
    before = list(assigned_calls)
    members[2].close()
    survivors = members[:2]
    try:
        took = poll_until(survivors, lambda: disjoint_and_covering(assignments(survivors), 6), timeout=10)
        assert took < SESSION_MS / 1000, "a LeaveGroup must not wait for the session timeout"
        time.sleep(0.5)
        for c in survivors:
            c.poll(0.05)
        assert [assigned_calls[i] - before[i] for i in range(2)] == [1, 1]
    finally:
        close_all(survivors)


MEMBER_SCRIPT = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": int(sys.argv[3]),
                  "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest"})
    c.subscribe(["six"])
    announced = False
    while True:
        c.poll(0.1)
        if c.assignment() and not announced:
            print("assigned", flush=True)
            announced = True
""")


def test_killed_member_partitions_are_reassigned_after_session_timeout(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "six", 6)
    proc = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, broker.bootstrap, "g-kill", str(SESSION_MS)],
                            stdout=subprocess.PIPE, text=True)
    members = [consumer(broker.bootstrap, "g-kill") for _ in range(2)]
    try:
        for c in members:
            c.subscribe(["six"])
        assert proc.stdout is not None
        poll_until(members, lambda: sum(len(p) for p in assignments(members)) == 4 and all(assignments(members)),
                   timeout=30)
        proc.kill()
        proc.wait()
        killed_at = time.monotonic()
        poll_until(members, lambda: disjoint_and_covering(assignments(members), 6), timeout=SESSION_MS / 1000 + 10)
        waited = time.monotonic() - killed_at
        assert SESSION_MS / 1000 - 1.0 <= waited <= SESSION_MS / 1000 + 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        close_all(members)


def test_kcat_group_consumer_reads_and_commits(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "kc", 2)
    produce(broker.bootstrap, "kc", [b"m%d" % i for i in range(10)], partition=0)
    produce(broker.bootstrap, "kc", [b"n%d" % i for i in range(10)], partition=1)
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-G", "g-kcat", "-X", "auto.offset.reset=earliest",
                          "-c", "20", "-q", "-f", "%p:%o\\n", "kc"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = {tuple(map(int, line.split(":"))) for line in out.stdout.split()}
    assert len(seen) == 20
    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-kcat"})
    try:
        committed = probe.committed([TopicPartition("kc", 0), TopicPartition("kc", 1)], timeout=10)
    finally:
        probe.close()
    counts = {p: sum(1 for q, _ in seen if q == p) for p in (0, 1)}
    assert {tp.partition: tp.offset for tp in committed} == counts


def test_a_static_leader_that_restarts_within_its_session_keeps_its_partitions_and_no_one_rebalances(
        broker: BrokerProcess) -> None:
    """KIP-345 (issue 12): librdkafka rejoins with JoinGroup below v9; Kafka hands the static leader its
    old assignment and keeps it leader, without a rebalance for the others."""
    create_topic(broker.bootstrap, "static", 4)
    assigned_b = [0]
    conf = {"session.timeout.ms": 10_000}
    a = consumer(broker.bootstrap, "g-static", **conf, **{"group.instance.id": "a"})
    a.subscribe(["static"])
    poll_until([a], lambda: len(a.assignment()) == 4)          # a joins first: a leads
    b = consumer(broker.bootstrap, "g-static", **conf, **{"group.instance.id": "b"})
    b.subscribe(["static"], on_assign=lambda _c, _p: assigned_b.__setitem__(0, assigned_b[0] + 1))
    poll_until([a, b], lambda: disjoint_and_covering(assignments([a, b]), 4))
    before = assignments([a, b])
    calls = assigned_b[0]
    a.close()                                 # a static member's close sends no LeaveGroup
    again = consumer(broker.bootstrap, "g-static", **conf, **{"group.instance.id": "a"})
    try:
        again.subscribe(["static"])
        poll_until([again, b], lambda: bool(again.assignment()), timeout=8)
        time.sleep(1.0)
        for c in (again, b):
            c.poll(0.2)
        assert assignments([again, b]) == before, "each static member keeps its partitions"
        assert assigned_b[0] == calls, "the other member saw no rebalance"
    finally:
        again.close()
        b.close()
