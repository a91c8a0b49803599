"""Producer id allocation for idempotent producers (InitProducerId).

Owns the next free producer id, persisted in blocks (`<data dir>/meta/producer_ids.json`) so ids
are never reused across restarts, even after a crash: the file always records the end of the
block in use, and a restart starts at the next block.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

BLOCK = 1000


class ProducerIdManager:
    def __init__(self, data_dir: Path) -> None:
        self._path = Path(data_dir) / "meta" / "producer_ids.json"
        start = 0
        if self._path.exists():
            start = int(json.loads(self._path.read_text())["block_end"])
        self._next = start
        self._block_end = start

    def next_id(self) -> int:
        if self._next >= self._block_end:
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
