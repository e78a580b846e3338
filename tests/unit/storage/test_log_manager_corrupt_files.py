"""LogManager with corrupt log-dir files (issue #12 §1): unreadable checkpoints are logged and
fall back as Kafka's LogManager.loadLogs does -- a garbled recovery-point-offset-checkpoint
makes that dir recover fully, the others start empty -- and a garbled meta.properties is
detected instead of silently accepted. Real files in a temporary dir."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import pytest

from broker.config import KafkaConfig
from protocol.records import Record, build_batch
from storage.checkpoints import CheckpointFormatError, read_meta_properties
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager

GARBAGE = [b"\x00\x01\x02garbage\xff\xfe\n", b"0\n3\nt 0 5\n", b"7\n0\n", b"0\n1\nt zero 1\n"]


def config(d: Path) -> KafkaConfig:
    return KafkaConfig({"log.dirs": str(d), "broker.id": "0"})


def fill(lm: LogManager, topic: str, n: int) -> Log:
    lg = lm.get_or_create_log(topic, 0, LogConfig(), uuid.UUID(int=7))
    for i in range(n):
        batch = build_batch([Record(0, 0, 0, None, f"v{i}".encode(), [])], base_timestamp=i)
        lg.append_as_leader(bytearray(batch), 0)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


@pytest.mark.parametrize("content", GARBAGE, ids=["binary", "count", "version", "field"])
@pytest.mark.parametrize(
    "name",
    [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
        "cleaner-offset-checkpoint",
    ],
)
def test_a_corrupt_checkpoint_is_logged_and_loading_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, content: bytes
) -> None:
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    fill(lm, "t", 5)
    lm.shutdown()
    (d / name).write_bytes(content)
    caplog.set_level(logging.INFO, logger="odradek.storage")
    lm = LogManager.open(config(d))
    try:
        assert lm.logs[("t", 0)].log_end_offset == 5
        assert any(name in r.getMessage() and r.levelno >= logging.WARNING for r in caplog.records)
        if name == "recovery-point-offset-checkpoint":
            # the recovery points are unknown: everything is validated, as after a crash
            assert lm.had_clean_shutdown[d] is False
            assert "Recovering unflushed segment 0 of t-0" in caplog.text
    finally:
        lm.shutdown()
    lm = LogManager.open(config(d))  # and the shutdown wrote a readable one again
    lm.shutdown()


def test_corrupt_checkpoint_kept_after_crash_recovers_fully(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    fill(lm, "t", 5)
    lm.checkpoint_recovery_points()
    for _, lg in lm:
        for seg in lg.segments:
            seg.close_handlers()
    for fd in lm._locks.values():
        os.close(fd)
    (d / "recovery-point-offset-checkpoint").write_bytes(b"\xff" * 10)
    caplog.set_level(logging.INFO, logger="odradek.storage")
    lm = LogManager.open(config(d))
    try:
        assert lm.logs[("t", 0)].log_end_offset == 5
        assert "recovery-point-offset-checkpoint" in caplog.text
    finally:
        lm.shutdown()


@pytest.mark.parametrize(
    "content",
    [
        b"\x8f\x00\x13\xfe\xff garbage",
        b"#\n#Thu Jan 01 00:00:00 UTC 1970\nbrokxr.id=0\ncluster.id=Ys5_CZ4vRpWb6-5UoFrjdw\nversion=0\n",
        b"#\n#Thu Jan 01 00:00:00 UTC 1970\nbroker.id=0\ncluster.id=Ys5_CZ4vR\x00Wb6-5UoFrjdw\nversion=0\n",
        b"",
        b"\n\n# nothing but a comment\n",
    ],
    ids=["binary", "key", "control-char", "empty", "no-properties"],
)
def test_a_garbled_meta_properties_is_detected(tmp_path: Path, content: bytes) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "meta.properties").write_bytes(content)
    with pytest.raises(CheckpointFormatError, match=r"meta\.properties"):
        read_meta_properties(d / "meta.properties")
    with pytest.raises(CheckpointFormatError, match=r"meta\.properties"):
        LogManager.open(config(d))
    assert (d / "meta.properties").read_bytes() == content  # left as found


def test_meta_properties_as_written_still_reads(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    lm.shutdown()
    meta = read_meta_properties(d / "meta.properties")
    assert meta.node_id == 0
    LogManager.open(config(d)).shutdown()
