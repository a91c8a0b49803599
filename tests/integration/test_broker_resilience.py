"""The broker survives restarts, SIGKILL, torn files and hostile input without losing acknowledged data."""
from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from confluent_kafka import Producer

from tests.support.clients import consume, create_topic, produce
from tests.support.wire import WireClient


def _segment_files(data_dir: Path, topic: str, partition: int = 0) -> list[Path]:
    return sorted((data_dir / f"{topic}-{partition}").glob("*.log"))


def test_clean_restart_keeps_everything(broker_factory, tmp_path):
    b = broker_factory(settings={"log.segment.bytes": 50000})
    create_topic(b.bootstrap, "keep", partitions=3, config={"retention.ms": "86400000"})
    records = [(f"k{i}".encode(), os.urandom(100)) for i in range(3000)]
    produce(b.bootstrap, "keep", records, acks="all", **{"batch.size": 10000})
    assert b.stop() == 0, "SIGTERM must exit 0 after a clean flush"
    assert (b.data_dir / ".kafka_cleanshutdown").exists()
    b.start()
    got = consume(b.bootstrap, "keep", range(3), len(records))
    assert sorted((m.key(), m.value()) for m in got) == sorted(records)
    # appends continue at the next offset after restart
    placed = produce(b.bootstrap, "keep", [b"after"], partition=1)
    assert placed[0][1] == sum(1 for m in got if m.partition() == 1)


def test_kill_9_during_acks_all_produce_loses_no_acked_record(broker_factory):
    b = broker_factory()
    create_topic(b.bootstrap, "crash", partitions=2)
    acked: set[bytes] = set()
    stop = threading.Event()

    def producer_loop():
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
                      "message.timeout.ms": 60000, "reconnect.backoff.max.ms": 200})

        def cb(err, msg):
            if err is None:
                acked.add(msg.value())

        i = 0
        while not stop.is_set():
            try:
                p.produce("crash", f"r{i}".encode(), on_delivery=cb)
                i += 1
            except BufferError:
                pass
            p.poll(0.0005 if i % 100 else 0.01)
        p.flush(60)

    t = threading.Thread(target=producer_loop)
    t.start()
    deadline = time.time() + 20
    while len(acked) < 5000 and time.time() < deadline:
        time.sleep(0.05)
    b.kill()
    acked_at_kill = set(acked)
    assert len(acked_at_kill) >= 5000
    time.sleep(0.5)
    b.start()
    time.sleep(1.0)
    stop.set()
    t.join(90)
    got = consume(b.bootstrap, "crash", [0, 1], len(acked), timeout=60)
    values = [m.value() for m in got]
    assert acked_at_kill <= set(values), f"{len(acked_at_kill - set(values))} acked records lost"
    assert acked <= set(values)
    assert len(values) == len(set(values)), "idempotent producer must not duplicate across the crash"


def test_garbage_on_the_active_segment_is_truncated_and_never_served(broker_factory):
    b = broker_factory()
    create_topic(b.bootstrap, "torn", partitions=1)
    produce(b.bootstrap, "torn", [f"v{i}".encode() for i in range(100)])
    b.kill()  # no clean-shutdown marker: recovery must run
    [seg] = _segment_files(b.data_dir, "torn")
    good_size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(struct.pack(">qi", 100, 500) + os.urandom(300))  # a torn batch header + garbage
    b.start()
    assert seg.stat().st_size == good_size
    got = consume(b.bootstrap, "torn", [0], 100)
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(100)]
    placed = produce(b.bootstrap, "torn", [b"next"])
    assert placed == [(0, 100)]
    got = consume(b.bootstrap, "torn", [0], 101)
    assert [m.offset() for m in got] == list(range(101))


def test_segments_roll_and_retention_deletes_old_ones_while_a_consumer_reads(broker_factory):
    b = broker_factory(settings={"log.segment.bytes": 50_000, "log.retention.check.interval.ms": 300,
                                 "log.segment.delete.delay.ms": 1000})
    create_topic(b.bootstrap, "ret", partitions=1, config={"retention.bytes": "200000"})
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("ret", 0, 0)])
    seen = []
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "batch.size": 10000})
    for round_ in range(20):
        for i in range(200):
            p.produce("ret", f"{round_}-{i}".encode().ljust(100, b"."))
        p.flush()
        for m in c.consume(500, 0.2):
            assert not m.error(), m.error()
            seen.append(m.offset())
    deadline = time.time() + 15
    while time.time() < deadline and len(seen) < 4000:
        for m in c.consume(500, 0.2):
            assert not m.error(), m.error()
            seen.append(m.offset())
    low, high = c.get_watermark_offsets(TopicPartition("ret", 0), timeout=10)
    c.close()
    assert high == 4000
    assert seen == list(range(4000)), "the consumer kept pace and read every offset in order"
    deadline = time.time() + 10
    while time.time() < deadline and len(_segment_files(b.data_dir, "ret")) > 6:
        time.sleep(0.2)
    segs = _segment_files(b.data_dir, "ret")
    assert 2 <= len(segs) <= 6, [s.name for s in segs]
    c2 = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    low, high = c2.get_watermark_offsets(TopicPartition("ret", 0), timeout=10)
    c2.close()
    assert low > 0 and low == int(segs[0].stem), "log start offset advanced to the oldest kept segment"


