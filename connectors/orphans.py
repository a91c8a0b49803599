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
from pathlib import Path

log = logging.getLogger(__name__)

_COMMIT = re.compile(r"^(\d{20})\.json$")


def file_prefix(write_id: str) -> str:
    """The start of the name of every data file of write `write_id`."""
    return f"part-{write_id}-"


def committed(table_path: str, write_id: str, since_version: int) -> bool:
    """Whether a commit after `since_version` adds a file of write `write_id`."""
    log_dir = Path(table_path) / "_delta_log"
    if not log_dir.is_dir():
        return False
    needle = file_prefix(write_id)
    for f in log_dir.iterdir():
        m = _COMMIT.match(f.name)
        if m and int(m.group(1)) > since_version:
            try:
                if needle in f.read_text():
                    return True
            except FileNotFoundError:   # removed by a log cleanup meanwhile: older than any version of ours
                continue
    return False


def remove_uncommitted(table_path: str, write_id: str, since_version: int) -> list[str]:
    """Delete the data files of write `write_id` when no commit after `since_version` names one of them;
    the paths removed (relative to the table)."""
    root = Path(table_path)
    if "://" in table_path or not root.is_dir() or committed(table_path, write_id, since_version):
        return []
    removed = []
    for f in root.rglob(f"{file_prefix(write_id)}*"):
        if "_delta_log" in f.relative_to(root).parts or not f.is_file():
            continue
        try:
            f.unlink()
            removed.append(str(f.relative_to(root)))
        except FileNotFoundError:
            pass
    if removed:
        log.info("Delta table %s: removed %d data files of write %s, which did not commit", table_path,
                 len(removed), write_id)
    return sorted(removed)
