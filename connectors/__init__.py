"""Sinks that need the source offsets: the exactly-once Delta sink and the offset manager.

`connectors.delta_sink.DeltaSinkDataSource` is the Spark data source `pylog-delta` (registered by
the top-level module `pyspark_pylog_delta`); `connectors.offset_manager.OffsetManager` reads a
table's committed offsets back (restart, rewind, reprocess) and can mirror them into a consumer group.
"""
