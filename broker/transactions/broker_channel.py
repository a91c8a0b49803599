"""Cluster mode: what transactions ask of other brokers.

Owns one connection per destination broker (`replication.peer_connection`, one request in flight at a
time) and two exchanges: WriteTxnMarkers v1 (a coordinator sends a transaction's marker to the leader
of its partitions: the partitions another broker leads go in one request) and AddPartitionsToTxn v4
with verify_only (a partition leader asks a transaction's coordinator whether a partition is in the
producer's open transaction, KIP-890). Each partition's answer comes back as its error code; a broker
that cannot be reached, or does not answer in time, answers every partition with REQUEST_TIMED_OUT
(callers retry, or refuse with a retriable error). Decides nothing itself.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Mapping

from broker.cluster.zk_layout import BrokerRegistration
from broker.replication.peer_connection import PeerConnection, PeerUnavailableError
from broker.security.inter_broker import PeerSecurity
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.client_codec import verify_partitions_request, write_txn_markers_request
from kafka_protocol.control_records import Marker
from kafka_protocol.errors import ErrorCode
from kafka_protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

MARKERS_VERSION = 1
VERIFY_VERSION = 4
TIMEOUT_S = 30.0


class BrokerChannel:
    def __init__(self, broker_id: int, brokers: Callable[[], Mapping[int, BrokerRegistration]],
                 security: PeerSecurity | None = None) -> None:
        self.broker_id = broker_id
        self.security = security
        self._brokers = brokers
        self._conns: dict[int, PeerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def _connection(self, node: int) -> PeerConnection | None:
        found = self._brokers().get(node)
        if found is None:
            return None
        address = self.security.address(found) if self.security is not None else (found.host, found.port)
        conn = self._conns.get(node)
        if conn is None or (conn.host, conn.port) != address:
            if conn is not None:
                conn.close()
            conn = self._conns[node] = PeerConnection(*address, f"txn-markers-{self.broker_id}", self.security)
        return conn

    async def _request(self, node: int, api: ApiKey, version: int, body: Any, what: str) -> Any | None:
        """The answer of broker `node`, or None when it cannot be reached or does not answer in time."""
        conn = self._connection(node)
        if conn is None:
            return None
        lock = self._locks.setdefault(node, asyncio.Lock())
        try:
            async with lock:
                return await conn.request(api, version, body, TIMEOUT_S)
        except PeerUnavailableError as e:
            log.warning("%s to broker %d: %s", what, node, e)
            return None

    async def send_markers(self, node: int, marker: Marker,
                           partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """WriteTxnMarkers of `marker` for `partitions` to broker `node`; each partition's error code."""
        body = write_txn_markers_request(MARKERS_VERSION, [(marker.producer_id, marker.producer_epoch,
                                                             marker.commit, marker.coordinator_epoch, partitions)])
        answer = await self._request(node, ApiKey.WRITE_TXN_MARKERS, MARKERS_VERSION, body,
                                     f"transaction markers for producer {marker.producer_id}")
        results = {tp: ErrorCode.request_timed_out for tp in partitions}
        for m in answer.markers if answer is not None else ():
            for t in m.topics:
                for p in t.partitions:
                    results[(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return results

    async def verify(self, node: int, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4 verify_only to the coordinator `node`: each partition's answer (NONE when it
        is in the producer's open transaction)."""
        body = verify_partitions_request(VERIFY_VERSION, transactional_id, producer_id, producer_epoch, partitions)
        answer = await self._request(node, ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, body,
                                     f"verifying transactional id {transactional_id}")
        results = {tp: ErrorCode.request_timed_out for tp in partitions}
        if answer is None:
            return results
        if answer.error_code.value != 0:
            return {tp: ErrorCode(answer.error_code.value) for tp in partitions}
        for r in answer.results_by_transaction:
            for t in r.topic_results:
                for p in t.results_by_partition:
                    results[(t.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return results

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
