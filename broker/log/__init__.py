"""Storage: segments, offset and time indexes, partition logs, the log manager.

Plain synchronous classes called from the broker's one event-loop thread; nothing here knows the
Kafka network protocol or asyncio. Entry points: `LogManager` (all partitions of a data dir) and
`PartitionLog` (one partition: append, read, offsets by timestamp, retention, DeleteRecords).
"""
from broker.log.fetch_slice import FetchSlice
from broker.log.log_manager import LogManager
from broker.log.partition_log import AppendResult, PartitionLog

__all__ = ["AppendResult", "FetchSlice", "LogManager", "PartitionLog"]
