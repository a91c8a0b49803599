"""The Fetch long poll, in process with real storage (broker/apis/fetch.py): a fetch that found nothing
returns a coroutine; an append that lands before that coroutine first runs must still wake it. (It used
to be lost: a follower then waited its whole max_wait, and every acks=all produce with it.)"""
from __future__ import annotations

import asyncio
import datetime
import time
from pathlib import Path

from kio.schema.fetch.v12 import request as fetch_v12

from broker.apis import fetch
from broker.cluster.producer_ids import ProducerIdManager
from broker.cluster.topic_registry import TopicRegistry
from broker.config import BrokerConfig
from broker.context import BrokerContext
from broker.log.log_manager import LogManager
from kafka_protocol.record_builder import Record, encode_batch
from kafka_protocol.codec import Request
from broker.replica_manager import ReplicaManager


def _context(tmp_path: Path) -> BrokerContext:
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    replicas = ReplicaManager(config, TopicRegistry(tmp_path, config.topic_defaults()),
                              LogManager(tmp_path))
    replicas.startup()
    replicas.create_topic("t", 1, 1, {})
    return BrokerContext(config=config, replicas=replicas, producer_ids=ProducerIdManager(tmp_path),
                         cluster_id="c", node_id=0, host="127.0.0.1", port=9092)


def _request(max_wait_s: float) -> Request:
    body = fetch_v12.FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(seconds=max_wait_s), min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
        topics=(fetch_v12.FetchTopic(topic="t", partitions=(fetch_v12.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20),)),))
    return Request(api_key=1, api_version=12, correlation_id=7, client_id="test", body=body, size=0)


def test_an_append_before_the_long_poll_first_runs_still_wakes_it(tmp_path: Path) -> None:
    async def scenario() -> float:
        ctx = _context(tmp_path)
        pending = fetch.handle(ctx, _request(max_wait_s=10))
        assert asyncio.iscoroutine(pending), "nothing to read yet: a long poll"
        ctx.replicas.append("t", 0, encode_batch([Record(0, int(time.time() * 1000), None, b"v")]))
        started = time.monotonic()
        response = await asyncio.wait_for(pending, 5)
        assert sum(len(c) if isinstance(c, bytes) else c.length for c in response[1:]) > 60, "the record came back"
        return time.monotonic() - started

    waited = asyncio.run(scenario())
    assert waited < 5, "the long poll was woken, not left to run out its 10 s"
