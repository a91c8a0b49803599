"""LeaderEpochCache: the `leader-epoch-checkpoint` file of one partition (Kafka's LeaderEpochFileCache).

Owns: the (leader epoch, start offset) entries of one partition log: the first offset written in
each leader epoch; Kafka's rules to add and truncate them; the answer to OffsetsForLeaderEpoch
(`end_offset_for`); the checkpoint file in Kafka's format, replaced atomically on every change:

    0              <- format version
    2              <- number of entries
    0 0            <- "epoch startOffset", one line each, in order
    3 120

Invariants: epochs strictly increase and start offsets strictly increase along the entries; every
epoch and start offset is >= 0. Changes are rare (a new leader epoch, a truncation), so each one
rewrites the whole file (fsync'd); reads never touch the file.

Never reads the log, never knows about the protocol, ZooKeeper or which replica leads: the
partition log tells it which epochs it wrote, and where.
"""
from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from pathlib import Path

from broker.log.constants import LEADER_EPOCH_FILE
from broker.log.fileutil import atomic_write

__all__ = ["LEADER_EPOCH_CHECKPOINT_FILE", "UNDEFINED_EPOCH", "UNDEFINED_OFFSET", "LeaderEpochCache"]

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = LEADER_EPOCH_FILE
UNDEFINED_EPOCH = -1          # OffsetsForLeaderEpoch: no such epoch
UNDEFINED_OFFSET = -1         # OffsetsForLeaderEpoch: no end offset
_FORMAT_VERSION = 0


class LeaderEpochCache:
    """The start offset of every leader epoch of one partition, persisted in `path`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for epoch, offset in self._read():
            self._assign(epoch, offset)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.path}, {self.entries})"

    # --- reading -----------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs, oldest first."""
        return list(zip(self._epochs, self._offsets))

    def __len__(self) -> int:
        return len(self._epochs)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (the largest epoch <= `requested_epoch`, the end offset of that epoch).

        The end offset is the start offset of the next higher epoch, or `log_end_offset` when the
        latest epoch is requested. (UNDEFINED_EPOCH, UNDEFINED_OFFSET) for an undefined request, an
        empty cache, or an epoch above the latest. An epoch below the first entry answers with the
        requested epoch and the first entry's start offset, as Kafka's code does: the older epochs'
        data has been removed, and the follower truncates to where this log begins.
        """
        epochs = self._epochs
        if requested_epoch == UNDEFINED_EPOCH or not epochs:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if higher == 0:
            return requested_epoch, self._offsets[0]
        return epochs[higher - 1], self._offsets[higher]

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in which `offset` was written: the last entry starting at or before it; None before the first."""
        i = bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    # --- changing --------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, defer: list[tuple[Path, bytes]] | None = None) -> None:
        """Record that `epoch` starts at `start_offset` (Kafka's rules; written to the file if changed).

        A higher epoch than the latest is appended. The latest epoch again is a no-op, unless its
        start offset moves down. An entry that conflicts with later ones (an epoch not above theirs,
        or a start offset not above theirs) first removes those later entries, then is added.
        With `defer`, the file's new content is appended there instead, for the caller to write with
        others at once (`fileutil.atomic_write_many`) before anything relies on it.
        """
        if self._assign(epoch, start_offset):
            if defer is None:
                self._write()
            else:
                defer.append(self._checkpoint())

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry (epoch {epoch}, start offset {start_offset}) for {self.path}")
        epochs, offsets = self._epochs, self._offsets
        if epochs and epoch == epochs[-1] and start_offset >= offsets[-1]:
            return False
        removed: list[tuple[int, int]] = []
        while epochs and (epochs[-1] >= epoch or offsets[-1] >= start_offset):
            removed.append((epochs.pop(), offsets.pop()))
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            log.warning("%s: new epoch entry (%d, %d) removed conflicting entries %s",
                        self.path, epoch, start_offset, removed[::-1])
        epochs.append(epoch)
        offsets.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries whose start offset is >= `end_offset` (the log was truncated there)."""
        if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
            return
        keep = bisect_left(self._offsets, end_offset)
        removed = self.entries[keep:]
        del self._epochs[keep:], self._offsets[keep:]
        log.debug("%s: removed %s truncating to end offset %d", self.path, removed, end_offset)
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop entries wholly before it; the entry covering it starts there."""
        covering = bisect_right(self._offsets, start_offset) - 1
        if covering < 0 or (covering == 0 and self._offsets[0] == start_offset):
            return
        epoch = self._epochs[covering]
        del self._epochs[:covering + 1], self._offsets[:covering + 1]
        self._epochs.insert(0, epoch)
        self._offsets.insert(0, start_offset)
        log.debug("%s: epoch %d now starts at the log start offset %d", self.path, epoch, start_offset)
        self._write()

    def clear(self) -> None:
        """Remove every entry (the log was emptied)."""
        if not self._epochs and not self.path.exists():
            return
        self._epochs.clear()
        self._offsets.clear()
        self._write()

    # --- the file ------------------------------------------------------------------------------

    def _checkpoint(self) -> tuple[Path, bytes]:
        lines = [str(_FORMAT_VERSION), str(len(self._epochs))]
        lines += [f"{e} {o}" for e, o in zip(self._epochs, self._offsets)]
        return self.path, ("\n".join(lines) + "\n").encode()

    def _write(self) -> None:
        atomic_write(*self._checkpoint())

    def _read(self) -> list[tuple[int, int]]:
        """The file's entries; [] if it is missing. A malformed file is an error naming it (as Kafka's)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        lines = text.splitlines()
        try:
            if int(lines[0]) != _FORMAT_VERSION:
                raise ValueError(f"unknown version {lines[0]!r}")
            count = int(lines[1])
            entries = []
            for line in lines[2:2 + count]:
                epoch, offset = line.split()
                entries.append((int(epoch), int(offset)))
            if len(entries) != count or any(line.strip() for line in lines[2 + count:]):
                raise ValueError(f"expected {count} entries, found {len(lines) - 2}")
        except (IndexError, ValueError) as e:
            raise ValueError(f"malformed leader epoch checkpoint {self.path}: {e}") from None
        return entries
