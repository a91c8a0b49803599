"""Bounded reads for batch jobs and reprocessing: `spark.read.format("pylog")`.

Owns the batch plan: resolve `starting*`/`ending*` once on the driver, then tasks from
`planner.plan_tasks` (split by minPartitions / maxRecordsPerPartition, small ranges coalesced).
Never keeps Kafka clients beyond planning; executors read the ranges (`executor.read_task`).
"""
from __future__ import annotations

import logging
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from sparklog.errors import in_one_line
from sparklog.executor import read_task
from sparklog.offset_reader import OffsetReader
from sparklog.offsets import format_tp
from sparklog.options import OptionError, ReadOptions
from sparklog.planner import OffsetRange, RangePartition, plan_tasks
from sparklog.reader_settings import ReaderSettings

log = logging.getLogger(__name__)


@in_one_line
class PylogBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.settings = ReaderSettings.from_options(opts)

    def offset_ranges(self) -> list[OffsetRange]:
        """The resolved [start, end) per partition, before splitting."""
        reader = OffsetReader(self.opts)
        try:
            tps = reader.partitions()
            self._check_topics(tps)
            start = reader.resolve(self.opts.starting, tps, is_start=True)
            end = reader.resolve(self.opts.ending, tps, is_start=False)
        finally:
            reader.close()
        ranges = []
        for tp in sorted(end):
            if tp not in start:
                continue
            if end[tp] < start[tp]:
                raise ValueError(f"The resolved start offset {start[tp]} is greater than the resolved end offset "
                                 f"{end[tp]} for topic partition {format_tp(tp)}. Please check the startingOffsets/"
                                 "endingOffsets (or timestamp) options.")
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        return ranges

    def _check_topics(self, tps: list[tuple[str, int]]) -> None:
        """A subscribed topic the broker does not have is an error naming it (Spark reads it as empty), unless
        failOnMissingTopic=false."""
        if self.opts.strategy.kind != "subscribe" or not self.opts.fail_on_missing_topic:
            return
        missing = sorted(set(self.opts.strategy.topics) - {t for t, _ in tps})
        if missing:
            raise OptionError(f"topic(s) {', '.join(missing)} not found on {self.opts.bootstrap_servers}: check the "
                              "name, or set failOnMissingTopic=false to read a missing topic as empty")

    def partitions(self) -> Sequence[InputPartition]:
        tasks = plan_tasks(self.offset_ranges(), self.opts.min_partitions, self.opts.max_records_per_partition)
        log.info("pylog batch read: %d task(s) over %d record(s)", len(tasks), sum(t.size for t in tasks))
        return tasks

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):   # Spark's single placeholder when nothing to read
            return iter(())
        return read_task(partition, self.settings)
