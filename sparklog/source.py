"""The `pylog` Spark data source: name, fixed schema, and reader/writer factories.

Owns the entry point Spark instantiates with the user's options and the choice between batch and
streaming readers/writers. Never parses options itself (`options`) or talks to a broker.
"""
from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from sparklog.errors import in_one_line
from sparklog.options import OptionError, parse_batch_options, parse_bool, parse_stream_options, parse_write_options
from sparklog.schema import FORMAT_NAME, spark_schema


@in_one_line
class PylogDataSource(DataSource):
    """`format("pylog")`: Spark's Kafka connector options and schema, over confluent-kafka."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _include_headers(self) -> bool:
        return parse_bool("includeHeaders", str(self.options.get("includeheaders", "false")))

    def schema(self) -> StructType:
        return spark_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        if schema is not None and schema != spark_schema(self._include_headers()):
            raise OptionError("Kafka source has a fixed schema and cannot be set with a custom one")

    def reader(self, schema: StructType) -> DataSourceReader:
        from sparklog.batch_reader import PylogBatchReader

        self._check_schema(schema)
        return PylogBatchReader(parse_batch_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from sparklog.stream_reader import PylogStreamReader

        self._check_schema(schema)
        return PylogStreamReader(parse_stream_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from sparklog.writer import PylogBatchWriter

        return PylogBatchWriter(parse_write_options(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from sparklog.writer import PylogStreamWriter

        # Complete mode (overwrite) appends the whole result each batch, as Spark's Kafka sink does.
        return PylogStreamWriter(parse_write_options(self.options), schema)
