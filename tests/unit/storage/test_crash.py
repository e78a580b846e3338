"""Crash safety through the real system (STYLE #17): a child process appends to a log and is
killed with SIGKILL at a random point, again and again on the same directory. After every kill
the log reopens (unclean) to a valid prefix: every acknowledged batch intact and in order,
nothing torn or foreign after it, indexes consistent with the data, lookups right.

In most rounds the kill comes 0-2 ms after the test reads the child's k-th progress line (k and
the delay random), so the child is somewhere inside its next append -- validating, writing up to
~2 MB, updating an index. Every TEAR_EVERY-th round aims at the write itself: once the child's
latest progress line announces a ~2 MB batch as its next append (and where it will be written),
the test polls the size of that file and kills the child as soon as part of the batch is there,
i.e. while the pwrite is still copying pages (the kernel stops a write between pages when SIGKILL
arrives: a torn batch). So tearing is not left to luck: the test asserts that at least one round
left a torn tail. Progress is awaited on the pipe with a
deadline; the only sleep picks the kill moment of the random rounds.
"""

from __future__ import annotations

import logging
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocol.records import decode_records, iter_batches, read_header, validate_batch
from storage.log import Log
from tests.unit.storage.crash_writer import CONFIG, value_for
from tests.unit.storage.helpers import T0, read_all

REPO = Path(__file__).resolve().parents[3]
ROUNDS = 24
TEAR_EVERY = 3  # rounds 0, 3, 6, ... kill inside the write of a ~2 MB batch
BIG = 1 << 20  # a next batch at least this large is one to tear
ROUND_TIMEOUT = 60.0


class LineReader:
    """Lines from a child's stdout pipe, waiting at most until a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buf = b""
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)

    def line(self, deadline: float) -> str:
        while b"\n" not in self.buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.sel.select(remaining):
                raise TimeoutError("child process did not report in time")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise EOFError("child process exited")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def pending(self) -> bool:
        """Whether more output is already waiting (buffered or in the pipe)."""
        return b"\n" in self.buf or bool(self.sel.select(0))

    def close(self) -> None:
        self.sel.close()


def kill_mid_write(
    proc: subprocess.Popen[bytes], directory: Path, active: str, size: int, batch: int, leo: int, deadline: float
) -> bool:
    """Poll the file the child's next append writes ``batch`` bytes to -- the active segment
    (``size`` bytes so far) or the segment it rolls to (base ``leo``) -- and SIGKILL the child
    as soon as part of the batch is there. False (no kill) when the write was already complete
    at the first look: the announcement was stale, the test has to wait for another one."""
    current = directory / active
    rolled = directory / f"{leo:020d}.log"
    while time.monotonic() < deadline:
        grown = os.stat(current).st_size - size
        if grown <= 0:
            try:
                grown = os.stat(rolled).st_size
            except FileNotFoundError:
                grown = 0
        if grown >= batch:
            return False
        if grown > 0:
            proc.send_signal(signal.SIGKILL)
            return True
    raise TimeoutError("the child's write did not start in time")


def run_child(
    directory: Path, seed: int, recovery_point: int, appends: int, delay: float, tear: bool = False
) -> tuple[int, int, int]:
    """Start a writer, let it acknowledge ``appends`` appends, SIGKILL it ``delay`` seconds
    later (a random point inside the next append) -- or, with ``tear``, while it writes a ~2 MB
    batch (see kill_mid_write). Returns (log end offset it opened with, last acknowledged
    log end offset, last recovery point reported)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.unit.storage.crash_writer", str(directory), str(seed), str(recovery_point)],
        stdout=subprocess.PIPE,
        cwd=REPO,
        bufsize=0,
    )
    reader = LineReader(proc)
    deadline = time.monotonic() + ROUND_TIMEOUT
    try:
        kind, opened, rp = reader.line(deadline).split()
        assert kind == "open"
        acked, flushed = int(opened), int(rp)
        seen = 0
        next_size, active, active_size = 0, "", 0  # the next append, as last announced
        while True:
            kind, value, *rest = reader.line(deadline).split()
            if kind == "a":
                acked = int(value)
                next_size, active, active_size = int(rest[0]), rest[1], int(rest[2])
                seen += 1
            else:
                flushed = int(value)
            if seen < appends:
                continue
            if not tear:
                time.sleep(delay)  # not waiting for an event: choosing the moment of the kill
                proc.send_signal(signal.SIGKILL)
                break
            # only the child's latest announcement tells where its write is going now
            if (
                kind == "a"
                and next_size >= BIG
                and not reader.pending()
                and kill_mid_write(proc, directory, active, active_size, next_size, acked, deadline)
            ):
                break
    finally:
        proc.kill()
        proc.wait(timeout=ROUND_TIMEOUT)
        reader.close()
        assert proc.stdout is not None
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return int(opened), acked, flushed


