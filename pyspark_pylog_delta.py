"""Spark finds the `pylog-delta` sink through this module's `DefaultSource` (see PLATFORM.md)."""
from connectors.delta_sink import DeltaSinkDataSource as DefaultSource

__all__ = ["DefaultSource"]
