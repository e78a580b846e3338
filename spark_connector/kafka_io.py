"""Everything that talks to the broker, through kafka-python (no Spark imports here).

Two kinds of client, both without a consumer group:

* `OffsetClient`, used on the driver to list partitions and resolve `earliest`/`latest`/timestamp
  offsets (ListOffsets and Metadata requests only);
* `fetch_range`, used in Spark tasks: assign one partition, seek, and fetch exactly [start, end).
  A task builds its own consumer and closes it, so readers are stateless and any task can be
  retried anywhere.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from spark_connector.errors import DataLossError, OptionError
from spark_connector.offsets import EARLIEST, LATEST, PartitionOffsets
from spark_connector.options import OffsetSpec, ReadOptions

log = logging.getLogger("odradek.spark")

#: Records handed to Spark per chunk; also the consumer's max_poll_records.
CHUNK = 10_000
#: Fetch tuning for bulk reads: one partition per consumer, so let a fetch carry a lot.
_FETCH_DEFAULTS = {"max_partition_fetch_bytes": 8 * 1024 * 1024, "max_poll_records": CHUNK,
                   "fetch_max_wait_ms": 100}


def new_consumer(opts: ReadOptions, client_id: str) -> KafkaConsumer:
    """A group-less consumer; user `kafka.*` settings win over our fetch tuning."""
    config: dict[str, Any] = {**_FETCH_DEFAULTS, "client_id": client_id, **opts.consumer_config}
    return KafkaConsumer(
        bootstrap_servers=list(opts.bootstrap_servers),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **config,
    )


class OffsetClient:
    """Driver-side view of the subscribed partitions and their offsets."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.consumer = new_consumer(opts, "odradek-spark-driver")

    def close(self) -> None:
        self.consumer.close()

    def partitions(self) -> list[tuple[str, int]]:
        """The partitions the subscription names right now. Metadata is fetched afresh on each
        call, so topics matching a pattern and partitions added since the last micro-batch are
        found; assigned partitions that do not exist (yet) are left out."""
        existing = self.consumer.topics()  # always a Metadata request for all topics
        sub = self.opts.subscription
        topics = sorted(t for t in existing if sub.matches(t))
        out = [(t, p) for t in topics for p in sorted(self.consumer.partitions_for_topic(t))]
        if sub.kind == "assign":
            wanted = set(sub.partitions)
            out = [tp for tp in out if tp in wanted]
        return out

    def earliest(self, tps: Iterable[tuple[str, int]]) -> PartitionOffsets:
        tps = list(tps)
        if not tps:
            return {}
        got = self.consumer.beginning_offsets([TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): off for tp, off in got.items()}

    def latest(self, tps: Iterable[tuple[str, int]]) -> PartitionOffsets:
        """High watermarks (the last stable offsets under read_committed)."""
        tps = list(tps)
        if not tps:
            return {}
        got = self.consumer.end_offsets([TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): off for tp, off in got.items()}

    def resolve(self, spec: OffsetSpec, tps: list[tuple[str, int]], name: str) -> PartitionOffsets:
        """Turn `earliest`/`latest`/JSON/timestamp into a concrete offset per partition."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "timestamp":
            return self._by_timestamp(spec.timestamp_ms, tps)
        missing = sorted(set(tps) - set(spec.offsets))
        if missing:
            raise OptionError(
                f"option '{name}' has specific offsets, so it must list every partition "
                f"(-1 for latest, -2 for earliest); missing: "
                + ", ".join(f"{t}-{p}" for t, p in missing))
        unknown = sorted(set(spec.offsets) - set(tps))
        if unknown:
            raise OptionError(f"option '{name}' names partitions that do not exist: "
                              + ", ".join(f"{t}-{p}" for t, p in unknown))
        earliest = self.earliest(tp for tp in tps if spec.offsets[tp] == EARLIEST)
        latest = self.latest(tp for tp in tps if spec.offsets.get(tp) == LATEST)
        return {tp: earliest.get(tp, latest.get(tp, spec.offsets[tp])) for tp in tps}

    def _by_timestamp(self, ts: int, tps: list[tuple[str, int]]) -> PartitionOffsets:
        if not tps:
            return {}
        got = self.consumer.offsets_for_times({TopicPartition(t, p): ts for t, p in tps})
        found = {(tp.topic, tp.partition): o.offset for tp, o in got.items() if o is not None}
        missing = [tp for tp in tps if tp not in found]
        if missing and self.opts.timestamp_strategy == "error":
            raise OptionError(
                f"option 'startingTimestamp': no record at or after {ts} in "
                + ", ".join(f"{t}-{p}" for t, p in missing)
                + " (set startingOffsetsByTimestampStrategy=latest to start at the end instead)")
        return {**self.latest(missing), **found}


def fetch_range(opts: ReadOptions, topic: str, partition: int, start: int, end: int
                ) -> Iterator[list[Any]]:
    """Yield lists of kafka-python ConsumerRecords with offsets in [start, end), in order.

    Data loss (start below the log start offset, or the log ending before `end`) raises
    DataLossError when failOnDataLoss is true; otherwise the readable part is returned and the
    loss is logged. Offsets may have gaps (compaction, control records, aborted records under
    read_committed), which is not loss."""
    if start >= end:
        return
    consumer = new_consumer(opts, f"odradek-spark-{topic}-{partition}")
    tp = TopicPartition(topic, partition)
    try:
        consumer.assign([tp])
        log_start = consumer.beginning_offsets([tp])[tp]
        if start < log_start:
            _data_loss(opts, f"{topic}-{partition}: offsets [{start}, {min(end, log_start)}) "
                             f"were deleted (log start offset is {log_start})")
            start = log_start
            if start >= end:
                return
        consumer.seek(tp, start)
        position = start
        deadline = time.monotonic() + opts.poll_timeout_ms / 1000
        while position < end:
            records = consumer.poll(timeout_ms=500, max_records=CHUNK).get(tp, [])
            if records and records[-1].offset >= end:
                records = [r for r in records if r.offset < end]
            if records:
                yield records
            # The consumer's position, not the last record, says how far the read got: it also
            # moves past what a fetch returns but the reader never sees (read_committed's aborted
            # records, transaction markers), which can end a range with no record after them.
            moved = consumer.position(tp)
            if moved > position:
                position = moved
                deadline = time.monotonic() + opts.poll_timeout_ms / 1000
                continue
            high = consumer.end_offsets([tp])[tp]
            if high <= position:
                _data_loss(opts, f"{topic}-{partition}: the log ends at {high}, before the "
                                 f"requested end offset {end}")
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition}: no records at offset {position} "
                                   f"within kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}")
    finally:
        consumer.close()


def _data_loss(opts: ReadOptions, message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(message + ". Some data may have been lost; if this is expected, set "
                                      "the option failOnDataLoss=false.")
    log.warning("data loss: %s (failOnDataLoss=false, continuing)", message)
