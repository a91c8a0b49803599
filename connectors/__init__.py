"""Sinks that need the source offsets: the exactly-once Delta sink and the offset manager.

`DeltaSinkDataSource` is the Spark data source `pylog-delta`; `OffsetManager` reads a table's
committed offsets back (restart, rewind, reprocess) and can mirror them into a consumer group.
"""
from connectors.delta_sink import DeltaSinkDataSource
from connectors.offset_manager import OffsetManager

__all__ = ["DeltaSinkDataSource", "OffsetManager"]
