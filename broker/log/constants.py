"""Storage constants: file names, on-disk entry sizes and tuning knobs of broker/log, in one place.

Owns: every magic number the storage layer uses (suffixes, entry sizes, read chunk sizes, the
record batch v2 header layout sizes, the idempotent-producer window). Never holds topic settings:
those come from `broker.config.TopicConfig`.
"""
from __future__ import annotations

# --- Record batch v2 -------------------------------------------------------------------------
HEADER_SIZE = 61          # bytes of the batch header; records start here
LOG_OVERHEAD = 12         # baseOffset int64 + batchLength int32: bytes not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD   # smallest legal batchLength (49)
CRC_START = 21            # CRC32C covers bytes [21, end of batch)
CURRENT_MAGIC = 2
NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1

# --- File names ------------------------------------------------------------------------------
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SNAPSHOT_SUFFIX = ".snapshot"
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
