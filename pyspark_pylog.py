"""Spark finds the `pylog` data source through this module's `DefaultSource` (see PLATFORM.md).

Any importable top-level module named `pyspark_*` with a `DefaultSource` is registered under
`DefaultSource.name()` at the first data-source lookup, so `format("pylog")` works with no register call.
"""
from sparklog.source import PylogDataSource as DefaultSource

__all__ = ["DefaultSource"]
