"""The log-dir failure path's pure parts (Kafka's LogDirFailureChannel, UnifiedLog's
maybeHandleIOException, LogManager.handleLogDirFailure): an I/O error takes its dir offline once,
the dir's logs refuse further work at once, checkpoints skip it, new logs avoid it, and losing
the last dir halts. The real disk filling up is tests/cluster/test_log_dir_failure.py and
tests/integration/test_lifecycle.py."""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
import uuid
from pathlib import Path

import pytest

from broker.config import KafkaConfig
from protocol.records import Record, build_batch
from storage.checkpoints import RECOVERY_POINT_CHECKPOINT_FILE, OffsetCheckpointFile
from storage.config import LogConfig
from storage.errors import KafkaStorageError, StorageError
from storage.log import Log
from storage.log_dir_failure_channel import LogDirFailureChannel, io_error_of
from storage.log_manager import LogManager
from storage.segment import LogSegment

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def batch(value: bytes) -> bytearray:
    return bytearray(build_batch([Record(0, 0, 0, None, value, [])], base_timestamp=1000))


def manager(*dirs: Path) -> LogManager:
    return LogManager.open(KafkaConfig({"log.dirs": ",".join(str(d) for d in dirs), "broker.id": "3"}))


def test_a_dir_goes_offline_once_with_one_error_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    channel = LogDirFailureChannel()
    with caplog.at_level(logging.ERROR, "odradek.storage.log_dir_failure"):
        assert channel.maybe_add_offline_log_dir(tmp_path / "a", "Error while appending records to t-0", ENOSPC)
        assert not channel.maybe_add_offline_log_dir(tmp_path / "a", "Error while flushing t-1", ENOSPC)
        assert channel.maybe_add_offline_log_dir(tmp_path / "b", "Error while truncating t-2", OSError(errno.EIO, "I/O"))
    assert [r.getMessage() for r in caplog.records] == [
        f"Error while appending records to t-0: No space left on device (ENOSPC). Log directory {tmp_path / 'a'} "
        "is offline: its partitions stop here until the broker restarts",
        f"Error while truncating t-2: I/O (EIO). Log directory {tmp_path / 'b'} is offline: its partitions stop "
        "here until the broker restarts"]
    assert channel.has_offline_log_dir(tmp_path / "a") and not channel.has_offline_log_dir(tmp_path / "c")
    assert list(channel.offline_log_dirs) == [str(tmp_path / "a"), str(tmp_path / "b")]


async def test_the_handler_takes_the_dirs_in_order_and_wakes_for_a_report_from_another_thread(tmp_path: Path) -> None:
    channel = LogDirFailureChannel()
    channel.maybe_add_offline_log_dir(tmp_path / "a", "x", ENOSPC)
    assert await channel.take_next_offline_log_dir() == str(tmp_path / "a")
    waiting = asyncio.ensure_future(channel.take_next_offline_log_dir())
    await asyncio.sleep(0)
    assert not waiting.done()
    reporter = threading.Thread(target=channel.maybe_add_offline_log_dir, args=(tmp_path / "b", "y", ENOSPC))
    reporter.start()
    reporter.join()
    assert await asyncio.wait_for(waiting, 5) == str(tmp_path / "b")


def test_io_error_of_finds_the_oserror_behind_a_storage_error() -> None:
    try:
        try:
            raise ENOSPC
        except OSError as e:
            raise StorageError("Error while appending") from e
    except StorageError as wrapped:
        assert io_error_of(wrapped) is ENOSPC
    assert io_error_of(StorageError("Trying to roll a new log segment ... while it already exists")) is None


def test_an_io_error_in_a_log_takes_its_dir_offline_and_its_next_operation_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    lm = manager(a, b)
    in_a = lm.get_or_create_log("t", 0, LogConfig(), uuid.UUID(int=7))
    in_b = lm.get_or_create_log("t", 1, LogConfig(), uuid.UUID(int=7))
    assert (in_a.dir.parent, in_b.dir.parent) == (a, b)
    in_a.append_as_leader(batch(b"before"), 0)

    def full(self: LogSegment, *args: object) -> None:
        raise StorageError(f"Error while appending to {self!r}: {ENOSPC}") from ENOSPC

    with monkeypatch.context() as m:
        m.setattr(LogSegment, "append", full)
        with pytest.raises(KafkaStorageError, match=f"Error while appending records to t-0 in dir {a}"):
            in_a.append_as_leader(batch(b"refused"), 0)
    assert lm.live_log_dirs == [b]
    # the disk is not touched again: no retry can land on it, whatever the disk does now
    with pytest.raises(KafkaStorageError, match="already offline due to a previous IO exception"):
        in_a.append_as_leader(batch(b"again"), 0)
    with pytest.raises(KafkaStorageError, match="already offline"):
        in_a.flush()
    assert in_a.log_end_offset == 1
    in_b.append_as_leader(batch(b"other dir"), 0)  # the other dir serves on
    assert in_b.log_end_offset == 1
    lm.shutdown()