def verify(log: Log, new_from: int) -> None:
    """The whole log is a valid prefix; records from ``new_from`` on are checked one by one."""
    data = read_all(log)
    expected = 0
    for pos, size in iter_batches(data):
        h = validate_batch(data, pos)  # CRC and structure of every batch
        assert h.base_offset == expected, "offsets must be contiguous"
        expected = h.last_offset + 1
        if h.last_offset >= new_from:
            _h, recs = decode_records(data[pos : pos + size])
            for r in recs:
                assert r.timestamp == T0 + r.offset
                assert r.value == value_for(r.offset, len(r.value or b""))
    assert expected == log.log_end_offset
    for seg in log.segments:
        raw = seg.log_path.read_bytes()[: seg.size]
        starts = {p for p, _ in iter_batches(raw)}
        assert sum(s for _, s in iter_batches(raw)) == seg.size
        prev = -1
        for i in range(seg.offset_index.entries):
            off, pos = seg.offset_index.entry(i)
            assert off > prev and pos in starts
            prev = off
            assert read_header(raw, pos).last_offset == off  # one batch per append
        prev_ts = -1
        for i in range(seg.time_index.entries):
            ts, off = seg.time_index.entry(i)
            assert ts > prev_ts and seg.base_offset <= off < log.log_end_offset
            prev_ts = ts
            assert ts == T0 + off  # the max timestamp so far is the last record's
    rng = random.Random(log.log_end_offset)
    for o in [rng.randrange(log.log_end_offset) for _ in range(50)] + [log.log_end_offset - 1]:
        h = read_header(log.read(o, 1, None, True).records.read())
        assert h.base_offset <= o <= h.last_offset
        r = log.offset_for_timestamp(T0 + o)
        assert r is not None and r.offset == o


@pytest.mark.slow
def test_sigkill_during_appends_leaves_a_valid_prefix(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "crash-0"
    rng = random.Random(20240601)
    verified_leo = 0
    recovery_point = 0
    torn = aimed_torn = 0
    caplog.set_level(logging.WARNING, logger="odradek.storage")
    for round_ in range(ROUNDS):
        opened, acked, flushed = run_child(
            directory, round_, recovery_point, rng.randint(1, 6), rng.uniform(0, 0.002),
            tear=round_ % TEAR_EVERY == 0,
        )
        assert opened == verified_leo  # the child's own recovery agreed with ours
        caplog.clear()
        log = Log.open(directory, CONFIG, recovery_point=flushed, clean_shutdown=False, now=lambda: T0)
        try:
            # acknowledged appends were in the page cache: a killed process loses none
            assert log.log_end_offset >= acked
            tore = "invalid bytes" in caplog.text
            torn += tore
            aimed_torn += tore and round_ % TEAR_EVERY == 0
            verify(log, verified_leo)
            verified_leo = log.log_end_offset
            recovery_point = log.recovery_point
        finally:
            log.close(flush=False)
    assert verified_leo > 0
    aimed = len(range(0, ROUNDS, TEAR_EVERY))
    print(
        f"{ROUNDS} kills, {torn} left a torn tail ({aimed_torn} of the {aimed} aimed at a write), "
        f"final log end offset {verified_leo}"
    )
    assert torn >= 1, "no kill landed inside a write: the torn-tail recovery went untested"
