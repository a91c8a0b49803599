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
