"""pylog: the Kafka-protocol broker."""
