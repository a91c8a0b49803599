"""Spark finds the `pylog` data source through this module's `DefaultSource` (see PLATFORM.md)."""
