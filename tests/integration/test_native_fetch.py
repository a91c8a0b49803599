"""The native read path against real brokers: the source's own Fetch client and the Rust decoder.

Each test reads with `executor.read_range` exactly as a Spark task does, against a real pylog broker
process (and once against Tansu), and compares with what was produced or with the librdkafka path.
Covers every codec, null keys and values, headers, ranges starting inside a batch, failOnDataLoss
(records aged out, a deleted topic, an end beyond the log, a corrupt segment), a broker restarted
mid-read, a broker that never answers, and which path `fetcher=auto` picks.
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from sparklog.errors import DataLossError, RangeReadError
from sparklog.executor import read_range, read_task
from sparklog.fetch_reader import prefetch
from sparklog.kafka_client import LATEST, ClientConfig, KafkaClient
from sparklog.options import parse_batch_options
from sparklog.planner import OffsetRange, RangePartition
from sparklog.reader_settings import ReaderSettings
from tests.support.clients import admin, create_topic, produce
from peers.tansu import TansuProcess


@pytest.fixture(scope="module")
def pylog_broker(broker):
    """The module's one broker (tests/integration/conftest.py), not one per test: every test here makes
    topics (and groups) of its own and reads only those."""
    return broker


def _settings(bootstrap: str, **options: str) -> ReaderSettings:
    return ReaderSettings.from_options(parse_batch_options({"kafka.bootstrap.servers": bootstrap, "subscribe": "x",
                                                            **options}))


def _rows(rng: OffsetRange, settings: ReaderSettings) -> list[dict]:
    return [row for batch in read_range(rng, settings) for row in batch.to_pylist()]


def _end(bootstrap: str, topic: str, partition: int) -> int:
    client = KafkaClient(ClientConfig(bootstrap))
    try:
        return client.list_offset(topic, partition, LATEST)
    finally:
        client.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_native_and_librdkafka_paths_read_the_same_rows(pylog_broker, codec):
    bs, topic = pylog_broker.bootstrap, f"same-{codec}"
    create_topic(bs, topic, 2)
    records = [(None if i % 7 == 0 else b"k%d" % i, None if i % 11 == 0 else b"v%d" % i * (i % 5)) for i in range(3000)]
    produce(bs, topic, records, **{"compression.type": codec, "linger.ms": 20})
    produce(bs, topic, [(b"hk", b"hv")], partition=0, headers=[("a", b"1"), ("b", b"")])
    native = _settings(bs, includeHeaders="true")
    librdkafka = _settings(bs, includeHeaders="true", fetcher="librdkafka")
    assert native.native and not librdkafka.native
    total = 0
    for p in (0, 1):
        end = _end(bs, topic, p)
        for start in (0, 1, end // 3):               # ranges that start inside a batch too
            rng = OffsetRange(topic, p, start, end - 1 if p == 1 else end)
            got = _rows(rng, native)
            assert got == _rows(rng, librdkafka)
            assert [r["offset"] for r in got] == list(range(rng.start, rng.end))
        total += end
    assert total == 3001
    last = _rows(OffsetRange(topic, 0, _end(bs, topic, 0) - 1, _end(bs, topic, 0)), native)[0]
    assert last["headers"] == [{"key": "a", "value": b"1"}, {"key": "b", "value": b""}]


def test_a_small_task_prefetches_its_ranges_in_one_fetch_and_reads_the_same_rows(pylog_broker):
    bs, topic = pylog_broker.bootstrap, "prefetch"
    create_topic(bs, topic, 4)
    for p in range(4):
        produce(bs, topic, [(b"k%d" % i, b"p%d-v%d" % (p, i)) for i in range(500)], partition=p,
                **{"compression.type": "lz4", "linger.ms": 20})
    settings = _settings(bs)
    # partition 3's range is empty; 2's starts mid-log; the others from 0
    ranges = [OffsetRange(topic, 0, 0, 500), OffsetRange(topic, 1, 10, 400), OffsetRange(topic, 2, 250, 500),
              OffsetRange(topic, 3, 500, 500)]
    first = prefetch(ranges, settings)
    assert set(first) == set(ranges[:3]), "one answer with records per non-empty range"
    assert all(fp.records is not None and len(fp.records) > 0 for fp in first.values())
    got = [row for batch in read_task(RangePartition(ranges), settings) for row in batch.to_pylist()]
    expected = [row for r in ranges for row in _rows(r, settings)]
    assert got == expected and len(got) == 500 + 390 + 250
    assert [(r["partition"], r["offset"]) for r in got] == [(r.partition, o) for r in ranges for o in range(r.start, r.end)]
    assert prefetch([OffsetRange(topic, 0, 0, 500), OffsetRange(topic, 0, 500, 500)], settings) == {}, \
        "one partition twice is fetched range by range"
    gone = prefetch([OffsetRange(topic, 0, 0, 10), OffsetRange("no-such-topic", 0, 0, 10)], settings)
    assert list(gone) == [OffsetRange(topic, 0, 0, 10)], "a partition without a leader is left to its reader"


def test_records_aged_out_are_data_loss_or_skipped(pylog_broker, caplog):
    bs, topic = pylog_broker.bootstrap, "aged"
    create_topic(bs, topic, 1)
    produce(bs, topic, [b"r%d" % i for i in range(100)], partition=0)
    client = admin(bs)                              # kept: a collected client cancels its futures
    list(client.delete_records([TopicPartition(topic, 0, 40)]).values())[0].result(15)
    rng = OffsetRange(topic, 0, 10, 100)
    with pytest.raises(DataLossError, match=r"Cannot fetch offset 10 \(TopicPartition: aged-0\).*starts at offset 40"):
        _rows(rng, _settings(bs))
    with caplog.at_level(logging.WARNING):
        got = _rows(rng, _settings(bs, failOnDataLoss="false"))
    assert [r["offset"] for r in got] == list(range(40, 100))
    assert "skipping [10, 40)" in caplog.text


def test_a_deleted_topic_is_data_loss_or_an_empty_range(pylog_broker):
    bs, topic = pylog_broker.bootstrap, "gone"
    create_topic(bs, topic, 1)
    produce(bs, topic, [b"x"] * 10, partition=0)
    client = admin(bs)
    client.delete_topics([topic])[topic].result(15)
    rng = OffsetRange(topic, 0, 0, 10)
    with pytest.raises(DataLossError, match="gone-0 no longer exists"):
        _rows(rng, _settings(bs))
    assert _rows(rng, _settings(bs, failOnDataLoss="false")) == []


def test_an_end_beyond_a_recreated_log_is_data_loss(pylog_broker):
    bs, topic = pylog_broker.bootstrap, "short"
    create_topic(bs, topic, 1)
    produce(bs, topic, [b"x"] * 5, partition=0)
    with pytest.raises(DataLossError, match="end offset 50 of short-0 is beyond the partition's high watermark 5"):
        _rows(OffsetRange(topic, 0, 0, 50), _settings(bs))
    assert len(_rows(OffsetRange(topic, 0, 0, 50), _settings(bs, failOnDataLoss="false"))) == 5


def test_a_corrupt_segment_names_topic_partition_and_offset(broker_factory, tmp_path):
    broker = broker_factory()
    bs, topic = broker.bootstrap, "corrupt"
    create_topic(bs, topic, 1)
    produce(bs, topic, [b"A" * 50 for _ in range(20)], partition=0, **{"linger.ms": 0, "batch.num.messages": 1})
    broker.stop()
    segment = next(Path(broker.data_dir).glob(f"{topic}-0/*.log"))
    data = bytearray(segment.read_bytes())
    data[-10] ^= 0xFF                              # inside the last batch's records: its CRC no longer matches
    segment.write_bytes(bytes(data))
    broker.start()
    with pytest.raises(DataLossError, match=r"records of corrupt-0 at offset \d+ are corrupt \(.*CRC"):
        _rows(OffsetRange(topic, 0, 0, 20), _settings(bs))
    survivors = _rows(OffsetRange(topic, 0, 0, 20), _settings(bs, failOnDataLoss="false"))
    assert 0 < len(survivors) < 20 and all(r["value"] == b"A" * 50 for r in survivors)


def test_a_broker_restarted_mid_read_is_retried_until_the_range_is_read(broker_factory):
    broker = broker_factory()
    bs, topic = broker.bootstrap, "restart"
    create_topic(bs, topic, 1)
    produce(bs, topic, [b"v%d" % i for i in range(20_000)], partition=0)
    settings = _settings(bs, **{"kafka.max.partition.fetch.bytes": "4096"})   # many fetches
    batches = read_range(OffsetRange(topic, 0, 0, 20_000), settings)
    offsets = [r["offset"] for r in next(batches).to_pylist()]
    broker.kill()
    threading.Timer(1.5, broker.start).start()
    for batch in batches:
        offsets += batch.column("offset").to_pylist()
    assert offsets == list(range(20_000))


def test_an_unreachable_broker_fails_after_the_poll_timeout(broker_factory):
    broker = broker_factory()
    bs = broker.bootstrap
    create_topic(bs, "t", 1)
    produce(bs, "t", [b"x"], partition=0)
    broker.kill()
    t0 = time.monotonic()
    with pytest.raises(RangeReadError, match=r"no progress reading topic-partition t-0.*pollTimeoutMs.*connect"):
        _rows(OffsetRange("t", 0, 0, 1), _settings(bs, **{"kafkaConsumer.pollTimeoutMs": "2000"}))
    assert time.monotonic() - t0 < 20


def test_the_native_path_reads_tansu(tmp_path):
    tansu = TansuProcess(tmp_path / "tansu").start()
    try:
        bs = tansu.bootstrap
        create_topic(bs, "tansu-read", 1)
        produce(bs, "tansu-read", [(b"k%d" % i, b"v%d" % i) for i in range(500)], partition=0,
                **{"compression.type": "lz4"})
        client = KafkaClient(ClientConfig(bs))
        try:   # Tansu (memory engine) answers ListOffsets(latest) with 1 here; its Fetch high watermark is right
            end = client.fetch("tansu-read", 0, 0).high_watermark
        finally:
            client.close()
        got = _rows(OffsetRange("tansu-read", 0, 0, end), _settings(bs))
        assert [(r["key"], r["value"]) for r in got] == [(b"k%d" % i, b"v%d" % i) for i in range(500)]
    finally:
        tansu.close()


def test_describe_log_dirs_reports_each_partitions_bytes_on_disk(pylog_broker):
    bs, topic = pylog_broker.bootstrap, "sizes"
    create_topic(bs, topic, 2)
    produce(bs, topic, [b"x" * 1000] * 30, partition=0)
    produce(bs, topic, [b"y" * 10] * 30, partition=1)
    client = KafkaClient(ClientConfig(bs))
    try:
        sizes = client.log_sizes(topic, [0, 1])
    finally:
        client.close()
    on_disk = {p: sum(f.stat().st_size for f in Path(pylog_broker.data_dir).glob(f"{topic}-{p}/*.log")) for p in (0, 1)}
    assert sizes == on_disk and sizes[0] > 30_000 > 300 < sizes[1] < 3_000
