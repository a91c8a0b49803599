"""Data files a write left behind when it did not commit, removed by the writer itself.

Every file the `pylog-delta` sink writes carries its write's id in its name
(`part-<write id>-<uuid>-c000.zstd.parquet`, connectors.parquet_files). A write that commits names its
files in one Delta commit. One that fails or is stopped (Ctrl-C cancels its Spark tasks mid-file)
leaves the files its tasks had written, which no version of the table references: VACUUM would delete
them once the table's retention passed, but until then they take space and look like data.
`remove_uncommitted` deletes them at once, unless a commit made after the write began names one of
them (the write did commit and the failure came later: its files are the table's).
"""
from __future__ import annotations

import logging
import re

from connectors.table_location import TableFiles, TableRef

log = logging.getLogger(__name__)

_COMMIT = re.compile(r"^(\d{20})\.json$")


def file_prefix(write_id: str) -> str:
    """The start of the name of every data file of write `write_id`."""
    return f"part-{write_id}-"


def committed(table_path: TableRef, write_id: str, since_version: int) -> bool:
    """Whether a commit after `since_version` adds a file of write `write_id`."""
    store = TableFiles(table_path)
    needle = file_prefix(write_id)
    for name in store.names("_delta_log"):
        m = _COMMIT.match(name)
        if m and int(m.group(1)) > since_version:
            try:
                if needle in store.read_text(f"_delta_log/{name}"):
                    return True
            except FileNotFoundError:   # removed by a log cleanup meanwhile: older than any version of ours
                continue
    return False


def remove_uncommitted(table_path: TableRef, write_id: str, since_version: int) -> list[str]:
    """Delete the data files of write `write_id` when no commit after `since_version` names one of them;
    the paths removed (relative to the table)."""
    store = TableFiles(table_path)
    if not store.exists("") or committed(table_path, write_id, since_version):
        return []
    removed = [rel for rel in store.files_named(file_prefix(write_id)) if store.delete(rel)]
    if removed:
        log.info("Delta table %s: removed %d data files of write %s, which did not commit", table_path,
                 len(removed), write_id)
    return sorted(removed)