def test_a_failed_checkpoint_write_takes_only_its_dir_offline(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    lm = manager(a, b)
    for p in range(2):
        lm.get_or_create_log("t", p, LogConfig(), uuid.UUID(int=7)).append_as_leader(batch(b"v"), 0)
        lm.logs["t", p].flush()
    # the checkpoint's rename onto a non-empty directory fails with a real OSError
    (a / RECOVERY_POINT_CHECKPOINT_FILE).unlink(missing_ok=True)
    (a / RECOVERY_POINT_CHECKPOINT_FILE / "blocker").mkdir(parents=True)
    lm.checkpoint_recovery_points()  # no exception: the dir is reported, the other written
    assert not lm.is_log_dir_online(a) and lm.is_log_dir_online(b)
    assert OffsetCheckpointFile(b / RECOVERY_POINT_CHECKPOINT_FILE).read() == {("t", 1): 1}
    lm.checkpoint_high_watermarks()  # the offline dir is skipped from now on
    lm.shutdown()


def test_handling_a_failed_dir_drops_its_logs_places_new_ones_elsewhere_and_the_last_one_halts(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    lm = manager(a, b)
    halts: list[str] = []

    def halt(message: str) -> None:
        halts.append(message)
        raise SystemExit(1)

    lm.halt = halt
    logs = {p: lm.get_or_create_log("t", p, LogConfig(), uuid.UUID(int=7)) for p in range(4)}
    assert {p: lg.dir.parent for p, lg in logs.items()} == {0: a, 1: b, 2: a, 3: b}
    lm.maybe_add_offline_log_dir(a, "Error while flushing t-0", ENOSPC)
    assert lm.handle_log_dir_failure(a) == [("t", 0), ("t", 2)]
    assert sorted(lm.logs) == [("t", 1), ("t", 3)] and set(lm.log_dir_of.values()) == {b}
    assert lm.get_or_create_log("u", 0, LogConfig(), uuid.UUID(int=8)).dir.parent == b
    assert halts == []
    lm.maybe_add_offline_log_dir(b, "Error while flushing t-1", ENOSPC)
    with pytest.raises(SystemExit):
        lm.handle_log_dir_failure(b)
    assert halts == [f"Shutdown broker because all log dirs in {a}, {b} have failed"]
    with pytest.raises(KafkaStorageError, match=r"log directories .* are offline"):
        lm.get_or_create_log("v", 0, LogConfig(), uuid.UUID(int=9))


def test_a_log_closes_its_files_without_writing_when_its_dir_fails(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(), recovery_point=0, log_start_offset=0, clean_shutdown=True)
    lg.append_as_leader(batch(b"v"), 0)
    before = sorted(p.name for p in lg.dir.iterdir())
    lg.close_handlers()
    assert sorted(p.name for p in lg.dir.iterdir()) == before  # no producer snapshot, nothing flushed
    lg.close()  # closed already: nothing to do


def test_an_io_error_creating_a_log_takes_its_dir_offline(tmp_path: Path) -> None:
    """Kafka's getOrCreateLog: the dir the new log was placed in goes offline, the next log is
    placed in a live dir."""
    a, b = tmp_path / "a", tmp_path / "b"
    lm = manager(a, b)
    (a / "t-0").write_bytes(b"")  # a file where the partition's directory must go: a real OSError
    with pytest.raises(KafkaStorageError, match=f"Error while creating log for t-0 in dir {a}"):
        lm.get_or_create_log("t", 0, LogConfig(), uuid.UUID(int=7))
    assert lm.live_log_dirs == [b]
    assert lm.get_or_create_log("t", 1, LogConfig(), uuid.UUID(int=7)).dir.parent == b
    lm.shutdown()
