"""Batch and streaming readers: offsets are planned on the driver, records fetched in tasks.

Planning (driver) resolves offsets with one group-less client; each input partition is a fixed
[start, end) range of one topic-partition, so a task is deterministic and can be retried
anywhere. Reading (task) assigns that partition, seeks to `start` and stops before `end`.

Streaming follows Spark's kafka source: the checkpointed offset is `{topic: {partition: offset}}`;
`latestOffset(start, limit)` caps the batch by `maxOffsetsPerTrigger` (the ReadMaxRows limit Spark
passes back from `getDefaultReadLimit`) and by the `Trigger.AvailableNow` target; partitions that
appear later start from their earliest offset.

PySpark 4.0 and 4.1 call `latestOffset()` without arguments (and know no ReadLimit); 4.2+ call
`latestOffset(start, limit)`. The method takes both forms: without a start it continues from the
end it returned last, applying `maxOffsetsPerTrigger` itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from spark_connector.errors import DataLossError, OptionError
from spark_connector.kafka_io import OffsetClient, fetch_range, log
from spark_connector.offsets import (
    OffsetRange,
    PartitionOffsets,
    from_json_offsets,
    rate_limit,
    split_ranges,
    to_json_offsets,
)
from spark_connector.options import ReadOptions

try:  # PySpark >= 4.2: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # PySpark 4.0/4.1: no ReadLimit; Spark wraps the source for AvailableNow
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in so the class below can be declared on PySpark versions without the mixin."""


class OffsetRangePartition(InputPartition):
    """One Spark task: read [start, end) of topic-partition (picklable, as InputPartition must be)."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r

    def __repr__(self) -> str:
        r = self.range
        return f"OffsetRangePartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


class OdradekBatchReader(DataSourceReader):
    """`spark.read.format("odradek")`: one task per topic-partition (more with minPartitions)."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        client = OffsetClient(self.opts)
        try:
            tps = client.partitions()
            start = client.resolve(self.opts.starting, tps, "startingOffsets")
            assert self.opts.ending is not None
            end = client.resolve(self.opts.ending, tps, "endingOffsets")
        finally:
            client.close()
        ranges = []
        for tp in tps:
            if end[tp] < start[tp]:
                raise OptionError(f"{tp[0]}-{tp[1]}: ending offset {end[tp]} is before the "
                                  f"starting offset {start[tp]}")
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        return [OffsetRangePartition(r) for r in split_ranges(ranges, self.opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.opts, self.schema, partition)


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("odradek")`. Lives on the driver for the whole query; the copy
    pickled to tasks only runs `read`, which uses nothing but the options."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._client: OffsetClient | None = None
        self._last_end: PartitionOffsets | None = None  # for the argument-less latestOffset()
        self._latest: PartitionOffsets | None = None  # for reportLatestOffset()
        self._target: PartitionOffsets | None = None  # the Trigger.AvailableNow end

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    def client(self) -> OffsetClient:
        if self._client is None:
            self._client = OffsetClient(self.opts)
        return self._client

    def initialOffset(self) -> dict:
        client = self.client()
        tps = client.partitions()
        offsets = client.resolve(self.opts.starting, tps, "startingOffsets")
        self._last_end = offsets
        return to_json_offsets(offsets)

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        client = self.client()
        self._target = client.latest(client.partitions())

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """The end of the next micro-batch. With a start (PySpark >= 4.2) the engine tells us
        where the batch begins; without one (4.0/4.1) it begins where the last batch ended."""
        client = self.client()
        tps = client.partitions()
        begin = from_json_offsets(start) if start is not None else self._last_end
        latest = client.latest(tps)
        self._latest = latest
        if begin is not None:
            begin = self._drop_gone(begin, set(tps))
            new = [tp for tp in tps if tp not in begin]
            if new:
                log.info("new partitions %s start at their earliest offset", new)
                begin = {**begin, **client.earliest(new)}
        if self._target is not None and begin is not None:
            latest = {tp: min(latest[tp], self._target[tp]) if tp in self._target else begin[tp]
                      for tp in tps}
        max_rows = self._max_rows(limit, old_api=start is None)
        end = latest
        if max_rows is not None and begin is not None:
            end = rate_limit(begin, latest, max_rows)
        self._last_end = end
        return to_json_offsets(end)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_json_offsets(self._latest)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, until = from_json_offsets(start), from_json_offsets(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin = {**begin, **self.client().earliest(new)}
        ranges = []
        for (topic, p), stop in until.items():
            if stop < begin[(topic, p)]:
                self._data_loss(f"{topic}-{p}: offset went back from {begin[(topic, p)]} to "
                                f"{stop} (topic recreated or log truncated)")
                continue
            ranges.append(OffsetRange(topic, p, begin[(topic, p)], stop))
        return [OffsetRangePartition(r) for r in split_ranges(ranges, self.opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.opts, self.schema, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _max_rows(self, limit: Any, old_api: bool) -> int | None:
        if old_api or limit is None:
            return self.opts.max_offsets_per_trigger
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            return limit.max_rows
        return None  # ReadAllAvailable (e.g. Trigger.Once) or a limit we cannot honour

    def _drop_gone(self, begin: PartitionOffsets, current: set[tuple[str, int]]
                   ) -> PartitionOffsets:
        gone = sorted(set(begin) - current)
        if gone:
            self._data_loss("partitions " + ", ".join(f"{t}-{p}" for t, p in gone)
                            + " no longer exist")
        return {tp: off for tp, off in begin.items() if tp in current}

    def _data_loss(self, message: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(message + ". Some data may have been lost; if this is expected, "
                                          "set the option failOnDataLoss=false.")
        log.warning("data loss: %s (failOnDataLoss=false, continuing)", message)


def read_partition(opts: ReadOptions, schema: StructType, partition: InputPartition
                   ) -> Iterator[Any]:
    """Fetch the partition's range and hand it to Spark as Arrow record batches when this PySpark
    validates them the way we can reproduce (4.2+), else as tuples. Arrow skips Spark's per-row
    conversion, the larger part of the read cost."""
    if not isinstance(partition, OffsetRangePartition):  # Spark's placeholder for "no partitions"
        return iter(())
    r = partition.range
    chunks = fetch_range(opts, r.topic, r.partition, r.start, r.end)
    arrow_schema = _arrow_schema(schema)
    if arrow_schema is not None:
        return (_to_arrow(chunk, opts.include_headers, arrow_schema) for chunk in chunks)
    return (_to_row(rec, opts.include_headers) for chunk in chunks for rec in chunk)


def _arrow_schema(schema: StructType) -> Any:
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
    except ImportError:
        return None
    if "timezone" not in inspect.signature(to_arrow_schema).parameters:
        return None
    return to_arrow_schema(schema, timezone="UTC")


def _to_arrow(records: list[Any], include_headers: bool, arrow_schema: Any) -> Any:
    import pyarrow as pa

    n = len(records)
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([records[0].topic] * n, pa.string()),
        pa.array([records[0].partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp * 1000 for r in records], arrow_schema.field("timestamp").type),
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array(
            [[{"key": k, "value": v} for k, v in r.headers] for r in records],
            arrow_schema.field("headers").type,
        ))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema)


def _to_row(r: Any, include_headers: bool) -> tuple[Any, ...]:
    row = (r.key, r.value, r.topic, r.partition, r.offset,
           datetime.fromtimestamp(r.timestamp / 1000, UTC), r.timestamp_type)
    return (*row, list(r.headers)) if include_headers else row
