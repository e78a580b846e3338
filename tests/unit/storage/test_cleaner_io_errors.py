"""The log cleaner meets a broken disk (Kafka's CleanerThread.cleanLog): an I/O error while
cleaning -- the worker process writing ``.cleaned`` files onto a full tmpfs, or the broker's swap
hitting a file it cannot rename -- takes the log's dir offline through the LogDirFailureChannel
(one error line, no traceback, not retried), the dir's logs are not chosen again, and the next
load of the dir finds every record it held before; any other error (a corrupt segment) only
leaves the partition uncleaned, as before.

Real worker processes, real files: the full disk is a 4 MiB tmpfs filled with zeros; the failing
rename is a directory where the swap's ``.timeindex.swap`` file must go. Waits are bounded polls
of the cleaner's and the channel's state."""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.config import KafkaConfig
from protocol.records import HEADER_STRUCT, Record, build_batch, decode_records, iter_batches
from storage.cleaner.log_cleaner import CleanerConfig, LogCleaner
from storage.cleaner.manager import LogCleanerManager
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager
from storage.segment import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX, log_file, time_index_file
from tests.full_disk import fill, mounted_tmpfs
from tests.unit.storage.helpers import read_all

COMPACTED = LogConfig(cleanup_policy=("compact",), segment_bytes=2048, min_cleanable_dirty_ratio=0.01)
Rec = tuple[int, bytes | None, bytes | None]


def manager(*dirs: Path) -> LogManager:
    lm = LogManager.open(KafkaConfig({"log.dirs": ",".join(str(d) for d in dirs), "broker.id": "3"}))

    def halt(message: str) -> None:  # the broker would exit; these tests look at what is left
        raise AssertionError(f"halted: {message}")

    lm.halt = halt
    return lm


def records(lg: Log) -> list[Rec]:
    data = read_all(lg)
    return [(r.offset, r.key, r.value) for pos, size in iter_batches(data) for r in decode_records(data[pos:pos + size])[1]]


def write_versions(lg: Log, keys: int = 10, versions: int = 30) -> list[Rec]:
    """Keyed records over several segments, the active one empty: keys of their own first (so
    that a cleaning of the first segment writes something), then every key many times."""
    lg.append_as_leader(bytearray(build_batch([Record(0, i, i, b"once-%d" % i, b"x" * 50) for i in range(10)],
                                              base_timestamp=1_600_000_000_000)), 0)
    for v in range(versions):
        batch = build_batch([Record(0, i, i, b"k%02d" % i, b"v%03d-%02d" % (v, i)) for i in range(keys)],
                            base_timestamp=1_600_000_000_000 + v)
        lg.append_as_leader(bytearray(batch), 0)
    lg.update_high_watermark(lg.log_end_offset)
    lg.roll()
    assert len(lg.segments) > 3
    return records(lg)


@pytest.fixture
def cleaners() -> Iterator[Callable[[LogManager], LogCleaner]]:
    """Starts a LogCleaner over a LogManager as the broker wires one; every one is shut down
    (its worker processes killed and reaped) at the end."""
    started: list[LogCleaner] = []

    def start(lm: LogManager) -> LogCleaner:
        cm = LogCleanerManager(lambda: lm, lm.cleaner_offsets, lm.checkpoint_cleaner_offset_of)
        c = LogCleaner(CleanerConfig(backoff_ms=50, dedupe_buffer_size=4 << 20), cm)
        lm.cleaner = c
        started.append(c)
        c.startup()
        return c

    yield start
    for c in started:
        c.shutdown()


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.02)


def temp_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)))


def test_a_full_disk_while_cleaning_takes_the_dir_offline_and_the_next_load_keeps_every_record(
    tmp_path: Path, cleaners: Callable[[LogManager], LogCleaner], caplog: pytest.LogCaptureFixture,
) -> None:
    good = tmp_path / "good"
    with mounted_tmpfs(tmp_path / "small", "4m") as small:
        lm = manager(small, good)
        on_small = lm.get_or_create_log("t", 0, COMPACTED, uuid.UUID(int=7))
        on_good = lm.get_or_create_log("t", 1, COMPACTED, uuid.UUID(int=7))
        assert (on_small.dir.parent, on_good.dir.parent) == (small, good)
        before = write_versions(on_small)
        write_versions(on_good)
        fill(small / "filler")
        with caplog.at_level(logging.INFO, "odradek.storage"):
            cleaner = cleaners(lm)
            wait_for(lambda: not lm.is_log_dir_online(small), "the full dir went offline")
            # the good dir's log is cleaned all the same
            wait_for(lambda: ("t", 1) in cleaner.history, "t-1 cleaned")
            cleaner.shutdown()
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        cleaned = log_file(on_small.dir, 0, CLEANED_FILE_SUFFIX)
        assert [r.getMessage() for r in errors] == [
            f"Failed to clean up log for t-0 in dir {small} due to IOException: No space left on device (ENOSPC) "
            f"on {cleaned}. Log directory {small} is offline: its partitions stop here until the broker restarts"]
        assert not any(r.exc_info for r in caplog.records), "no traceback: a full disk is not a bug"
        assert cleaner.manager.uncleanable == set()  # the dir is offline, not the partition uncleanable
        assert ("t", 0) not in cleaner.history
        # a log of an offline dir is not chosen again, though it is the dirtiest
        assert cleaner.manager.grab_filthiest_compacted_log(cleaner.time_ms()) is None
        # what the worker was writing stays for the next load: nothing is touched in that dir
        assert cleaned.name in temp_files(on_small.dir)
        assert lm.handle_log_dir_failure(small) == [("t", 0)]
        (small / "filler").unlink()  # the disk has room again; the broker starts anew
        lm.shutdown()
        lm = manager(small, good)
        try:
            reloaded = lm.get_log("t", 0)
            assert reloaded is not None and records(reloaded) == before
            assert temp_files(reloaded.dir) == []
        finally:
            lm.shutdown()