def _api_versions_ok(port: int) -> bool:
    with WireClient("127.0.0.1", port) as w:
        resp = w.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        return resp is not None and resp.error_code == 0


def test_oversized_frame_is_rejected_and_other_clients_carry_on(broker_factory):
    b = broker_factory(settings={"socket.request.max.bytes": 1_000_000})
    with WireClient("127.0.0.1", b.port) as bystander:
        with WireClient("127.0.0.1", b.port) as w:
            w.send_raw(struct.pack(">i", 50_000_000) + b"\x00" * 100)
            assert w.read_frame() is None, "the broker closes a connection that sends an oversized frame"
        resp = bystander.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False))
        assert resp is not None and resp.brokers[0].port == b.port
    assert b.alive()
    assert "exceeds socket.request.max.bytes" in b.log_text()


def test_unknown_api_version_gets_the_protocol_error(pylog_broker):
    with WireClient("127.0.0.1", pylog_broker.port) as w:
        # ApiVersions at a version the broker does not know: a v0 response with UNSUPPORTED_VERSION (35)
        frame = struct.pack(">hhih", 18, 99, 7, 1) + b"x"
        w.send_raw(struct.pack(">i", len(frame)) + frame)
        resp = w.read_frame()
        assert resp is not None
        corr, err = struct.unpack_from(">ih", resp)
        assert (corr, err) == (7, 35)
    with WireClient("127.0.0.1", pylog_broker.port) as w:
        frame = struct.pack(">hhih", 999, 0, 8, 1) + b"x"
        w.send_raw(struct.pack(">i", len(frame)) + frame)
        assert w.read_frame() is None  # an unknown API key closes that connection only
    assert _api_versions_ok(pylog_broker.port)


_API_KEYS = [0, 1, 2, 3, 18, 19, 20, 21, 22, 32, 37, 44]


@st.composite
def _malformed_frames(draw):
    kind = draw(st.sampled_from(["random_body", "truncated_header", "bad_lengths", "random_bytes"]))
    if kind == "random_bytes":
        return draw(st.binary(min_size=0, max_size=300))
    key = draw(st.sampled_from(_API_KEYS))
    version = draw(st.integers(min_value=-1, max_value=14))
    corr = draw(st.integers(min_value=-(2**31), max_value=2**31 - 1))
    if kind == "truncated_header":
        return struct.pack(">hhi", key, version, corr)[: draw(st.integers(0, 7))]
    client = draw(st.one_of(st.just(-1), st.integers(0, 20)))
    header = struct.pack(">hhih", key, version, corr, client) + b"c" * max(client, 0)
    body = draw(st.binary(min_size=0, max_size=400))
    if kind == "bad_lengths":
        body = struct.pack(">i", draw(st.integers(-(2**31), 2**31 - 1))) + body
    return header + body


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    from tests.support.broker_process import BrokerProcess
    b = BrokerProcess(tmp_path_factory.mktemp("fuzz") / "data").start()
    yield b
    b.close()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(frame=_malformed_frames())
def test_malformed_requests_never_bring_the_broker_down(fuzz_broker, frame):
    s = socket.create_connection(("127.0.0.1", fuzz_broker.port), timeout=5)
    try:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        s.settimeout(2)
        try:
            s.recv(65536)  # either a response or a closed connection; a timeout (a hang) fails the test
        except ConnectionResetError:
            pass
    finally:
        s.close()
    assert fuzz_broker.alive()


def test_after_fuzzing_the_broker_still_serves_clients(fuzz_broker):
    assert _api_versions_ok(fuzz_broker.port)
    create_topic(fuzz_broker.bootstrap, "after-fuzz")
    produce(fuzz_broker.bootstrap, "after-fuzz", [b"ok"])
    assert [m.value() for m in consume(fuzz_broker.bootstrap, "after-fuzz", [0], 1)] == [b"ok"]


def test_an_absurd_array_length_closes_the_connection_and_the_broker_survives(pylog_broker):
    frame = struct.pack(">hhih", 3, 12, 5, 0) + b"\x00" + b"\xff\xff\xff\xff\x07" + b"\x00" * 5
    with WireClient("127.0.0.1", pylog_broker.port) as w:
        w.send_raw(struct.pack(">i", len(frame)) + frame)
        assert w.read_frame() is None
    assert pylog_broker.alive()
    assert _api_versions_ok(pylog_broker.port)
