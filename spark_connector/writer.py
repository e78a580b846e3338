"""Batch and streaming writers: every task produces its rows with kafka-python and flushes.

The guarantee is Spark's kafka sink's: at-least-once. A task returns its commit message only after
`flush()` has every record acknowledged (acks=all unless `kafka.acks` says otherwise), so a
micro-batch is committed to the checkpoint only once all of it is in the log; a failed task or
batch is re-run and may write some records twice. There is nothing to undo on abort.

Columns follow Spark's kafka sink: `value` (string or binary, required), `key` (string or binary),
`topic` (string; the `topic` option overrides it), `partition` (int; otherwise the producer's
partitioner), `headers` (array<struct<key string, value binary>>). Other columns are ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    Row,
    StringType,
    StructType,
)

from spark_connector.errors import OptionError
from spark_connector.kafka_io import log
from spark_connector.options import WriteOptions

#: Producer tuning for bulk writes; user `kafka.*` settings win.
_PRODUCER_DEFAULTS = {"linger_ms": 5, "batch_size": 256 * 1024}


@dataclasses.dataclass
class OdradekCommitMessage(WriterCommitMessage):
    """What a finished task reports: how many records it wrote (all acknowledged)."""

    records: int


@dataclasses.dataclass(frozen=True)
class _Columns:
    """Positions of the sink's columns in the input rows (None: column absent)."""

    value: int
    key: int | None
    topic: int | None
    partition: int | None
    headers: int | None


def check_schema(schema: StructType, opts: WriteOptions) -> _Columns:
    """Validate the input DataFrame on the driver, before any task starts."""
    fields = {f.name.lower(): (i, f.dataType) for i, f in enumerate(schema.fields)}

    def column(name: str, allowed: tuple[type, ...], what: str) -> int | None:
        if name not in fields:
            return None
        i, dtype = fields[name]
        if not isinstance(dtype, allowed) or (isinstance(dtype, ArrayType) and not _is_headers(dtype)):
            raise OptionError(f"column '{name}' must be {what}, got {dtype.simpleString()}")
        return i

    value = column("value", (StringType, BinaryType), "string or binary")
    if value is None:
        raise OptionError("required column 'value' not found (columns: "
                          + ", ".join(schema.fieldNames()) + ")")
    topic = column("topic", (StringType,), "string")
    if topic is None and opts.topic is None:
        raise OptionError("no 'topic' column and no 'topic' option: one of them must say where "
                          "each row goes")
    return _Columns(
        value=value,
        key=column("key", (StringType, BinaryType), "string or binary"),
        topic=None if opts.topic is not None else topic,
        partition=column("partition", (IntegerType, LongType), "int"),
        headers=column("headers", (ArrayType,), "array<struct<key string, value binary>>"),
    )


def write_rows(opts: WriteOptions, cols: _Columns, rows: Iterator[Row]) -> OdradekCommitMessage:
    """Produce every row, flush, and fail the task if any record was not acknowledged."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=list(opts.bootstrap_servers),
                             **{**_PRODUCER_DEFAULTS, **opts.producer_config})
    errors: list[BaseException] = []
    count = 0
    try:
        for row in rows:
            topic = opts.topic if cols.topic is None else row[cols.topic]
            if topic is None:
                raise ValueError("null topic in the data: every row needs a 'topic' value, or "
                                 "set the 'topic' option")
            producer.send(
                topic,
                value=_bytes(row[cols.value]),
                key=None if cols.key is None else _bytes(row[cols.key]),
                partition=None if cols.partition is None else row[cols.partition],
                headers=None if cols.headers is None else _headers(row[cols.headers]),
            ).add_errback(errors.append)
            count += 1
            if errors:
                break
        producer.flush()
        if errors:
            raise RuntimeError(f"producing to Odradek failed: {errors[0]!r}") from errors[0]
    finally:
        producer.close()
    return OdradekCommitMessage(count)


class OdradekBatchWriter(DataSourceWriter):
    """`df.write.format("odradek")` (append only: a topic cannot be overwritten)."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.opts = opts
        self.cols = check_schema(schema, opts)

    def write(self, iterator: Iterator[Row]) -> OdradekCommitMessage:
        return write_rows(self.opts, self.cols, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("batch write committed: %d records", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("batch write aborted after %d acknowledged records (they stay in the log)",
                    _total(messages))


class OdradekStreamWriter(DataSourceStreamWriter):
    """`df.writeStream.format("odradek")`: each micro-batch is flushed before Spark commits it."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.opts = opts
        self.cols = check_schema(schema, opts)

    def write(self, iterator: Iterator[Row]) -> OdradekCommitMessage:
        return write_rows(self.opts, self.cols, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("micro-batch %d committed: %d records", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %d aborted after %d acknowledged records (it will be re-run)",
                    batchId, _total(messages))


def _is_headers(dtype: ArrayType) -> bool:
    """array<struct<key string, value binary>>, whatever the nullability flags say."""
    element = dtype.elementType
    return isinstance(element, StructType) and [
        (f.name, type(f.dataType)) for f in element.fields
    ] == [("key", StringType), ("value", BinaryType)]


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    return bytes(v)  # bytearray, memoryview


def _headers(headers: Any) -> list[tuple[str, bytes | None]]:
    return [(h[0], _bytes(h[1])) for h in headers or ()]


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, OdradekCommitMessage))
