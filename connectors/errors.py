"""Errors of the Delta connectors: one base that names the table (and the version where it matters).

Owns the wording users see when a commit cannot be made. Never decides anything.
"""
from __future__ import annotations

from sparklog.errors import UserError


class DeltaSinkError(UserError, RuntimeError):
    """A Delta commit of the sink could not be made; the message names the table and version."""

    def __init__(self, table: object, message: str, version: int | None = None) -> None:
        """`table`: its path or URI, or a connectors.table_location.TableLocation (shown as its URI)."""
        where = f"Delta table {table}" + (f" (version {version})" if version is not None else "")
        super().__init__(f"{where}: {message}")
        self.table = str(table)
        self.version = version


class SchemaMismatchError(DeltaSinkError, ValueError):
    """The batch's columns cannot be appended to the table as it is."""


class FencedError(DeltaSinkError):
    """A newer generation of the same app id owns the table (a reprocess replace, or another stream
    started with the same app id): this writer must stop. Nothing it wrote is committed."""


class CommitConflictError(DeltaSinkError):
    """Another writer committed since this writer read the table, and this commit would undo it
    (an overwrite), or retries ran out. Nothing was committed."""


class UnsupportedTableError(DeltaSinkError):
    """The table uses a Delta feature pylog-delta cannot write correctly (the message names it); nothing
    was committed. Writing anyway would store rows readers cannot see, or break the table's rules."""


class TableLogError(DeltaSinkError):
    """The table's Delta log cannot be read as one unbroken run from a checkpoint, so the offsets and
    batch markers pylog keeps there are unknown. Nothing is guessed: starting over would duplicate."""


class NotContiguousError(DeltaSinkError):
    """A batch does not start where the table says its app stopped (connectors.contiguity): committing it
    would skip or repeat records. Nothing was committed."""


class CheckpointMismatchError(DeltaSinkError):
    """A streaming checkpoint belongs to another table or app (connectors.checkpoint_owner): resuming from
    it would read another query's offsets. Nothing was changed."""


class MissingFilesError(DeltaSinkError):
    """Data files a batch wrote were gone before its commit (a VACUUM with a short retention beside the
    writer): committing would add rows nobody can read. Nothing was committed."""


class UnsupportedLocationError(DeltaSinkError):
    """A table URI of a scheme the sink cannot write (it writes local disks and S3-compatible stores)."""


class StoreUnreachableError(DeltaSinkError):
    """The object store a table lives in does not answer, or refuses the credentials: the message names the
    endpoint and the settings that choose it."""

