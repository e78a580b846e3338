"""The row schema of Spark's kafka source, which the odradek source reproduces column for column,
so queries written against `format("kafka")` run unchanged."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool) -> StructType:
    """`key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int` (+ `headers array<struct<key string, value binary>>`), all nullable as in
    Spark's KafkaRecordToRowConverter."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)
