"""How the source's clients ride out a partition leader change (issue 11), with fake clients:
- the executors' Fetch client forgets a leader it cannot reach, so the next attempt asks for the new one;
- a high watermark below a range's end (a new leader catching up) is waited out, then is data loss;
- the driver's ListOffsets asks again after a metadata refresh while a leader is moving, and asks again
  when the latest offsets are below what the query has already read (Spark's fetchLatestOffsets).
"""
from __future__ import annotations

import socket
from typing import Any

import pytest
from confluent_kafka import KafkaError

from kafka_protocol.record_builder import Record, encode_batch
from kafka_protocol.fetch_response import FetchedPartition
from sparklog import fetch_reader
from sparklog.errors import DataLossError
from sparklog.kafka_client import BrokerUnavailableError, ClientConfig, KafkaClient, PartitionLeader
from sparklog.offset_reader import OffsetReader
from sparklog.options import parse_stream_options
from sparklog.planner import OffsetRange
from sparklog.reader_settings import ReaderSettings


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_leader_that_refuses_connections_is_forgotten_so_the_next_attempt_asks_again() -> None:
    port = _closed_port()
    client = KafkaClient(ClientConfig(f"127.0.0.1:{port}", request_timeout_ms=1000))
    client._nodes[1] = ("127.0.0.1", port)
    client._leaders[("t", 0)] = PartitionLeader(1, 3)
    with pytest.raises(BrokerUnavailableError, match="cannot connect"):
        client.fetch("t", 0, 0)
    assert ("t", 0) not in client._leaders
    client._leaders[("t", 0)] = PartitionLeader(1, 3)
    with pytest.raises(BrokerUnavailableError, match="cannot connect"):
        client.list_offset("t", 0, -1)
    assert ("t", 0) not in client._leaders


class FakeFetchClient:
    """Answers Fetch of t-0 from `records` (offsets 0..9) with the high watermarks of `watermarks`, in turn."""

    def __init__(self, watermarks: list[int]) -> None:
        self.watermarks = watermarks
        self.fetches = 0
        self.records = encode_batch([Record(i, 1000 + i, None, b"v%d" % i) for i in range(10)])

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int | None = None) -> FetchedPartition:
        hw = self.watermarks[min(self.fetches, len(self.watermarks) - 1)]
        self.fetches += 1
        data = memoryview(self.records) if offset < hw else None   # the whole batch below the watermark
        if data is not None and hw < 10:
            data = memoryview(encode_batch([Record(i, 1000 + i, None, b"v%d" % i) for i in range(offset, hw)]))
        return FetchedPartition(topic, partition, 0, hw, hw, 0, [], data)

    def forget_leader(self, topic: str, partition: int) -> None:
        pass

    def close(self) -> None:
        pass


def _read(monkeypatch: pytest.MonkeyPatch, client: FakeFetchClient, **options: str) -> list[int]:
    monkeypatch.setattr(fetch_reader, "_POOL", fetch_reader.ClientPool(close=lambda c: None))
    monkeypatch.setattr(fetch_reader, "KafkaClient", lambda config: client)
    monkeypatch.setattr(fetch_reader, "_BACKOFF_S", (0.01,))
    settings = ReaderSettings.from_options(parse_stream_options({"kafka.bootstrap.servers": "127.0.0.1:1",
                                                                 "subscribe": "t", **options}))
    reader = fetch_reader.FetchRangeReader(OffsetRange("t", 0, 0, 10), settings)
    return [o for batch in reader for o in batch.column("offset").to_pylist()]


def test_a_new_leaders_lagging_high_watermark_is_waited_out(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeFetchClient([6, 6, 6, 10])      # the new leader's high watermark catches up after 2 answers
    assert _read(monkeypatch, client) == list(range(10))


def test_a_high_watermark_that_stays_below_the_end_is_data_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch_reader, "HIGH_WATERMARK_SETTLE_MS", 200)
    with pytest.raises(DataLossError, match="end offset 10 of t-0 is beyond the partition's high watermark 6"):
        _read(monkeypatch, FakeFetchClient([6]))
    client = FakeFetchClient([6])
    assert _read(monkeypatch, client, failOnDataLoss="false") == list(range(6))
    assert client.fetches > 2, "asked again before giving up"


class _Answer:
    def __init__(self, topic: str, partition: int, offset: int, error: int | None = None) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        self.error = KafkaError(error) if error is not None else None


class FakeConsumer:
    """offsets_for_times answers from `rounds` in turn; list_topics counts metadata refreshes."""

    def __init__(self, rounds: list[dict[int, Any]]) -> None:
        self.rounds = rounds
        self.calls: list[list[int]] = []
        self.refreshes = 0

    def offsets_for_times(self, tps: list[Any], timeout: float) -> list[_Answer]:
        answer = self.rounds[min(len(self.calls), len(self.rounds) - 1)]
        self.calls.append([tp.partition for tp in tps])
        return [_Answer(tp.topic, tp.partition, *answer[tp.partition]) for tp in tps]

    def list_topics(self, timeout: float) -> None:
        self.refreshes += 1


def _offset_reader(consumer: FakeConsumer) -> OffsetReader:
    reader = OffsetReader(parse_stream_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                                "fetchOffset.retryIntervalMs": "10"}))
    reader._consumer = consumer   # type: ignore[assignment]
    return reader


def test_list_offsets_asks_again_after_a_metadata_refresh_while_a_leader_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sparklog.offset_reader._MOVING_BACKOFF_S", (0.01,))
    consumer = FakeConsumer([{0: (5,), 1: (-1, KafkaError.LEADER_NOT_AVAILABLE)},
                             {1: (-1, KafkaError.NOT_LEADER_FOR_PARTITION)},
                             {1: (7,)}])
    assert _offset_reader(consumer).latest([("t", 0), ("t", 1)]) == {("t", 0): 5, ("t", 1): 7}
    assert consumer.calls == [[0, 1], [1], [1]], "only the partitions without an answer are asked again"
    assert consumer.refreshes == 2


def test_latest_offsets_below_what_was_read_are_asked_again_then_believed() -> None:
    consumer = FakeConsumer([{0: (90,)}, {0: (100,)}])
    reader = _offset_reader(consumer)
    assert reader.latest([("t", 0)], known={("t", 0): 95}) == {("t", 0): 100}
    assert len(consumer.calls) == 2
    consumer = FakeConsumer([{0: (90,)}])
    assert _offset_reader(consumer).latest([("t", 0)], known={("t", 0): 95}) == {("t", 0): 90}
    assert len(consumer.calls) == 3, "fetchOffset.numRetries attempts, then the log's end is believed"


def test_a_list_offsets_round_that_times_out_on_a_dead_leader_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka import KafkaException

    monkeypatch.setattr("sparklog.offset_reader._MOVING_BACKOFF_S", (0.01,))
    consumer = FakeConsumer([{0: (5,)}])
    answer = consumer.offsets_for_times
    timeouts: list[float] = []

    def first_times_out(tps: list[Any], timeout: float) -> list[_Answer]:
        timeouts.append(timeout)
        if len(timeouts) == 1:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return answer(tps, timeout)

    consumer.offsets_for_times = first_times_out   # type: ignore[method-assign]
    assert _offset_reader(consumer).latest([("t", 0)]) == {("t", 0): 5}
    assert timeouts[0] <= 5.0 and consumer.refreshes == 1, "a short round, then fresh metadata"
