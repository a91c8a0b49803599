"""Producer id allocation for idempotent producers (InitProducerId).

Owns the next free producer id, persisted in blocks (`<data dir>/meta/producer_ids.json`) so ids
are never reused across restarts, even after a crash: the file always records the end of the
block in use, and a restart starts at the next block. In cluster mode the blocks come from
ZooKeeper instead (`block_source`, the cluster node's `/latest_producer_id_block` claim), so no two
brokers ever hand out the same id.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

BLOCK = 1000


class ProducerIdManager:
    def __init__(self, data_dir: Path, block_source: Callable[[], tuple[int, int]] | None = None) -> None:
        self._path = Path(data_dir) / "meta" / "producer_ids.json"
        self._block_source = block_source
        start = 0
        if block_source is None and self._path.exists():
            start = int(json.loads(self._path.read_text())["block_end"])
        self._next = start
        self._block_end = start

    def next_id(self) -> int:
        if self._next >= self._block_end:
            if self._block_source is not None:
                start, end = self._block_source()
                self._next, self._block_end = start, end + 1
            else:
                self._block_end = self._next + BLOCK
                self._persist()
        pid = self._next
        self._next += 1
        return pid

    def _persist(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"block_end": self._block_end}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
