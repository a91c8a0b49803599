"""Tiered storage (KIP-405) on a real broker process and a real S3 server (MinIO), read by librdkafka.

Topics with small segments and a small local.retention.bytes: most of each log lives only in the bucket, and
every offset must still be served, byte for byte as produced, with Kafka's ListOffsets answers, transactions
filtered for read_committed, across a restart; the store going away must cost retriable errors only, never
local data; an upload cut short leaves no object counted as data.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyarrow import fs

from broker.tiered.object_store import ObjectStore
from kafka_protocol.remote_segments import RemoteSegment
from pylog.launch.process import BrokerProcess
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.object_store, pytest.mark.timeout(900)]

SEGMENT = {"remote.storage.enable": "true", "segment.bytes": "32768", "local.retention.bytes": "40000"}


def _broker(tmp_path: Path, prefix: str, name: str = "broker") -> BrokerProcess:
    return BrokerProcess(tmp_path / name, settings={
        "remote.log.storage.system.enable": "true", "remote.log.storage.url": f"s3://tables/{prefix}",
        "remote.log.manager.task.interval.ms": 200, "log.retention.check.interval.ms": 200,
        "remote.fetch.max.wait.ms": 2000})


def _create(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})   # kept: a collected client cancels its futures
    admin.create_topics([NewTopic(topic, 1, 1, config={**SEGMENT, **(config or {})})])[topic].result(15)


def _produce(bootstrap: str, topic: str, start: int, count: int, t0: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 8192, "enable.idempotence": True})
    for i in range(start, start + count):
        p.produce(topic, key=f"k{i}".encode(), value=f"value-{i:06d}-".encode() + b"x" * 80, timestamp=t0 + i * 1000,
                  headers=[("h", str(i).encode())])
    assert p.flush(30) == 0


def _local_start(broker: BrokerProcess, topic: str) -> int:
    return min(int(f.stem) for f in (broker.data_dir / f"{topic}-0").glob("*.log"))


def _consume(bootstrap: str, topic: str, until: int, isolation: str = "read_uncommitted",
             start: int = 0) -> list[tuple[int, bytes, bytes, int, list]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}", "enable.auto.commit": False,
                  "isolation.level": isolation, "fetch.error.backoff.ms": 50})
    c.assign([TopicPartition(topic, 0, start)])
    got: list[tuple[int, bytes, bytes, int, list]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                if got and got[-1][0] >= until - 1:
                    break
                continue
            if m.error():
                continue
            got.append((m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers() or []))
            if m.offset() >= until - 1:
                break
    finally:
        c.close()
    return got


def _expected(i: int, t0: int) -> tuple[int, bytes, bytes, int, list]:
    return i, f"k{i}".encode(), f"value-{i:06d}-".encode() + b"x" * 80, t0 + i * 1000, [("h", str(i).encode())]


def test_a_tiered_topic_serves_every_offset_from_the_bucket_after_its_local_segments_are_gone(s3_env, tmp_path):
    prefix = uuid.uuid4().hex
    broker = _broker(tmp_path, prefix).start()
    try:
        _create(broker.bootstrap, "events")
        t0 = int(time.time() * 1000) - 3_600_000
        _produce(broker.bootstrap, "events", 0, 3000, t0)
        wait_for(lambda: _local_start(broker, "events") > 2000, 30, "local segments deleted once uploaded")
        store = ObjectStore(f"s3://tables/{prefix}")
        folder = next(n for n in store.fs.get_file_info(fs.FileSelector(store.root))
                      if n.base_name.startswith("events-0-")).base_name
        metas = [n for n in store.names(folder) if n.endswith(".meta.json")]
        assert len(metas) >= 6, metas

        expected = [_expected(i, t0) for i in range(3000)]
        assert _consume(broker.bootstrap, "events", 3000) == expected, "every record, as produced"
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lo"})
        try:
            assert c.get_watermark_offsets(TopicPartition("events", 0), timeout=10) == (0, 3000)
            times = [c.offsets_for_times([TopicPartition("events", 0, ts)], timeout=10)[0].offset
                     for ts in (t0 + 500 * 1000 + 1, t0 + 2990 * 1000, t0 + 5000 * 1000)]
        finally:
            c.close()
        assert times == [501, 2990, -1], "a time in the bucket, one on the disk, one after the last record"

        broker.stop()
        broker.start()
        assert _consume(broker.bootstrap, "events", 3000, start=1200)[:5] == expected[1200:1205], "after a restart"
        assert _consume(broker.bootstrap, "events", 3000) == expected
    finally:
        broker.close()


def test_read_committed_filters_aborted_transactions_in_remote_segments(s3_env, tmp_path):
    broker = _broker(tmp_path, uuid.uuid4().hex).start()
    try:
        _create(broker.bootstrap, "txns")
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx", "linger.ms": 5,
                      "batch.size": 8192})
        p.init_transactions(10)
        values: list[tuple[bytes, bool]] = []
        for round_ in range(6):
            p.begin_transaction()
            for i in range(300):
                v = f"r{round_}-{i}".encode() + b"y" * 60
                p.produce("txns", value=v)
                values.append((v, round_ % 2 == 0))
            assert p.flush(10) == 0       # in the log before the abort (librdkafka drops what it has not sent)
            if round_ % 2 == 0:
                p.commit_transaction(10)
            else:
                p.abort_transaction(10)
        end = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "e"}).get_watermark_offsets(
            TopicPartition("txns", 0), timeout=10)[1]
        _produce(broker.bootstrap, "txns", 0, 1000, int(time.time() * 1000))     # more segments after them
        wait_for(lambda: _local_start(broker, "txns") > end, 30, "the transactions' segments only in the bucket")
        committed = [v for v, ok in values if ok]
        got = [m[2] for m in _consume(broker.bootstrap, "txns", end + 1000, "read_committed") if m[0] < end]
        assert got == committed, f"{len(got)} read_committed records, {len(committed)} committed"
        got = [m[2] for m in _consume(broker.bootstrap, "txns", end + 1000) if m[0] < end]
        assert got == [v for v, _ in values], "read_uncommitted sees the aborted records too"
    finally:
        broker.close()


def test_the_store_gone_costs_retriable_errors_and_no_local_data(object_store, s3_env, tmp_path):
    """MinIO killed: uploads fail, nothing local is deleted, a fetch of bucket offsets gets retriable errors; MinIO
    back on the same port and data: the consumer gets the data, uploads resume, the disk is freed."""
    broker = _broker(tmp_path, uuid.uuid4().hex).start()
    try:
        _create(broker.bootstrap, "gone")
        t0 = int(time.time() * 1000) - 600_000
        _produce(broker.bootstrap, "gone", 0, 1500, t0)
        wait_for(lambda: _local_start(broker, "gone") > 500, 30, "the first segments tiered")
        object_store.kill()
        try:
            _produce(broker.bootstrap, "gone", 1500, 1500, t0)
            time.sleep(2)        # ten upload passes against a dead store
            start = _local_start(broker, "gone")
            assert start <= 1500, "no segment deleted before its upload"
            c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "enable.auto.commit": False})
            c.assign([TopicPartition("gone", 0, 0)])
            m = c.poll(5)
            assert m is None or m.error() is not None, "no bucket data while the bucket is gone"
            c.close()
        finally:
            object_store.start()
        assert _consume(broker.bootstrap, "gone", 3000) == [_expected(i, t0) for i in range(3000)]
        wait_for(lambda: _local_start(broker, "gone") > 2000, 30, "uploads resumed and the disk freed")
        assert "remote storage" in broker.log_text(), "the failures were logged"
    finally:
        broker.close()


def test_a_bucket_that_refuses_writes_is_one_clear_line_and_costs_no_local_data(object_store, s3_env, tmp_path):
    """remote.log.storage.url names a bucket that does not exist: every upload is refused. The broker says so in
    a line naming the store and its answer, deletes nothing local and serves every offset from its disk; once the
    bucket exists, uploads resume on their own and local retention frees the disk."""
    bucket = f"missing-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(tmp_path / "broker", settings={
        "remote.log.storage.system.enable": "true", "remote.log.storage.url": f"s3://{bucket}/tiered",
        "remote.log.manager.task.interval.ms": 200, "log.retention.check.interval.ms": 200}).start()
    try:
        _create(broker.bootstrap, "refused")
        t0 = int(time.time() * 1000) - 600_000
        _produce(broker.bootstrap, "refused", 0, 1500, t0)
        wait_for(lambda: "remote storage" in broker.log_text(), 30, "the refusal logged")
        time.sleep(2)                 # ten more upload passes, all refused
        assert _local_start(broker, "refused") == 0, "nothing local deleted while no upload is recorded"
        lines = [ln for ln in broker.log_text().splitlines() if "remote storage" in ln]
        assert len(lines) == 1, lines          # once a minute, not once per pass
        assert f"s3://{bucket}/tiered" in lines[0] and "refused-0" in lines[0], lines[0]
        assert "bucket" in lines[0].lower(), lines[0]          # the store's own answer: no such bucket
        assert _consume(broker.bootstrap, "refused", 1500) == [_expected(i, t0) for i in range(1500)]
        object_store.create_bucket(bucket)
        wait_for(lambda: _local_start(broker, "refused") > 500, 30, "uploads resumed and the disk freed")
        assert _consume(broker.bootstrap, "refused", 1500) == [_expected(i, t0) for i in range(1500)]
    finally:
        broker.close()


def test_an_upload_cut_short_leaves_no_object_counted_as_data(s3_env, tmp_path):
    prefix = uuid.uuid4().hex
    broker = _broker(tmp_path, prefix).start()
    try:
        _create(broker.bootstrap, "cut")
        t0 = int(time.time() * 1000)
        _produce(broker.bootstrap, "cut", 0, 1500, t0)
        wait_for(lambda: _local_start(broker, "cut") > 500, 30, "the first segments tiered")
        store = ObjectStore(f"s3://tables/{prefix}")
        folder = next(i.base_name for i in store.fs.get_file_info(fs.FileSelector(store.root)))
        # what a broker killed between the data objects and the metadata leaves: a segment without metadata
        orphan = f"{folder}/{10**9:020d}-{'f' * 32}"
        store.put_bytes(orphan + ".log", b"\0" * 100)
        store.put_bytes(orphan + ".index", b"")
        broker.kill()
        broker.start()
        wait_for(lambda: not any(n.startswith(f"{10**9:020d}") for n in store.names(folder)), 30,
                   "the orphan's objects deleted when the partition is taken on again")
        assert _consume(broker.bootstrap, "cut", 1500) == [_expected(i, t0) for i in range(1500)]
        assert "left by an upload that did not finish" in broker.log_text()
    finally:
        broker.close()


def test_deleting_a_topic_deletes_its_objects_and_tiering_needs_the_broker_setting(s3_env, tmp_path, broker_factory):
    prefix = uuid.uuid4().hex
    broker = _broker(tmp_path, prefix).start()
    try:
        _create(broker.bootstrap, "doomed")
        _produce(broker.bootstrap, "doomed", 0, 1500, int(time.time() * 1000))
        store = ObjectStore(f"s3://tables/{prefix}")

        def objects() -> int:
            return len(store.fs.get_file_info(fs.FileSelector(store.root, recursive=True, allow_not_found=True)))
        wait_for(lambda: objects() > 5, 30, "segments uploaded")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})   # kept: a collected client cancels its futures
        admin.delete_topics(["doomed"])["doomed"].result(15)
        wait_for(lambda: all(i.type == fs.FileType.Directory for i in store.fs.get_file_info(
            fs.FileSelector(store.root, recursive=True, allow_not_found=True))), 30, "the topic's objects deleted")
        # compacted topics cannot be tiered (Kafka's rule)
        with pytest.raises(KafkaException, match="cleanup.policy=delete"):
            admin.create_topics([NewTopic("compacted", 1, 1, config={"remote.storage.enable": "true",
                                                                     "cleanup.policy": "compact"})])["compacted"].result(15)
    finally:
        broker.close()
    plain = broker_factory()
    admin = AdminClient({"bootstrap.servers": plain.bootstrap})
    with pytest.raises(KafkaException, match="Tiered Storage functionality is disabled in the broker"):
        admin.create_topics([NewTopic("t", 1, 1, config={"remote.storage.enable": "true"})])["t"].result(15)


def _remote_segments(prefix: str, topic: str) -> list[RemoteSegment]:
    store = ObjectStore(f"s3://tables/{prefix}")
    folder = next(i.base_name for i in store.fs.get_file_info(fs.FileSelector(store.root))
                  if i.base_name.startswith(f"{topic}-0-"))
    return sorted((RemoteSegment.from_json(store.get_bytes(f"{folder}/{n}")) for n in store.names(folder)
                   if n.endswith(".meta.json")), key=lambda s: s.base_offset)


def test_in_a_cluster_the_leader_uploads_and_a_new_leader_and_a_rebuilt_replica_carry_on(zookeeper, s3_env,
                                                                                          tmp_path):
    """Three brokers, one bucket, a topic with three replicas. Only the leader uploads; followers free their disks
    only up to what it recorded. The leader killed mid-upload (its last segment's objects written, its metadata
    not): the new one deletes that orphan and continues from the recorded segments (its first upload may straddle
    the old leader's last; none is uploaded again whole). The killed broker comes back with
    an empty disk: it copies only the leader's local log (OFFSET_MOVED_TO_TIERED_STORAGE), and once it is the
    only leader left, every offset is still served, from the bucket below its disk."""
    from pylog.launch.local_cluster import LocalCluster
    from tests.support.cluster import SETTINGS, leader, wait_full_isr

    prefix = uuid.uuid4().hex
    tiering = {"remote.log.storage.system.enable": "true", "remote.log.storage.url": f"s3://tables/{prefix}",
               "remote.log.manager.task.interval.ms": 200, "log.retention.check.interval.ms": 200,
               "remote.fetch.max.wait.ms": 2000, "remote.log.orphan.grace.ms": 2000}
    cluster = LocalCluster(tmp_path, 3, {**SETTINGS, **tiering}, zk_connect=zookeeper.connect,
                           chroot=f"/tiered-{prefix[:8]}")
    try:
        cluster.start(timeout_s=120)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("events", 1, 3, config=SEGMENT)])["events"].result(15)
        wait_full_isr(cluster.bootstrap, "events", 1)
        t0 = int(time.time() * 1000) - 3_600_000
        _produce(cluster.bootstrap, "events", 0, 3000, t0)
        first = leader(cluster.bootstrap, "events")
        followers = [b for b in (0, 1, 2) if b != first]
        wait_for(lambda: all(_local_start(cluster.broker(b), "events") > 2000 for b in (0, 1, 2)), 60,
                 "every replica's disk freed up to the leader's uploads")
        before = _remote_segments(prefix, "events")
        uploaded_to = before[-1].next_offset
        assert all(_local_start(cluster.broker(b), "events") <= uploaded_to for b in followers), \
            "a follower keeps everything its leader has not uploaded"
        assert all("uploaded segment" not in cluster.broker(b).log_text() for b in followers), "only the leader uploads"

        # killed mid-upload: what it leaves is a segment's data objects without their metadata (an orphan), which
        # the next leader must neither count nor keep
        store = ObjectStore(f"s3://tables/{prefix}")
        folder = next(i.base_name for i in store.fs.get_file_info(fs.FileSelector(store.root))
                      if i.base_name.startswith("events-0-"))
        orphan = f"{uploaded_to:020d}-{'e' * 32}"
        store.put_bytes(f"{folder}/{orphan}.log", b"\0" * 100)
        store.put_bytes(f"{folder}/{orphan}.index", b"")
        cluster.kill(first)
        _produce(cluster.bootstrap, "events", 3000, 2000, t0)
        second = leader(cluster.bootstrap, "events")
        wait_for(lambda: not any(n.startswith(orphan) for n in store.names(folder)), 30,
                 "the orphan deleted by the new leader")
        assert "left by an upload that did not finish" in cluster.broker(second).log_text()
        wait_for(lambda: _remote_segments(prefix, "events")[-1].next_offset > 4000, 60, "the new leader uploading")
        after = _remote_segments(prefix, "events")
        assert {s.segment_id for s in before} <= {s.segment_id for s in after}, "the old leader's uploads stand"
        new = [s for s in after if s.segment_id not in {b.segment_id for b in before}]
        assert new and all(s.next_offset > uploaded_to for s in new), "nothing the old leader uploaded went again"
        assert "uploaded segment" in cluster.broker(second).log_text()
        expected = [_expected(i, t0) for i in range(5000)]
        assert _consume(cluster.bootstrap, "events", 5000) == expected

        import shutil
        shutil.rmtree(cluster.broker(first).data_dir / "events-0")
        cluster.broker(first).start()
        wait_full_isr(cluster.bootstrap, "events", 1, timeout_s=60)
        rebuilt = _local_start(cluster.broker(first), "events")
        assert rebuilt > 0, "the empty replica copied only the leader's local log"
        assert "starting at the leader's earliest local offset" in cluster.broker(first).log_text()
        for b in (0, 1, 2):
            if b != first:
                cluster.kill(b)
        wait_for(lambda: leader(cluster.broker(first).bootstrap, "events") == first, 60, "the rebuilt replica leading")
        assert _consume(cluster.broker(first).bootstrap, "events", 5000) == expected, \
            "every offset, from the rebuilt replica"
    finally:
        cluster.close()
