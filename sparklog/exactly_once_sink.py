"""The sink's exactly-once mode (deliveryGuarantee=exactly-once): each Spark task's rows in one Kafka
transaction, the whole micro-batch made visible by the driver's commit.

How a micro-batch `b` of query `q` is written:
- each write task with rows takes the transactional id `<prefix><q>-<task partition>` (InitProducerId
  fences an earlier attempt of the same task and aborts its open transaction), asks whether its part
  of batch `b` was committed before (the group named after the transactional id holds, committed in
  the same transactions, offset `b + 1` on partition 0 of the first topic the task writes), and if so
  writes nothing; else it sends its rows in the transaction, commits that batch marker in it, and
  hands the prepared transaction (id, producer id, epoch) to the driver;
- the driver's `commit` ends every prepared transaction with EndTxn(commit); `abort` with an abort.
A replayed batch (a crash after some commits, before Spark recorded the batch) therefore writes only
the tasks whose transaction did not commit: read_committed consumers see every row exactly once. This
needs the replay to give each task the same rows, which Spark's deterministic micro-batches do (the
same offsets; the shuffle partition count is pinned in the checkpoint).

A batch write (`df.write`) uses the same transactions with a fresh id per job and no marker: all of it
becomes visible at once, or nothing. Transactions still open after a crash are aborted when the task
runs again (fenced) or when kafka.transaction.timeout.ms passes (the coordinator aborts them).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator, List, Optional

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from sparklog import client_configs
from sparklog.faults import kill_at
from sparklog.native_sink import NativeTaskProducer
from sparklog.options import WriteOptions
from sparklog.transactional_producer import TransactionError, TxnHandle, end_transaction

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"      # Spark's StreamExecution.QUERY_ID_KEY
BATCH_ID_PROPERTY = "streaming.sql.batchId"      # Spark's MicroBatchExecution.BATCH_ID_KEY


@dataclass
class TxnWriteResult(WriterCommitMessage):
    records: int
    transaction: Optional[TxnHandle]     # None: nothing to commit (no rows, or already committed)
    already_committed: bool = False


def stream_task_ids() -> tuple[str, int, int]:
    """(query id, batch id, task partition) of the running streaming write task."""
    ctx = TaskContext.get()
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
    batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    if ctx is None or query_id is None or batch_id is None:
        raise TransactionError("pylog sink: deliveryGuarantee=exactly-once found no streaming query id or batch id "
                               "in the task (a continuous-processing trigger is not supported)")
    return query_id, int(batch_id), ctx.partitionId()


def _first_topic(opts: WriteOptions, batch: pa.RecordBatch) -> str:
    if opts.topic:
        return opts.topic
    names = [n.lower() for n in batch.schema.names]
    topic = batch.column(names.index("topic"))[0].as_py()
    if topic is None:
        raise ValueError("null topic present in the data. Use the topic option for setting a topic.")
    return str(topic)


def write_task(opts: WriteOptions, batches: Iterator[pa.RecordBatch], transactional_id: str,
               batch_id: Optional[int]) -> TxnWriteResult:
    """One task's rows in one transaction, prepared (not committed); `batch_id` (streams) adds the batch
    marker and skips a batch this task committed before."""
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return TxnWriteResult(0, None)
    producer = NativeTaskProducer(opts.topic, client_configs.native_producer(opts), transactional_id,
                                  opts.transaction_timeout_ms)
    try:
        txn = producer.transaction
        assert txn is not None
        marker = (_first_topic(opts, first), 0)
        if batch_id is not None:
            done = txn.committed_offset(transactional_id, marker)
            if done is not None and done > batch_id:
                log.info("pylog sink: %s already committed batch %d; not writing it again", transactional_id, batch_id)
                return TxnWriteResult(0, None, already_committed=True)
        producer.send_batch(first)
        for batch in batches:
            if batch.num_rows:
                producer.send_batch(batch)
        if batch_id is not None:
            txn.commit_offsets(transactional_id, {marker: (batch_id + 1, f"pylog exactly-once sink: batch {batch_id}")})
        return TxnWriteResult(producer.sent, txn.handle())
    finally:
        producer.close()


def commit(opts: WriteOptions, messages: List[Optional[WriterCommitMessage]], what: str,
           batch_id: Optional[int] = None) -> int:
    """End every prepared transaction with a commit; the records made visible."""
    config = client_configs.native_producer(opts)
    results = [m for m in messages if isinstance(m, TxnWriteResult)]
    for m in results:
        if m.transaction is not None:
            end_transaction(config, m.transaction, commit=True)
    if batch_id is not None:
        kill_at("PYLOG_FAULT_KILL_AFTER_TXN_COMMIT", batch_id)
    records = sum(m.records for m in results)
    skipped = sum(1 for m in results if m.already_committed)
    log.info("pylog sink: %s committed %d record(s) in %d transaction(s)%s", what, records,
             sum(1 for m in results if m.transaction is not None),
             f"; {skipped} task(s) had committed it before" if skipped else "")
    return records


def abort(opts: WriteOptions, messages: List[Optional[WriterCommitMessage]], what: str) -> None:
    """Abort the prepared transactions Spark reports (the others are fenced or time out)."""
    config = client_configs.native_producer(opts)
    for m in messages:
        if isinstance(m, TxnWriteResult) and m.transaction is not None:
            try:
                end_transaction(config, m.transaction, commit=False)
            except Exception as e:  # noqa: BLE001 - best effort: the coordinator aborts it on timeout anyway
                log.warning("pylog sink: %s: could not abort %s: %s", what, m.transaction.transactional_id, e)
