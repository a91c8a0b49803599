"""pylog's Spark data source: `spark.read/readStream.format("pylog")`, `df.write/writeStream.format("pylog")`.

Spark finds the format by itself through the top-level module `pyspark_pylog` (its `DefaultSource`);
`register(spark)` does the same explicitly. Option names, semantics and the row schema are those of
Spark's built-in Kafka connector.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from sparklog.source import PylogDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PylogDataSource", "register"]


def register(spark: "SparkSession") -> None:
    """Register `format("pylog")` on this session (not needed when `pyspark_pylog` is importable)."""
    spark.dataSource.register(PylogDataSource)
