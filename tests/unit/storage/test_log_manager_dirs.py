"""LogManager with several log dirs (placement of new logs, per-dir lock, meta.properties,
checkpoints and marker, loading from every dir) and with many partitions (2,000 small logs loaded
after an unclean and after a clean shutdown, with progress lines)."""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path

import pytest

from broker.config import KafkaConfig
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager


def config(*dirs: Path) -> KafkaConfig:
    return KafkaConfig({"log.dirs": ",".join(str(d) for d in dirs), "broker.id": "3"})


def batch(value: bytes) -> bytearray:
    return bytearray(build_batch([Record(0, 0, 0, None, value, [])], base_timestamp=1000))


def fill(lm: LogManager, topic: str, partition: int, n: int) -> Log:
    lg = lm.get_or_create_log(topic, partition, LogConfig(), uuid.UUID(int=7))
    for i in range(n):
        lg.append_as_leader(batch(b"v%d" % i), 0)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def partitions_in(d: Path) -> set[str]:
    """The partition directories in `d` (a deleted log's `-delete` directory is not one)."""
    return {p.name for p in d.iterdir() if p.is_dir() and not p.name.endswith("-delete")}


def test_new_logs_go_to_the_dir_with_the_fewest_logs(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    lm = LogManager.open(config(a))
    for p in range(3):
        fill(lm, "old", p, 1)
    lm.shutdown()

    lm = LogManager.open(config(a, b))
    assert lm.log_dir_of == {("old", 0): a, ("old", 1): a, ("old", 2): a}
    placed = [fill(lm, "new", p, 1).dir.parent for p in range(5)]
    # b has none, a has 3: b takes three; then 3:3 ties go to the first listed dir, then b again
    assert placed == [b, b, b, a, b]
    assert [lm.log_dir_of[("new", p)] for p in range(5)] == placed
    assert partitions_in(a) == {"old-0", "old-1", "old-2", "new-3"}
    assert partitions_in(b) == {"new-0", "new-1", "new-2", "new-4"}
    lm.shutdown()

    lm = LogManager.open(config(a, b, c))
    assert [fill(lm, "third", p, 1).dir.parent for p in range(3)] == [c, c, c]
    lm.shutdown()


def test_each_dir_has_its_own_lock_meta_checkpoints_and_marker(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    lm = LogManager.open(config(a, b))
    for d in (a, b):
        assert (d / ".lock").exists()
        assert "broker.id=3" in (d / "meta.properties").read_text()
    with pytest.raises(RuntimeError, match=f"lock on file .lock in {b}"):
        LogManager.open(config(b))  # b alone is locked too
    fill(lm, "t", 0, 3)  # -> a
    fill(lm, "t", 1, 2)  # -> b
    fill(lm, "t", 2, 1)  # -> a
    assert lm.get_log("t", 1).maybe_increment_log_start_offset(1)
    lm.shutdown()

    assert partitions_in(a) == {"t-0", "t-2"} and partitions_in(b) == {"t-1"}
    assert (a / "recovery-point-offset-checkpoint").read_bytes() == b"0\n2\nt 0 3\nt 2 1\n"
    assert (b / "recovery-point-offset-checkpoint").read_bytes() == b"0\n1\nt 1 2\n"
    assert (a / "replication-offset-checkpoint").read_bytes() == b"0\n2\nt 0 3\nt 2 1\n"
    assert (b / "replication-offset-checkpoint").read_bytes() == b"0\n1\nt 1 2\n"
    assert (a / "log-start-offset-checkpoint").read_bytes() == b"0\n0\n"
    assert (b / "log-start-offset-checkpoint").read_bytes() == b"0\n1\nt 1 1\n"
    for d in (a, b):
        assert (d / ".kafka_cleanshutdown").exists()
        assert (d / "cleaner-offset-checkpoint").read_bytes() == b"0\n0\n"
    # a cleaner entry sits in the dir holding its partition; one in the wrong dir is not kept
    (a / "cleaner-offset-checkpoint").write_bytes(b"0\n2\nt 0 2\nt 1 1\n")
    (b / "cleaner-offset-checkpoint").write_bytes(b"0\n1\nt 1 2\n")
    (a / ".kafka_cleanshutdown").unlink()  # a crashed, b did not

    lm = LogManager.open(config(a, b))
    assert lm.had_clean_shutdown == {a: False, b: True}
    assert lm.log_dir_of == {("t", 0): a, ("t", 1): b, ("t", 2): a}
    assert [lm.get_log("t", p).log_end_offset for p in range(3)] == [3, 2, 1]
    assert [lm.get_log("t", p).log_start_offset for p in range(3)] == [0, 1, 0]
    assert lm.cleaner_offsets == {("t", 0): 2, ("t", 1): 2}
    assert not (a / ".kafka_cleanshutdown").exists() and not (b / ".kafka_cleanshutdown").exists()
    lm.async_delete("t", 1)
    assert partitions_in(b) == set()
    assert (b / "cleaner-offset-checkpoint").read_bytes() == b"0\n0\n"
    assert (a / "cleaner-offset-checkpoint").read_bytes() == b"0\n2\nt 0 2\nt 1 1\n"  # untouched
    lm.shutdown()
    assert (a / "cleaner-offset-checkpoint").read_bytes() == b"0\n1\nt 0 2\n"
    assert (b / "recovery-point-offset-checkpoint").read_bytes() == b"0\n0\n"


N = 2000


def progress(caplog: pytest.LogCaptureFixture, d: Path) -> list[str]:
    """The "Loaded i/n logs in <d> (p%)" lines."""
    return [m for m in caplog.messages if m.startswith("Loaded ") and f" logs in {d} (" in m]


@pytest.mark.slow
def test_loading_2000_logs_after_unclean_and_clean_shutdown(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    # one small log, closed, copied to 2,000 partition dirs (cheaper than 2,000 fsynced creations)
    template = tmp_path / "template-0"
    lg = Log.open(template, LogConfig())
    for i in range(3):
        lg.append_as_leader(batch(b"v%d" % i), 1)
    lg.close()
    for p in range(N):
        shutil.copytree(template, d / f"many-{p}")
    # no .kafka_cleanshutdown and no checkpoints: an unclean stop, everything is recovered
    with caplog.at_level(logging.INFO, logger="odradek.storage.log_manager"):
        lm = LogManager.open(config(d))
    assert f"Loading {N} logs in {d} (UNCLEAN shutdown: recovering)" in caplog.text
    lines = progress(caplog, d)
    for k in range(1, 11):  # every tenth, deterministically (more lines may come once a second)
        assert f"Loaded {k * N // 10}/{N} logs in {d} ({k * 10:.1f}%)" in lines
    assert lines[-1] == f"Loaded {N}/{N} logs in {d} (100.0%)"
    assert f"Loaded {N} logs in {d} in " in caplog.text
    assert len(lm.logs) == N
    assert all(lm.get_log("many", p).log_end_offset == 3 for p in range(N))
    for _, lg in lm:
        lg.update_high_watermark(lg.log_end_offset)
    lm.shutdown()
    rp = (d / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert rp[:2] == ["0", str(N)] and sorted(rp[2:]) == sorted(f"many {p} 3" for p in range(N))

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="odradek.storage.log_manager"):
        lm = LogManager.open(config(d))
    assert f"Loading {N} logs in {d} (clean shutdown)" in caplog.text
    lines = progress(caplog, d)
    for k in range(1, 11):
        assert f"Loaded {k * N // 10}/{N} logs in {d} ({k * 10:.1f}%)" in lines
    assert lines[-1] == f"Loaded {N}/{N} logs in {d} (100.0%)"
    assert len(lm.logs) == N
    lg = lm.get_log("many", N - 1)
    assert lg.log_end_offset == 3 and lg.high_watermark == 3
    assert lg.read(1, 1 << 20, None, True).records.read()  # data readable after loading
    lm.shutdown()
