"""Errors of the `pylog` source and the one place data loss is reported (fail or warn, as Spark does).

Owns the wording of data-loss errors and warnings (Spark's `failOnDataLoss` instructions). Never
decides *whether* data was lost: callers detect it and call `report_data_loss`.
"""
from __future__ import annotations

import functools
import inspect
import logging
from typing import Any, Callable, TypeVar

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


class UserError(Exception):
    """An error whose message says all a user needs (the cause, and the fix): the option, the address, the
    offsets, the table. Raised out of the data sources without the frames of our code (`in_one_line`)."""


class DataLossError(UserError, RuntimeError):
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


# --- how a user's mistake leaves the data sources ---------------------------------------------------

C = TypeVar("C", bound=type)
ENTRY_POINTS = frozenset({"schema", "reader", "streamReader", "writer", "streamWriter", "partitions", "read",
                          "initialOffset", "latestOffset", "write", "commit", "abort"})


def _without_our_frames(fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args: Any, **kwargs: Any) -> Any:
            try:
                yield from fn(*args, **kwargs)
            except UserError as e:
                raise e.with_traceback(None) from None
        return generator

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            raise e.with_traceback(None) from None
    return call


def in_one_line(cls: C) -> C:
    """Class decorator for a data source, reader or writer: a UserError leaves its entry points (the
    methods Spark calls) with no traceback of ours, so that what Spark shows a PySpark user is its wrapper
    line, the error's own line and little else (with spark.sql.execution.pyspark.udf.hideTraceback.enabled
    set, the error's line alone). Other errors keep their traceback: they are bugs to read."""
    for name in ENTRY_POINTS & set(vars(cls)):
        setattr(cls, name, _without_our_frames(vars(cls)[name]))
    return cls
