"""Enumerate the `txn` (application transaction) actions of a Delta table from its `_delta_log`.

delta-rs answers `transaction_version(app_id)` for an app id you already know, but cannot list
them; the offset manager needs the list (one app id per topic-partition). This module reads the
Delta protocol's public files: the last checkpoint and the JSON commits after it, so it keeps
working after log cleanup (the commits before a checkpoint deleted, as delta-spark and delta-rs do).
Every checkpoint kind of the protocol is read: classic single-file and multi-part Parquet, and V2
checkpoints (`<v>.checkpoint.<uuid>.json|parquet`, written by delta-spark with
delta.checkpointPolicy=v2), whose top-level file holds the txn actions (sidecars hold only files).
Only `<20 digits>.json` files are commits: V2 checkpoints and log compactions also end in `.json`.
A log that cannot be read as one unbroken run from a checkpoint raises TableLogError, never an empty
(or stale) state: an empty state would make a job start over and duplicate what the table holds.
The log is read through the table's store (connectors.table_location: a local disk or S3). Read-only; never
writes the log.
"""
from __future__ import annotations

import json
import logging
import io
import re
from pathlib import PurePosixPath

import pyarrow.parquet as pq

from connectors.errors import TableLogError
from connectors.table_location import TableFiles, TableRef

log = logging.getLogger(__name__)

_COMMIT = re.compile(r"^(\d{20})\.json$")
_SINGLE = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_PART = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2 = re.compile(r"^(\d{20})\.checkpoint\.[0-9A-Za-z-]+\.(?:json|parquet)$")
_ATTEMPTS = 3   # a log cleanup between reading the checkpoint and listing the commits: read again


_LOG = "_delta_log"


def _from_last_checkpoint(files: TableFiles, names: list[str]) -> tuple[int, list[str]] | None:
    """The checkpoint `_last_checkpoint` names, when all its files are there (log file names)."""
    if "_last_checkpoint" not in names:
        return None
    try:
        meta = json.loads(files.read_text(f"{_LOG}/_last_checkpoint"))
        version = int(meta["version"])
        parts = meta.get("parts")
        v2 = meta.get("v2Checkpoint")
        if v2 and v2.get("path"):
            wanted = [PurePosixPath(str(v2["path"])).name]
        elif parts:
            wanted = [f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)]
        else:
            wanted = [f"{version:020d}.checkpoint.parquet"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        log.warning("ignoring unreadable %s/_last_checkpoint: %s", files.path(_LOG), e)
        return None
    return (version, wanted) if all(f in names for f in wanted) else None


def _listed_checkpoints(names: list[str], at_most: int | None) -> tuple[int, list[str]]:
    """The newest complete checkpoint among the listed files (any kind) at or before `at_most`, or (-1, [])."""
    found: dict[int, list[str]] = {}
    parts: dict[tuple[int, int], set[int]] = {}
    for name in names:
        if m := _SINGLE.match(name) or _V2.match(name):
            if at_most is None or int(m.group(1)) <= at_most:
                found.setdefault(int(m.group(1)), [name])
        elif m := _PART.match(name):
            if at_most is None or int(m.group(1)) <= at_most:
                parts.setdefault((int(m.group(1)), int(m.group(3))), set()).add(int(m.group(2)))
    for (version, total), seen in parts.items():
        if seen == set(range(1, total + 1)) and version not in found:
            found[version] = [f"{version:020d}.checkpoint.{i:010d}.{total:010d}.parquet" for i in range(1, total + 1)]
    if not found:
        return -1, []
    version = max(found)
    return version, found[version]


def _checkpoint_txns(files: TableFiles, names: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        if name.endswith(".json"):   # a V2 checkpoint's top-level file: one action per line
            for line in files.read_text(f"{_LOG}/{name}").splitlines():
                if '"txn"' in line:
                    txn = json.loads(line).get("txn")
                    if txn:
                        out[txn["appId"]] = int(txn["version"])
            continue
        parquet = pq.ParquetFile(io.BytesIO(files.read_bytes(f"{_LOG}/{name}")))
        if "txn" not in parquet.schema_arrow.names:
            continue
        for row in parquet.read(columns=["txn"]).column("txn").to_pylist():
            if row:
                out[row["appId"]] = int(row["version"])
    return out


def _read_once(files: TableFiles, at: int | None) -> tuple[int, dict[str, int], int | None]:
    """(version, txns, first commit version after the checkpoint when it does not follow it, else None),
    as of version `at` (None: the latest)."""
    names = files.names(_LOG)
    chosen = _from_last_checkpoint(files, names)
    if chosen and at is not None and chosen[0] > at:
        chosen = None
    listed = _listed_checkpoints(names, at)
    cp_version, cp_files = chosen if chosen and chosen[0] >= listed[0] else listed
    found = _checkpoint_txns(files, cp_files)
    commits = sorted((int(m.group(1)), n) for n in names if (m := _COMMIT.match(n)))
    version = cp_version
    for v, name in commits:
        if v <= cp_version:
            continue
        if at is not None and v > at:
            break
        if v != version + 1:
            if version == cp_version:   # the run after the checkpoint is broken from its start
                return version, found, v
            break
        try:
            text = files.read_text(f"{_LOG}/{name}")
        except FileNotFoundError:   # removed by a log cleanup while reading
            return version, found, v
        for line in text.splitlines():
            if '"txn"' not in line:
                continue
            txn = json.loads(line).get("txn")
            if txn:
                found[txn["appId"]] = int(txn["version"])
        version = v
    return version, found, None


def read_app_transactions(table_path: TableRef, version: int | None = None) -> tuple[int, dict[str, int]]:
    """(table version, every app id with a txn action at that version mapped to its latest version).

    The version is the last commit read in an unbroken run after the checkpoint, so the txns are one
    consistent snapshot even while other writers commit. (-1, {}) for a table with no commits.
    With `version`, the txns as of that version, which must be retained: a checkpoint at or before it
    and every commit from there to it still in the log (else TableLogError naming what is retained).
    Raises TableLogError when the commits after the newest readable checkpoint do not follow it.
    """
    files = TableFiles(table_path)
    for _ in range(_ATTEMPTS):
        read, found, gap = _read_once(files, version)
        if version is not None and (gap is not None or read != version):
            raise TableLogError(str(files.location), f"version {version} is not retained in its log ({_retained(files)}); "
                                "choose a retained version")
        if gap is None:
            return read, found
    raise TableLogError(str(files.location), "its log cannot be read: the commits after "
                        + (f"checkpoint {read}" if read >= 0 else "the start (no readable checkpoint)")
                        + f" begin at version {gap}, so the offsets and batch markers pylog keeps in the log "
                        "are unknown. Is a checkpoint file missing, or of a kind this reader does not know?")


def _retained(files: TableFiles) -> str:
    """'versions A to B are retained' (the versions the table can be read as of), for error messages."""
    names = files.names(_LOG)
    commits = sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))
    cps = sorted({int(m.group(1)) for n in names if (m := _SINGLE.match(n) or _V2.match(n) or _PART.match(n))})
    if not commits:
        return "it has no commits"
    first = commits[0] if commits[0] == 0 else min([c for c in cps if c >= commits[0] - 1] or [commits[-1]])
    return f"versions {first} to {commits[-1]} are retained"


def list_app_transactions(table_path: TableRef) -> dict[str, int]:
    """Every app id with a txn action in the table's current state, mapped to its latest version."""
    return read_app_transactions(table_path)[1]
