"""Storage constants: file names, on-disk entry sizes and tuning knobs of broker/log, in one place.

Owns: every magic number the storage layer uses (suffixes, entry sizes, read chunk sizes, the
idempotent-producer window). The record batch format's own constants are kafka_protocol.record_batch's;
topic settings come from `broker.config.TopicConfig`.
"""
from __future__ import annotations

# --- File names ------------------------------------------------------------------------------
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SNAPSHOT_SUFFIX = ".snapshot"
TXN_INDEX_SUFFIX = ".txnindex"   # aborted transactions whose abort marker is in the segment
DELETED_SUFFIX = ".deleted"       # appended to a file name when its segment is deleted
TMP_SUFFIX = ".tmp"               # atomic-write staging files; removed at startup
OFFSET_DIGITS = 20                # file names are the zero-padded 20-digit base offset
LOG_START_OFFSET_FILE = "log-start-offset.checkpoint"
HIGH_WATERMARK_FILE = "high-watermark.checkpoint"     # replicated partitions only
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"          # Kafka's name and format
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
IGNORED_TOPIC_DIRS = frozenset({"__cluster_metadata"})

# --- Indexes ---------------------------------------------------------------------------------
OFFSET_INDEX_ENTRY_SIZE = 8       # relative offset int32, position int32
TIME_INDEX_ENTRY_SIZE = 12        # timestamp int64, relative offset int32

# --- I/O tuning ------------------------------------------------------------------------------
RECOVERY_CHUNK_BYTES = 16 * 1024 * 1024   # recovery reads the tail segment in chunks this big
HEADER_WINDOW_BYTES = 16 * 1024           # header scans pread windows this big

# --- Idempotent producers --------------------------------------------------------------------
PRODUCER_BATCH_WINDOW = 5         # batches remembered per producer for duplicate detection
SNAPSHOTS_TO_KEEP = 2


def offset_file_name(offset: int, suffix: str) -> str:
    """`00000000000000000042.log` for offset 42 and suffix `.log`."""
    return f"{offset:0{OFFSET_DIGITS}d}{suffix}"
LEADER_EPOCH = 0          # one broker, leaders never change: every partition's leader epoch is 0
