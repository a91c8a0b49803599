"""Resource limits under hostile input (issue 15): each found by attacking a real broker process.

A CreateTopics asking for 30,000 partitions once blocked the broker for seconds, exhausted the file
descriptors and left a data directory the broker could not restart from; 100 MB frame headers were
allocated and zero-filled as soon as they were announced; a client trickling bytes held its buffer
forever. Each test attacks a real `pylog broker` process while a healthy client checks that its
records are all still there.
"""
from __future__ import annotations

from kafka_protocol.api_keys import ApiKey
import datetime
import socket
import struct
import time
from pathlib import Path

from kio.schema.create_topics.v5.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode
from kio.index import load_response_schema
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader

from tests.support.batches import encode_batch
from tests.support.clients import consume, create_topic, produce
from tests.support.wire import WireClient


def _create(w: WireClient, *topics: tuple[str, int]):
    req = CreateTopicsRequest(topics=tuple(
        CreatableTopic(name=n, num_partitions=p, replication_factor=1, assignments=(), configs=()) for n, p in topics),
        timeout=datetime.timedelta(seconds=30), validate_only=False)
    return w.request(req).topics


def _produce_request(topic: str, records: bytes) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=records),)),))


def _produce_offset(frame: bytes) -> int:
    """Base offset of the one partition of a Produce v9 response frame (error code must be 0)."""
    resp, _ = entity_reader(load_response_schema(ApiKey.PRODUCE, 9))(frame, 5)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none, part
    return int(part.base_offset)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _metadata_ok(port: int) -> bool:
    with WireClient("127.0.0.1", port) as w:
        resp = w.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
        return resp is not None and resp.brokers[0].port == port


def test_a_30000_partition_create_topics_is_refused_at_once_and_the_broker_restarts(broker_factory, tmp_path):
    b = broker_factory()
    with WireClient("127.0.0.1", b.port) as w:
        started = time.monotonic()
        results = _create(w, ("huge", 30_000), ("small", 1))
        elapsed = time.monotonic() - started
    assert elapsed < 1.0
    assert [(t.name, t.error_code) for t in results] == [("huge", ErrorCode.policy_violation),
                                                        ("small", ErrorCode.policy_violation)]
    assert "Excessively large number of partitions" in (results[0].error_message or "")
    assert not list(b.data_dir.glob("huge-*")) and not list(b.data_dir.glob("small-*"))
    b.stop()
    b.start()
    assert _metadata_ok(b.port)


def test_max_broker_partitions_is_checked_before_any_partition_is_made(broker_factory):
    b = broker_factory(settings={"max.broker.partitions": 170})   # 50 of them: __consumer_offsets
    with WireClient("127.0.0.1", b.port) as w:
        assert _create(w, ("first", 100))[0].error_code == ErrorCode.none
        refused = _create(w, ("second", 30))[0]
    assert refused.error_code == ErrorCode.policy_violation
    assert "max.broker.partitions=170" in (refused.error_message or "")
    assert not list(b.data_dir.glob("second-*"))
    create_topic(b.bootstrap, "third", partitions=20)
    b.stop()
    b.start()
    produce(b.bootstrap, "third", [b"after restart"], partition=19)
    assert [m.value() for m in consume(b.bootstrap, "third", [19], 1)] == [b"after restart"]


def test_30_connections_announcing_100_mb_frames_cost_no_memory_and_a_client_carries_on(broker_factory):
    b = broker_factory()
    create_topic(b.bootstrap, "healthy")
    baseline = _rss_mb(b.proc.pid)
    attackers = []
    try:
        for _ in range(30):
            s = socket.create_connection(("127.0.0.1", b.port))
            s.sendall(struct.pack(">i", 100 * 1024 * 1024 - 1) + b"\x00\x00\x00\x03" + b"x" * 4096)
            attackers.append(s)
        sent = [b"record-%d" % i for i in range(2000)]
        produce(b.bootstrap, "healthy", sent)
        assert [m.value() for m in consume(b.bootstrap, "healthy", [0], len(sent))] == sent
        rss = _rss_mb(b.proc.pid)
        assert rss < 500 and rss - baseline < 150, (baseline, rss)
    finally:
        for s in attackers:
            s.close()
    assert b.alive()


def test_requests_held_behind_the_memory_pool_go_on_when_memory_frees(broker_factory):
    """queued.max.request.bytes=3 MB: a second 2 MB request waits for the first, then is answered."""
    b = broker_factory(settings={"queued.max.request.bytes": 3 * 1024 * 1024, "message.max.bytes": 4 << 20})
    create_topic(b.bootstrap, "big", config={"max.message.bytes": str(4 << 20)})
    first, second = WireClient("127.0.0.1", b.port), WireClient("127.0.0.1", b.port)
    try:
        frames = [w.encode(_produce_request("big", encode_batch([bytes([i]) * (2 << 20)])))
                  for i, w in enumerate((first, second))]
        first.send_raw(frames[0][:1000])          # holds 2 MB of the pool
        time.sleep(0.3)
        second.send_raw(frames[1])                # must wait for memory
        time.sleep(0.5)
        first.send_raw(frames[0][1000:])
        offsets = []
        for w in (first, second):
            frame = w.read_frame()
            assert frame is not None, "each request got its response"
            offsets.append(_produce_offset(frame))
        assert offsets == [0, 1], "the second request, though sent whole first, waited for the first's memory"
    finally:
        first.close()
        second.close()
    assert [m.value()[:1] for m in consume(b.bootstrap, "big", [0], 2)] == [b"\x00", b"\x01"]


def test_a_request_that_trickles_in_is_closed_and_others_are_not(broker_factory):
    b = broker_factory(settings={"request.arrival.timeout.ms": 1000})
    slow = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    with WireClient("127.0.0.1", b.port) as healthy:
        slow.sendall(struct.pack(">i", 1000))
        closed_after = None
        started = time.monotonic()
        for _ in range(40):
            try:
                slow.sendall(b"x")
                time.sleep(0.1)
            except OSError:
                closed_after = time.monotonic() - started
                break
        assert closed_after is not None and closed_after < 3.5, "the trickling connection was closed"
        assert healthy.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False)) is not None
    slow.close()
    assert "request.arrival.timeout.ms" in b.log_text()


def test_max_connections_per_ip_refuses_the_extra_connection(broker_factory):
    b = broker_factory(settings={"max.connections.per.ip": 3})
    time.sleep(0.5)             # the start-up probe's connection is gone
    held: list[WireClient] = []
    try:
        for _ in range(3):      # one by one, each admitted before the next arrives
            held.append(WireClient("127.0.0.1", b.port))
            assert held[-1].request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                    include_topic_authorized_operations=False)) is not None
        extra = socket.create_connection(("127.0.0.1", b.port), timeout=5)
        extra.settimeout(5)
        assert extra.recv(10) == b"", "the fourth connection from one address is closed on arrival"
        extra.close()
    finally:
        for w in held:
            w.close()
    time.sleep(0.2)
    assert _metadata_ok(b.port)
    assert "max.connections.per.ip=3" in b.log_text()
