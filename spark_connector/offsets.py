"""Offsets as Spark's kafka source spells them, and the arithmetic on them (pure: no Spark, no I/O).

Two JSON shapes appear, both taken from Spark's kafka source so that users can copy options and
read checkpoints the same way:

* per-partition offsets, `{"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}` (`startingOffsets`,
  `endingOffsets`, and the streaming checkpoint, where every value is a concrete offset);
* an assignment, `{"topicA": [0, 1], "topicB": [2, 4]}` (`assign`).

The streaming engine decides "no new data" by comparing the JSON of the end offset with the JSON of
the start offset, and PySpark serialises our dicts with `json.dumps` without `sort_keys`. So every
offset dict this module hands to Spark is *canonical*: topics sorted, partitions sorted
numerically, partition keys as strings. Two equal offset maps then always serialise identically.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from spark_connector.errors import OptionError

#: The sentinels Spark's kafka source accepts inside offset JSON.
LATEST = -1
EARLIEST = -2

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]


def parse_partition_offsets(text: str, option: str) -> PartitionOffsets:
    """`{"topic": {"0": 23}}` -> `{("topic", 0): 23}`, with an error naming `option` and the
    offending piece when the JSON does not have that shape (Spark's messages are famously vague)."""
    data = _load_json(text, option, example='{"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}')
    if not isinstance(data, dict):
        raise OptionError(f"option '{option}': expected a JSON object of topics, got {text!r}")
    out: PartitionOffsets = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise OptionError(
                f"option '{option}': topic {topic!r} must map to an object of "
                f"{{partition: offset}}, got {json.dumps(partitions)}"
            )
        for partition, offset in partitions.items():
            p = _partition_number(partition, option, topic)
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise OptionError(
                    f"option '{option}': offset of {topic}-{p} must be an integer, "
                    f"got {json.dumps(offset)}"
                )
            if offset < EARLIEST:
                raise OptionError(
                    f"option '{option}': offset {offset} of {topic}-{p} is invalid "
                    f"(use -1 for latest, -2 for earliest)"
                )
            out[(topic, p)] = offset
    if not out:
        raise OptionError(f"option '{option}': no partitions given in {text!r}")
    return out


def parse_assign(text: str) -> list[TopicPartition]:
    """`{"topicA": [0, 1]}` -> `[("topicA", 0), ("topicA", 1)]` (the `assign` option)."""
    data = _load_json(text, "assign", example='{"topicA": [0, 1], "topicB": [2, 4]}')
    if not isinstance(data, dict):
        raise OptionError(f"option 'assign': expected a JSON object of topics, got {text!r}")
    out: list[TopicPartition] = []
    for topic, partitions in data.items():
        if not isinstance(partitions, list):
            raise OptionError(
                f"option 'assign': topic {topic!r} must map to a list of partition numbers, "
                f"got {json.dumps(partitions)}"
            )
        out.extend((topic, _partition_number(p, "assign", topic)) for p in partitions)
    if not out:
        raise OptionError(f"option 'assign': no partitions given in {text!r}")
    return sorted(set(out))


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The canonical checkpoint form (see the module docstring for why it must be canonical)."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def from_json_offsets(data: Mapping[str, Mapping[str, Any]] | None) -> PartitionOffsets:
    """The inverse of `to_json_offsets`, for offsets read back from a Spark checkpoint."""
    if not data:
        return {}
    return {(t, int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}


@dataclass(frozen=True)
class OffsetRange:
    """The half-open range [start, end) of one topic-partition that one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """One range per topic-partition, unless `minPartitions` asks for more tasks: then large ranges
    are cut into near-equal pieces, each range into `round(size / ideal)` pieces where `ideal` is
    total / minPartitions (the rule of Spark's KafkaOffsetRangeCalculator, so the same option value
    gives the same parallelism). Empty ranges are dropped: they would be tasks that read nothing."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    ideal = total / min_partitions
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, round(r.size / ideal))
        step = r.size / parts
        cuts = [r.start + math.floor(i * step) for i in range(parts)] + [r.end]
        out.extend(
            OffsetRange(r.topic, r.partition, a, b) for a, b in pairwise(cuts)
            if b > a
        )
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_records: int) -> PartitionOffsets:
    """End offsets that admit at most `max_records` records in total (`maxOffsetsPerTrigger`).

    The budget is shared in proportion to each partition's backlog, as Spark's kafka source does,
    but exactly: floors first, then the remainder one record at a time to the largest backlogs, so
    a micro-batch never exceeds the limit and (if anything is pending) always makes progress.
    Every partition of `latest` must have a start."""
    backlog = {tp: latest[tp] - start[tp] for tp in latest if latest[tp] > start[tp]}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    grant = {tp: (max_records * n) // total for tp, n in backlog.items()}
    left = max_records - sum(grant.values())
    for tp in sorted(backlog, key=lambda tp: (grant[tp] - backlog[tp], tp)):
        if left == 0:
            break
        if grant[tp] < backlog[tp]:
            grant[tp] += 1
            left -= 1
    return {tp: start[tp] + grant[tp] if tp in grant else latest[tp] for tp in latest}


def _load_json(text: str, option: str, example: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as e:
        raise OptionError(
            f"option '{option}': malformed JSON {text!r} ({e}); expected e.g. {example}"
        ) from None


def _partition_number(value: Any, option: str, topic: str) -> int:
    try:
        p = int(value)
    except (TypeError, ValueError):
        p = -1
    if isinstance(value, bool) or isinstance(value, float) or p < 0:
        raise OptionError(
            f"option '{option}': partition {json.dumps(value)} of topic {topic!r} is not a "
            f"partition number"
        )
    return p
