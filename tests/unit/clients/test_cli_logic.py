"""Pure logic of the operator CLI: reset planning, input parsing, output formatting."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import click
import pytest

from clients.common import parse_pairs, split_names
from clients.consume import format_record
from clients.groups import parse_datetime, plan_reset
from clients.produce import parse_line

EARLIEST = {("t", 0): 10, ("t", 1): 0}
LATEST = {("t", 0): 100, ("t", 1): 50}
CURRENT = {("t", 0): 40}  # partition 1 never committed


@pytest.mark.parametrize(("strategy", "value", "by_time", "expected"), [
    ("to-earliest", None, {}, {("t", 0): 10, ("t", 1): 0}),
    ("to-latest", None, {}, {("t", 0): 100, ("t", 1): 50}),
    ("to-current", None, {}, {("t", 0): 40, ("t", 1): 50}),
    ("to-offset", 60, {}, {("t", 0): 60, ("t", 1): 50}),   # clamped to the log end
    ("to-offset", 5, {}, {("t", 0): 10, ("t", 1): 5}),     # clamped to the log start
    ("shift-by", 70, {}, {("t", 0): 100, ("t", 1): 50}),
    ("shift-by", -35, {}, {("t", 0): 10, ("t", 1): 0}),
    ("shift-by", 3, {}, {("t", 0): 43, ("t", 1): 3}),      # uncommitted: from the log start
    ("to-datetime", 0, {("t", 0): 77, ("t", 1): -1}, {("t", 0): 77, ("t", 1): 50}),
])
def test_plan_reset(strategy: str, value: int | None, by_time: dict, expected: dict) -> None:
    assert plan_reset(strategy, value, CURRENT, EARLIEST, LATEST, by_time) == expected


def test_parse_datetime_zones() -> None:
    assert parse_datetime("2026-01-31T12:00:00Z") == 1769860800000
    assert parse_datetime("2026-01-31T13:00:00.500+01:00") == 1769860800500
    naive = dt.datetime(2026, 1, 31, 12, 0).astimezone()  # no zone: local time, as Kafka
    assert parse_datetime("2026-01-31T12:00:00") == int(naive.timestamp() * 1000)
    with pytest.raises(click.BadParameter):
        parse_datetime("yesterday")


def test_parse_line() -> None:
    assert parse_line(b"value\n", None, 1) == (None, b"value")
    assert parse_line(b"value\r\n", None, 1) == (None, b"value")
    assert parse_line(b"last", None, 1) == (None, b"last")
    assert parse_line(b"k:v:w\n", b":", 1) == (b"k", b"v:w")
    assert parse_line(b":v\n", b":", 1) == (b"", b"v")
    with pytest.raises(click.ClickException, match="line number 7"):
        parse_line(b"no separator\n", b":", 7)


def test_format_record_like_kafkas_default_formatter() -> None:
    r = SimpleNamespace(timestamp=1700000000000, timestamp_type=0, partition=2, offset=41,
                        headers=[("a", b"1"), ("b", None)], key=None, value=b"payload")
    every = dict(timestamp=True, partition=True, offset=True, headers=True, key=True)
    assert format_record(r, **every, separator=b"\t") == (
        b"CreateTime:1700000000000\tPartition:2\tOffset:41\ta:1,b:null\tnull\tpayload")
    r.timestamp_type, r.headers, r.key = 1, [], b"k"
    assert format_record(r, **every, separator=b"|") == (
        b"LogAppendTime:1700000000000|Partition:2|Offset:41|NO_HEADERS|k|payload")
    r.timestamp, r.value = -1, None
    assert format_record(r, timestamp=True, partition=False, offset=False, headers=False,
                         key=False, separator=b"\t") == b"NO_TIMESTAMP\tnull"


def test_parse_pairs_and_names() -> None:
    assert parse_pairs(["a=1,b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(click.BadParameter):
        parse_pairs(["novalue"])
    assert split_names(["a,b", "c", ""]) == ["a", "b", "c"]
