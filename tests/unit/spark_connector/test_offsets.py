"""Offset JSON, range splitting and rate limiting (pure logic)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_connector.errors import OptionError
from spark_connector.offsets import (
    OffsetRange,
    from_json_offsets,
    parse_assign,
    parse_partition_offsets,
    rate_limit,
    split_ranges,
    to_json_offsets,
)


def test_partition_offsets_parse_spark_format() -> None:
    got = parse_partition_offsets('{"a": {"0": 23, "1": -1}, "b": {"0": -2}}', "startingOffsets")
    assert got == {("a", 0): 23, ("a", 1): -1, ("b", 0): -2}


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": {"0": 23}', "malformed JSON"),
    ('["a"]', "expected a JSON object of topics"),
    ('{"a": [0]}', "topic 'a' must map to an object"),
    ('{"a": {"x": 1}}', 'partition "x" of topic \'a\' is not a partition number'),
    ('{"a": {"0": "5"}}', 'offset of a-0 must be an integer, got "5"'),
    ('{"a": {"0": -3}}', "offset -3 of a-0 is invalid"),
    ("{}", "no partitions given"),
])
def test_partition_offsets_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(OptionError, match="option 'startingOffsets'") as info:
        parse_partition_offsets(text, "startingOffsets")
    assert message in str(info.value)


def test_assign_parses_and_rejects() -> None:
    assert parse_assign('{"b": [2, 0], "a": [1]}') == [("a", 1), ("b", 0), ("b", 2)]
    with pytest.raises(OptionError, match="must map to a list"):
        parse_assign('{"a": 1}')
    with pytest.raises(OptionError, match="malformed JSON"):
        parse_assign("a:1")


def test_checkpoint_json_is_canonical() -> None:
    """Equal offsets must serialise identically whatever order they were built in: Spark decides
    'no new data' by comparing the JSON of start and end."""
    a = {("t", 10): 5, ("t", 2): 1, ("a", 0): 0}
    b = dict(reversed(list(a.items())))
    assert json.dumps(to_json_offsets(a)) == json.dumps(to_json_offsets(b))
    assert json.dumps(to_json_offsets(a)) == '{"a": {"0": 0}, "t": {"2": 1, "10": 5}}'
    assert from_json_offsets(json.loads(json.dumps(to_json_offsets(a)))) == a
    assert from_json_offsets(None) == {}


def test_split_ranges_one_per_partition_without_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 0, 7)]
    assert split_ranges(ranges, None) == [ranges[0], ranges[2]]  # the empty range is dropped
    assert split_ranges(ranges, 2) == [ranges[0], ranges[2]]


def test_split_ranges_cuts_large_ranges_like_spark() -> None:
    ranges = [OffsetRange("t", 0, 10, 60), OffsetRange("t", 1, 0, 100)]
    got = split_ranges(ranges, 6)
    assert len(got) == 6
    assert [r.size for r in got] == [25, 25, 25, 25, 25, 25]
    assert [r for r in got if r.partition == 0] == [OffsetRange("t", 0, 10, 35),
                                                    OffsetRange("t", 0, 35, 60)]


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=8),
       st.integers(1, 40))
def test_split_ranges_cover_every_offset_exactly_once(spans: list[tuple[int, int]],
                                                      min_partitions: int) -> None:
    ranges = [OffsetRange("t", p, s, s + n) for p, (s, n) in enumerate(spans)]
    got = split_ranges(ranges, min_partitions)
    covered = sorted((r.partition, o) for r in got for o in range(r.start, r.end))
    assert covered == sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
    assert all(r.size > 0 for r in got)


def test_rate_limit_shares_the_budget_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 7}
    assert rate_limit(start, latest, 200) == {("t", 0): 150, ("t", 1): 150, ("t", 2): 7}
    assert rate_limit(start, latest, 1000) == latest


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1,
                max_size=10),
       st.integers(1, 20_000))
def test_rate_limit_never_exceeds_and_always_progresses(spans: list[tuple[int, int]],
                                                        limit: int) -> None:
    start = {("t", p): s for p, (s, _) in enumerate(spans)}
    latest = {("t", p): s + n for p, (s, n) in enumerate(spans)}
    end = rate_limit(start, latest, limit)
    taken = sum(end[tp] - start[tp] for tp in start)
    backlog = sum(latest[tp] - start[tp] for tp in start)
    assert taken == min(limit, backlog)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
