"""Cluster mode: sending a transaction's markers to the leaders of its partitions on other brokers.

Owns one connection per destination broker (`replication.peer_connection`, one request in flight at a
time) and the WriteTxnMarkers v1 exchange: the partitions of one marker that another broker leads go
in one request, and each partition's answer comes back as its error code. A broker that cannot be
reached, or does not answer in time, answers every partition with REQUEST_TIMED_OUT (the coordinator
retries with a fresh view of the leaders). Never decides which partitions are done: the coordinator does.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Mapping

from broker.cluster.zk_layout import BrokerRegistration
from broker.replication.peer_connection import PeerConnection, PeerUnavailableError
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.client_codec import write_txn_markers_request
from kafka_protocol.control_records import Marker
from kafka_protocol.errors import ErrorCode
from kafka_protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

VERSION = 1
TIMEOUT_S = 30.0


class MarkerChannel:
    def __init__(self, broker_id: int, brokers: Callable[[], Mapping[int, BrokerRegistration]]) -> None:
        self.broker_id = broker_id
        self._brokers = brokers
        self._conns: dict[int, PeerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def _connection(self, node: int) -> PeerConnection | None:
        found = self._brokers().get(node)
        if found is None:
            return None
        conn = self._conns.get(node)
        if conn is None or (conn.host, conn.port) != (found.host, found.port):
            if conn is not None:
                conn.close()
            conn = self._conns[node] = PeerConnection(found.host, found.port, f"txn-markers-{self.broker_id}")
        return conn

    async def send(self, node: int, marker: Marker, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """WriteTxnMarkers of `marker` for `partitions` to broker `node`; each partition's error code."""
        conn = self._connection(node)
        if conn is None:
            return {tp: ErrorCode.not_leader_or_follower for tp in partitions}
        body = write_txn_markers_request(VERSION, [(marker.producer_id, marker.producer_epoch, marker.commit,
                                                     marker.coordinator_epoch, partitions)])
        lock = self._locks.setdefault(node, asyncio.Lock())
        try:
            async with lock:
                answer = await conn.request(ApiKey.WRITE_TXN_MARKERS, VERSION, body, TIMEOUT_S)
        except PeerUnavailableError as e:
            log.warning("transaction markers for producer %d to broker %d: %s", marker.producer_id, node, e)
            return {tp: ErrorCode.request_timed_out for tp in partitions}
        results = {tp: ErrorCode.request_timed_out for tp in partitions}
        for m in answer.markers:
            for t in m.topics:
                for p in t.partitions:
                    results[(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return results

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
