"""The `odradek` data source: the entry point Spark instantiates from the options of a query.

Spark pickles this object to Python workers on the driver (planning, the streaming source
runner) and on executors (tasks), so it holds only the option map; option checking happens in the
reader/writer factories, which Spark calls on the driver while the query is planned, so a bad
option fails the query before any data moves.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spark_connector.errors import OptionError
from spark_connector.options import include_headers, parse_read_options, parse_write_options
from spark_connector.reader import OdradekBatchReader, OdradekStreamReader
from spark_connector.schema import kafka_schema
from spark_connector.writer import OdradekBatchWriter, OdradekStreamWriter


class OdradekDataSource(DataSource):
    """Kafka-protocol topics as a Spark table, read and written with kafka-python (no JVM jars)."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        return kafka_schema(include_headers(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self.options, streaming=False)
        _check_fixed_schema(schema, opts.include_headers)
        return OdradekBatchReader(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_read_options(self.options, streaming=True)
        _check_fixed_schema(schema, opts.include_headers)
        return OdradekStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _check_append(overwrite)
        return OdradekBatchWriter(parse_write_options(self.options, streaming=False), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _check_append(overwrite)
        return OdradekStreamWriter(parse_write_options(self.options, streaming=True), schema)


def register(spark: SparkSession) -> None:
    """Make `format("odradek")` available in this session."""
    spark.dataSource.register(OdradekDataSource)


def _check_fixed_schema(schema: StructType, headers: bool) -> None:
    expected = kafka_schema(headers)
    if [(f.name, f.dataType) for f in schema.fields] != [
            (f.name, f.dataType) for f in expected.fields]:
        raise OptionError("the odradek source has a fixed schema (that of Spark's kafka source) "
                          f"and cannot be read with a custom one: expected "
                          f"{expected.simpleString()}, got {schema.simpleString()}")


def _check_append(overwrite: bool) -> None:
    if overwrite:
        raise OptionError("a topic cannot be overwritten: write with mode 'append'")
