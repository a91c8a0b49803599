"""Small durable-file helpers for broker/log: atomic replace with fsync, directory fsync, quiet unlink.

Owns: the write-temp-fsync-rename dance used for checkpoints, producer snapshots and the clean
shutdown marker. Never decides what to write or when.
"""
from __future__ import annotations

import logging
import os
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


def remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
