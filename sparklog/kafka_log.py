"""librdkafka's log lines through Python logging, each condition once a minute.

Without a `logger` in its config, librdkafka writes raw `%3|...|FAIL|rdkafka#consumer-1|...` lines to
stderr, one per retry, for as long as a broker is unreachable. Every Kafka client of the data source,
the sinks and the offset manager is configured through `with_logger`, so those lines go to the
`pylog.kafka` logger at WARNING and above, and a repeated condition (the same line apart from its
numbers) is logged once a minute (kafka_protocol.quiet_logging). Consumers hand their log lines over when polled.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

from kafka_protocol.quiet_logging import quiet

LOGGER_NAME = "pylog.kafka"


def client_logger() -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    return quiet(logger)


def with_logger(conf: Mapping[str, Any]) -> dict[str, Any]:
    """`conf` for a confluent-kafka client, with librdkafka's logs routed to `pylog.kafka`."""
    return {**conf, "logger": client_logger()}
