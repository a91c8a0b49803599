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
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from broker.log.constants import TMP_SUFFIX

log = logging.getLogger(__name__)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable: bool = True, mode: int = 0o644) -> None:
    """Replace `path` with `data` atomically; with `durable`, fsync the file and its directory. The file
    has `mode` from its first byte (0o600 for secrets)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)     # an earlier leftover temp file keeps its mode otherwise
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


_SYNC_THREADS = 16
_sync_pool: ThreadPoolExecutor | None = None


def _fsync_all(fds: Sequence[int]) -> None:
    global _sync_pool
    if len(fds) < 4:
        for fd in fds:
            os.fsync(fd)
        return
    if _sync_pool is None:
        _sync_pool = ThreadPoolExecutor(_SYNC_THREADS, thread_name_prefix="fsync")
    for _ in _sync_pool.map(os.fsync, fds):
        pass


def atomic_write_many(files: Sequence[tuple[Path, bytes]], *, mode: int = 0o644) -> None:
    """`atomic_write(path, data, durable=True)` for each (path, data), as one batch: every file written to its
    temp name, all fsync'd, all renamed into place, then every directory fsync'd, so on return each file is
    durable and none was ever visible half written. Blocks until done, as `atomic_write` does."""
    fds: list[int] = []
    try:
        for path, data in files:
            tmp = path.with_name(path.name + TMP_SUFFIX)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            fds.append(fd)
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        _fsync_all(fds)
    finally:
        for fd in fds:
            os.close(fd)
    for path, _ in files:
        os.replace(path.with_name(path.name + TMP_SUFFIX), path)
    directories = sorted({str(path.parent) for path, _ in files})
    dir_fds = [os.open(d, os.O_RDONLY) for d in directories]
    try:
        _fsync_all(dir_fds)
    finally:
        for fd in dir_fds:
            os.close(fd)


def remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
