"""pylog's Spark data source: `spark.read/readStream.format("pylog")`, `df.write/writeStream.format("pylog")`.

Spark finds the format by itself through the top-level module `pyspark_pylog` (its `DefaultSource`);
`register(spark)` does the same explicitly. Option names, semantics and the row schema are those of
Spark's built-in Kafka connector.
"""
from __future__ import annotations

import kafka_protocol  # noqa: F401  (first: kio without hypothesis, see kafka_protocol/__init__.py)

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparklog.source import PylogDataSource

__all__ = ["PylogDataSource", "register"]


def __getattr__(name: str) -> Any:
    """`sparklog.PylogDataSource` on first use: importing a module of the package (offsets, for the job status
    command and the broker-side tools) does not import pyspark."""
    if name == "PylogDataSource":
        from sparklog.source import PylogDataSource
        return PylogDataSource
    raise AttributeError(f"module 'sparklog' has no attribute {name!r}")


def register(spark: "SparkSession") -> None:
    """Register `format("pylog")` on this session (not needed when `pyspark_pylog` is importable)."""
    from sparklog.source import PylogDataSource
    spark.dataSource.register(PylogDataSource)
