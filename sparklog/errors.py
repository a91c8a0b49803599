"""Errors of the `pylog` source and the one place data loss is reported (fail or warn, as Spark does).

Owns the wording of data-loss errors and warnings (Spark's `failOnDataLoss` instructions). Never
decides *whether* data was lost: callers detect it and call `report_data_loss`.
"""
from __future__ import annotations

import logging

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data was "
    "aged out by Kafka or the topic may have been deleted before all the data in the topic was processed. "
    "If you don't want your streaming query to fail on such cases, set the source option \"failOnDataLoss\" "
    "to \"false\"."
)
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data was "
    "aged out by Kafka or the topic may have been deleted before all the data in the topic was processed. "
    "If you want your streaming query to fail on such cases, set the source option \"failOnDataLoss\" to "
    "\"true\"."
)


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (retention, DeleteRecords, topic re-creation) and failOnDataLoss is true."""


class RangeReadError(RuntimeError):
    """Reading one offset range failed; the message names the topic-partition and offsets."""


def report_data_loss(message: str, fail_on_data_loss: bool, logger: logging.Logger) -> None:
    """Raise `DataLossError` when failOnDataLoss is true, else log a warning and let the caller go on."""
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
    logger.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)


# --- what the executors' readers report, worded once for both read paths ---------------------------

def records_aged_out(topic: str, partition: int, offset: int, log_start: int, end: int) -> str:
    return (f"Cannot fetch offset {offset} (TopicPartition: {topic}-{partition}): the log now starts at offset "
            f"{log_start}; skipping [{offset}, {min(log_start, end)})")


def end_beyond_log(topic: str, partition: int, end: int, high_watermark: int) -> str:
    return (f"The end offset {end} of {topic}-{partition} is beyond the partition's high watermark {high_watermark} "
            f"(was the topic deleted, re-created or truncated?); reading up to {high_watermark} only")


def partition_gone(topic: str, partition: int, offset: int, end: int) -> str:
    return f"Topic-partition {topic}-{partition} no longer exists; offsets [{offset}, {end}) cannot be read"


def corrupt_records(topic: str, partition: int, offset: int, end: int, detail: str) -> str:
    return (f"The records of {topic}-{partition} at offset {offset} are corrupt ({detail}); "
            f"offsets [{offset}, {end}) cannot be read")