def test_an_io_error_swapping_in_a_cleaned_segment_takes_the_dir_offline_and_the_next_load_rolls_it_back(
    tmp_path: Path, cleaners: Callable[[LogManager], LogCleaner], caplog: pytest.LogCaptureFixture,
) -> None:
    d = tmp_path / "data"
    lm = manager(d)
    lg = lm.get_or_create_log("t", 0, COMPACTED, uuid.UUID(int=7))
    before = write_versions(lg)
    # the swap renames the cleaned segment's files to .swap: a directory holding a file where the
    # time index must go fails that rename (EISDIR) after the .log and .index were renamed
    blocker = time_index_file(lg.dir, 0, SWAP_FILE_SUFFIX)
    (blocker / "x").mkdir(parents=True)
    with caplog.at_level(logging.INFO, "odradek.storage"):
        cleaner = cleaners(lm)
        wait_for(lambda: not lm.is_log_dir_online(d), "the dir went offline")
        # the worker, which waited for the broker's answer, is killed rather than left behind
        wait_for(lambda: all(t.proc is None for t in cleaner._threads), "the waiting worker killed")
        cleaner.shutdown()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith(
        f"Error while replacing segments of t-0 in dir {d}: Is a directory (EISDIR) on "), errors
    assert not any(r.exc_info for r in caplog.records)
    assert cleaner.manager.uncleanable == set()
    # half swapped: the new .log and .index are .swap, the rest still .cleaned, the old segments there
    left = temp_files(lg.dir)
    assert log_file(lg.dir, 0, SWAP_FILE_SUFFIX).name in left and blocker.name in left, left
    assert any(n.endswith(CLEANED_FILE_SUFFIX) for n in left), left
    assert cleaner.manager.grab_filthiest_compacted_log(cleaner.time_ms()) is None
    halts: list[str] = []
    lm.halt = halts.append  # its only dir failed: the broker halts here, the files as they are
    assert lm.handle_log_dir_failure(d) == [("t", 0)] and len(halts) == 1
    shutil.rmtree(blocker)  # the disk is repaired
    lm = manager(d)
    try:
        reloaded = lm.get_log("t", 0)
        assert reloaded is not None and records(reloaded) == before  # rolled back: nothing lost, nothing twice
        assert temp_files(reloaded.dir) == []
    finally:
        lm.shutdown()


def test_a_corrupt_segment_only_leaves_the_partition_uncleaned(
    tmp_path: Path, cleaners: Callable[[LogManager], LogCleaner], caplog: pytest.LogCaptureFixture,
) -> None:
    d = tmp_path / "data"
    lm = manager(d)
    try:
        lg = lm.get_or_create_log("t", 0, COMPACTED, uuid.UUID(int=7))
        write_versions(lg)
        # the second batch of the first segment claims a length no batch has: a RecordsError in
        # the worker, not an I/O error
        path = lg.segments[0].log_path
        first_len = HEADER_STRUCT.unpack_from(path.read_bytes(), 0)[1]
        with open(path, "r+b") as f:
            f.seek(first_len + 12 + 8)
            f.write((5).to_bytes(4, "big"))
        with caplog.at_level(logging.INFO, "odradek.storage"):
            cleaner = cleaners(lm)
            wait_for(lambda: ("t", 0) in cleaner.manager.uncleanable, "t-0 marked uncleanable")
            cleaner.shutdown()
        assert lm.is_log_dir_online(d) and lm.log_dir_failure_channel.offline_log_dirs == {}
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and errors[0].getMessage().startswith("Unexpected error while cleaning t-0")
        assert errors[0].exc_info is not None and "RecordsError" in caplog.text
        assert temp_files(lg.dir) == []
        lg.append_as_leader(bytearray(build_batch([Record(0, 0, 0, b"k", b"after")], base_timestamp=1)), 0)
    finally:
        lm.shutdown()
