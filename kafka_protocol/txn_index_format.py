"""Kafka's transaction index format (`.txnindex`): the aborted transactions whose abort marker lies in one segment.

Entries of 34 bytes: version int16 = 0, producer id int64, first offset int64, last offset int64 (the abort
marker's offset), last stable offset int64 (the partition's LSO after the abort). Shared by the broker's local
index (broker/log/transaction_index.py), its remote segments (broker/tiered) and the Spark source's direct reads
of those segments (sparklog/direct_reads.py), which must drop the same aborted records a read_committed Fetch
would.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size      # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int            # the offset of the abort marker
    last_stable_offset: int     # the partition's LSO once this transaction was aborted


def parse_entries(data: bytes) -> list[AbortedTxn]:
    """The entries of a `.txnindex` file's bytes (a torn last entry ignored)."""
    whole = len(data) - len(data) % ENTRY_SIZE
    return [AbortedTxn(*ENTRY.unpack_from(data, at)[1:]) for at in range(0, whole, ENTRY_SIZE)]


def collect_entries(entries: list[AbortedTxn], fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
    """Aborted transactions overlapping [fetch_offset, upper_bound), and whether the search may stop here (an
    entry's last stable offset reached `upper_bound`: no later segment can add one), as Kafka's
    LocalLog.collectAbortedTransactions."""
    out = []
    for e in entries:
        if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
            out.append(e)
        if e.last_stable_offset >= upper_bound:
            return out, True
    return out, False
