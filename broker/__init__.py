"""pylog: the Kafka-protocol broker."""
import kafka_protocol  # noqa: F401  (first: kio without hypothesis, see kafka_protocol/__init__.py)

