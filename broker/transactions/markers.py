"""Writing transaction markers into the partitions this broker leads (WriteTxnMarkers' work).

One function both the local transaction coordinator and the WriteTxnMarkers API use: append the
marker to each partition as its leader, and when the partition is one of `__consumer_offsets`, let
the group coordinator make the transaction's offset commits visible (commit) or drop them (abort).
A partition that no longer exists counts as done, as in Kafka (its marker has nowhere to go).
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

from broker.replica_manager import ReplicaManager
from kafka_protocol.control_records import Marker
from kafka_protocol.errors import ErrorCode, UnknownTopicOrPartitionError, error_code_of
from kafka_protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

# (partition of __consumer_offsets, producer id, committed): the group coordinator's part
OffsetsMarkerHook = Callable[[int, int, bool], None]


def write_markers(replicas: ReplicaManager, marker: Marker, partitions: Iterable[TopicPartition],
                  on_offsets_marker: OffsetsMarkerHook | None) -> dict[TopicPartition, ErrorCode]:
    """Append `marker` to every partition; the error of each (NONE for a partition that is gone)."""
    results: dict[TopicPartition, ErrorCode] = {}
    for topic, partition in partitions:
        try:
            replicas.append_marker(topic, partition, marker)
            if topic == OFFSETS_TOPIC and on_offsets_marker is not None:
                on_offsets_marker(partition, marker.producer_id, marker.commit)
            results[(topic, partition)] = ErrorCode.none
        except UnknownTopicOrPartitionError:
            log.info("transaction marker for producer %d: %s-%d no longer exists", marker.producer_id, topic,
                     partition)
            results[(topic, partition)] = ErrorCode.none
        except Exception as e:  # noqa: BLE001 - each partition answers with its own code
            results[(topic, partition)] = error_code_of(e)
    return results
