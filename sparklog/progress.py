"""Mirror a streaming query's progress into a Kafka consumer group (`commitToGroup`).

Owns one driver-side confluent-kafka Consumer that commits offsets for a group through the standard
OffsetCommit API without joining it (no subscribe), so `pylog groups describe` and any Kafka lag
monitor see how far the query got. Best effort: a failed commit is logged, never fails the query.
Never decides what is committed: the stream reader passes the ends of finished batches.
"""
from __future__ import annotations

import logging
from typing import Mapping, Optional

from confluent_kafka import Consumer, KafkaException, TopicPartition as KTP

from sparklog import client_configs
from sparklog.kafka_log import with_logger
from sparklog.offsets import TopicPartition

log = logging.getLogger(__name__)


class GroupProgress:
    def __init__(self, bootstrap_servers: str, kafka_params: Mapping[str, str], group: str) -> None:
        self.group = group
        self._conf = client_configs.group_progress(bootstrap_servers, kafka_params, group)
        self._consumer: Optional[Consumer] = None
        self._last: dict[TopicPartition, int] = {}

    def commit(self, offsets: Mapping[TopicPartition, int]) -> bool:
        """Commit `offsets` (next offset to read, Kafka's convention) for the group; True when the broker took them."""
        todo = {tp: o for tp, o in offsets.items() if o >= 0 and self._last.get(tp) != o}
        if not todo:
            return True
        try:
            if self._consumer is None:
                self._consumer = Consumer(with_logger(self._conf))
            res = self._consumer.commit(offsets=[KTP(t, p, o) for (t, p), o in sorted(todo.items())],
                                        asynchronous=False)
            failed = [r for r in (res or []) if r.error is not None]
            if failed:
                raise KafkaException(failed[0].error)
        except KafkaException as e:
            log.warning("pylog: could not mirror progress into consumer group %r: %s", self.group, e)
            return False
        self._last.update(todo)
        log.debug("pylog: committed %s for group %r", todo, self.group)
        return True

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            finally:
                self._consumer = None
