"""Enumerate the `txn` (application transaction) actions of a Delta table from its `_delta_log`.

delta-rs answers `transaction_version(app_id)` for an app id you already know, but cannot list
them; the offset manager needs the list (one app id per topic-partition). This module reads the
Delta protocol's public files: the last checkpoint (Parquet, `txn` column) and the JSON commits
after it, so it keeps working after log cleanup. Read-only; never writes the log.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow.parquet as pq

log = logging.getLogger(__name__)


def _checkpoint_files(log_dir: Path) -> tuple[int, list[Path]]:
    """(version, files) of the last complete checkpoint, or (-1, []) when there is none."""
    last = log_dir / "_last_checkpoint"
    if last.exists():
        try:
            meta = json.loads(last.read_text())
            version = int(meta["version"])
            parts = meta.get("parts")
            if parts:
                files = [log_dir / f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)]
            else:
                files = [log_dir / f"{version:020d}.checkpoint.parquet"]
            if all(f.exists() for f in files):
                return version, files
        except (OSError, ValueError, KeyError) as e:
            log.warning("ignoring unreadable %s: %s", last, e)
    singles = sorted(log_dir.glob("*.checkpoint.parquet"))
    if singles:
        return int(singles[-1].name.split(".")[0]), [singles[-1]]
    return -1, []


def read_app_transactions(table_path: str | Path) -> tuple[int, dict[str, int]]:
    """(table version, every app id with a txn action at that version mapped to its latest version).

    The version is the last commit read in an unbroken run after the checkpoint, so the txns are one
    consistent snapshot even while other writers commit. (-1, {}) for a table with no commits.
    """
    log_dir = Path(table_path) / "_delta_log"
    found: dict[str, int] = {}
    cp_version, cp_files = _checkpoint_files(log_dir)
    for f in cp_files:
        table = pq.read_table(f, columns=["txn"])
        for row in table.column("txn").to_pylist():
            if row:
                found[row["appId"]] = int(row["version"])
    commits = sorted(
        (int(p.name.split(".")[0]), p) for p in log_dir.glob("*.json") if p.name.split(".")[0].isdigit()
    )
    version = cp_version
    for v, path in commits:
        if v <= cp_version:
            continue
        if v != version + 1:
            break
        for line in path.read_text().splitlines():
            if '"txn"' not in line:
                continue
            action = json.loads(line)
            txn = action.get("txn")
            if txn:
                found[txn["appId"]] = int(txn["version"])
        version = v
    return version, found


def list_app_transactions(table_path: str | Path) -> dict[str, int]:
    """Every app id with a txn action in the table's current state, mapped to its latest version."""
    return read_app_transactions(table_path)[1]
