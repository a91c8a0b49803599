"""librdkafka's log lines go through logging, a repeated condition once per interval (sparklog.kafka_log)."""
import logging

from kafka_protocol.quiet_logging import OncePerInterval


def _record(msg: str) -> logging.LogRecord:
    return logging.LogRecord("pylog.kafka", logging.WARNING, __file__, 1, msg, None, None)


def test_the_same_condition_with_other_numbers_is_let_through_once_per_interval():
    f = OncePerInterval(interval=3600)
    assert f.filter(_record("Connect to ipv4#127.0.0.1:9092 failed (after 0ms in state CONNECT)"))
    assert not f.filter(_record("Connect to ipv4#127.0.0.1:9092 failed (after 12ms in state CONNECT)"))
    assert f.filter(_record("Metadata request failed: Local: Timed out"))
    assert OncePerInterval(interval=0).filter(_record("x")) and OncePerInterval(interval=0).filter(_record("x"))
