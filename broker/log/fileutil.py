"""Small durable-file helpers for broker/log: atomic replace with fsync, directory fsync, quiet unlink.

Owns: the write-temp-fsync-rename dance used for checkpoints, producer snapshots and the clean
shutdown marker, one file at a time (`atomic_write`) or many at once (`atomic_write_many`: their fsyncs
issued together from a few threads, so the file system commits them in a few journal transactions instead
of one each: a broker taking over a thousand leaderships writes a thousand leader-epoch checkpoints).
Never decides what to write or when.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from broker.log.constants import TMP_SUFFIX

log = logging.getLogger(__name__)
T = TypeVar("T")


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(path: Path, data: bytes, mode: int) -> int:
    """`data` written to `path`'s temp name, mode `mode` from its first byte (0o600 for secrets: an earlier leftover
    temp file keeps its mode otherwise); the open descriptor, for the caller to fsync and close."""
    fd = os.open(path.with_name(path.name + TMP_SUFFIX), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        raise
    return fd


def atomic_write(path: Path, data: bytes, *, durable: bool = True, mode: int = 0o644) -> None:
    """Replace `path` with `data` atomically; with `durable`, fsync the file and its directory. The file
    has `mode` from its first byte (0o600 for secrets)."""
    fd = _write_temp(path, data, mode)
    try:
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(path.with_name(path.name + TMP_SUFFIX), path)
    if durable:
        fsync_dir(path.parent)


_SYNC_THREADS = 16
_sync_pool: ThreadPoolExecutor | None = None


def _each(sync: Callable[[T], None], items: Sequence[T]) -> None:
    """`sync(item)` for every item, from a few threads at once when there are more than a handful."""
    global _sync_pool
    if len(items) < 4:
        for item in items:
            sync(item)
        return
    if _sync_pool is None:
        _sync_pool = ThreadPoolExecutor(_SYNC_THREADS, thread_name_prefix="fsync")
    for _ in _sync_pool.map(sync, items):
        pass


def atomic_write_many(files: Sequence[tuple[Path, bytes]], *, mode: int = 0o644) -> None:
    """`atomic_write(path, data, durable=True)` for each (path, data), as one batch: every file written to its
    temp name, all fsync'd, all renamed into place, then every directory fsync'd, so on return each file is
    durable and none was ever visible half written. Blocks until done, as `atomic_write` does."""
    fds: list[int] = []
    try:
        for path, data in files:
            fds.append(_write_temp(path, data, mode))
        _each(os.fsync, fds)
    finally:
        for fd in fds:
            os.close(fd)
    for path, _ in files:
        os.replace(path.with_name(path.name + TMP_SUFFIX), path)
    _each(fsync_dir, sorted({path.parent for path, _ in files}))


def remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
