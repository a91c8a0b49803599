"""Apache Kafka as a test peer: see peers/kafka.py (shared with the benchmarks)."""
from __future__ import annotations

from peers.kafka import JARS, REPO, KafkaBroker, KafkaZkBroker, _classpath, _java, kafka_zk_cluster

__all__ = ["JARS", "REPO", "KafkaBroker", "KafkaZkBroker", "_classpath", "_java", "kafka_zk_cluster"]
