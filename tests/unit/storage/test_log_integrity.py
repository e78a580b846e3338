"""storage.log_integrity: the load-time checks of index contents and segment tails, on bytes
built here (pure functions; the .log is a bytes object read through a pread callable)."""

from __future__ import annotations

import struct

from protocol.records import Record, build_batch
from storage.log_integrity import (
    Pread,
    find_next_batch,
    offset_index_problem,
    tail_problem,
    time_index_problem,
)

BASE = 100


def segment(n: int) -> tuple[bytes, list[tuple[int, int, int]]]:
    """n batches of 2 records from offset BASE: (log bytes, [(position, last offset, max ts)])."""
    out, where = bytearray(), []
    for i in range(n):
        b = build_batch([Record(0, j, j, None, b"v", []) for j in range(2)], base_offset=BASE + 2 * i,
                        base_timestamp=1000 + 10 * i)
        where.append((len(out), BASE + 2 * i + 1, 1000 + 10 * i + 1))
        out += b
    return bytes(out), where


def pread_of(data: bytes) -> Pread:
    return lambda size, pos: data[pos : pos + size]


def oi(*entries: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">ii", o - BASE, p) for o, p in entries)


def ti(*entries: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">qi", t, o - BASE) for t, o in entries)


def test_a_written_index_passes_and_damaged_ones_are_named() -> None:
    log, where = segment(6)
    pread = pread_of(log)
    good = oi((where[1][1], where[1][0]), (where[4][1], where[4][0]))
    assert offset_index_problem(good, BASE, len(log), pread) is None
    assert offset_index_problem(b"", BASE, len(log), pread) is None
    assert "whole number" in offset_index_problem(good[:-3], BASE, len(log), pread)  # type: ignore[operator]
    assert "strictly increase" in offset_index_problem(  # type: ignore[operator]
        oi((where[4][1], where[4][0]), (where[1][1], where[1][0])), BASE, len(log), pread)
    assert "past the end" in offset_index_problem(  # type: ignore[operator]
        oi((where[4][1], len(log) + 10)), BASE, len(log), pread)
    assert "no whole batch" in offset_index_problem(  # type: ignore[operator]
        oi((where[4][1], where[4][0] + 3)), BASE, len(log), pread)
    assert "base offset" in offset_index_problem(  # type: ignore[operator]
        oi((where[1][1], where[4][0])), BASE, len(log), pread)  # entry names an earlier offset
    assert offset_index_problem(bytes(8 * 4), BASE, len(log), pread) is not None  # zeros


def test_time_index_last_entry_must_match_its_batch() -> None:
    log, where = segment(6)
    pread = pread_of(log)
    index = oi((where[2][1], where[2][0]))
    end = BASE + 12
    good = ti((where[1][2], where[1][1]), (where[5][2], where[5][1]))
    assert time_index_problem(good, BASE, end, len(log), index, pread) is None
    wrong_ts = ti((where[1][2], where[1][1]), (where[5][2] + 7, where[5][1]))
    assert "does not match" in time_index_problem(wrong_ts, BASE, end, len(log), index, pread)  # type: ignore[operator]
    assert "strictly increase" in time_index_problem(  # type: ignore[operator]
        ti((where[5][2], where[1][1]), (where[1][2], where[5][1])), BASE, end, len(log), index, pread)
    assert "not in the segment" in time_index_problem(  # type: ignore[operator]
        ti((where[5][2], end + 5)), BASE, end, len(log), index, pread)


def test_tail_is_whole_valid_batches() -> None:
    log, where = segment(6)
    pread = pread_of(log)
    assert tail_problem(pread, where[3][0], len(log), BASE, where[3][1]) == (None, BASE + 12)
    problem, next_offset = tail_problem(pread_of(log + b"\x00" * 30), where[3][0], len(log) + 30, BASE, where[3][1])
    assert problem is not None and f"position {len(log)}" in problem and next_offset == BASE + 12
    cut = log[:-5]
    problem, next_offset = tail_problem(pread_of(cut), 0, len(cut), BASE, None)
    assert problem is not None and f"position {where[5][0]}" in problem and next_offset == BASE + 10
    flipped = bytearray(log)
    flipped[where[4][0] + 70] ^= 1
    problem, _ = tail_problem(pread_of(bytes(flipped)), 0, len(log), BASE, None)
    assert problem is not None and "crc" in problem


def test_find_next_batch_resynchronises_after_damage() -> None:
    from tests.unit.storage.helpers import offset_batch

    batches = [offset_batch(3 * i, 3, value_size=40) for i in range(4)]
    data = b"".join(batches)
    at = [sum(map(len, batches[:i])) for i in range(4)]
    damaged = bytearray(data)
    damaged[at[1] + 8 : at[1] + 12] = struct.pack(">i", -157765759)  # batch 1's length
    # the next valid batch after the damage, with offsets past the last good one
    assert find_next_batch(bytes(damaged), at[1] + 1, len(data), 3, 1 << 31) == at[2]
    # a batch with offsets at or below the last good one is not a resynchronisation point
    assert find_next_batch(bytes(damaged), at[1] + 1, len(data), 7, 1 << 31) == at[3]
    assert find_next_batch(bytes(damaged), at[1] + 1, len(data), 3, 7) is None
    # a batch cut by `end`, a CRC mismatch, and bytes that hold no batch: nothing found
    assert find_next_batch(data, 1, len(data) - 1, 0, 1 << 31) == at[1]
    assert find_next_batch(data, at[3] + 1, len(data) - 1, 0, 1 << 31) is None
    flipped = bytearray(data)
    flipped[at[3] + 70] ^= 1
    assert find_next_batch(bytes(flipped), at[2] + 1, len(data), 0, 1 << 31) is None
    assert find_next_batch(bytes(4096), 0, 4096, 0, 1 << 31) is None
    assert find_next_batch(b"\x02" * 4096, 0, 4096, 0, 1 << 31) is None
