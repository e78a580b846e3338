"""LogManager checkpoint files, byte for byte in Kafka's text format, and what reloading makes of
them: cleaner-offset-checkpoint (kept for partitions that still exist, dropped for deleted ones),
log-start-offset-checkpoint after DeleteRecords, and each partition's leader-epoch-checkpoint."""

from __future__ import annotations

import uuid
from pathlib import Path

from broker.config import KafkaConfig
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager


def config(*dirs: Path) -> KafkaConfig:
    return KafkaConfig({"log.dirs": ",".join(str(d) for d in dirs), "broker.id": "0"})


def fill(lm: LogManager, topic: str, partition: int, n: int, epoch: int = 0) -> Log:
    lg = lm.get_or_create_log(topic, partition, LogConfig(), uuid.UUID(int=7))
    for i in range(n):
        batch = build_batch([Record(0, 0, 0, None, f"v{i}".encode(), [])], base_timestamp=i)
        lg.append_as_leader(bytearray(batch), epoch)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def test_cleaner_offset_checkpoint_is_read_kept_and_written_back(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    for tp in (("t", 0), ("t", 1), ("u", 0)):
        fill(lm, *tp, 3)
    lm.shutdown()
    cleaner = d / "cleaner-offset-checkpoint"
    assert cleaner.read_bytes() == b"0\n0\n"  # written (empty) even before any cleaning
    # what a log cleaner (Kafka's, say) left behind, including a partition deleted since
    cleaner.write_bytes(b"0\n3\nt 1 1\ngone 0 5\nt 0 2\n")

    lm = LogManager.open(config(d))
    assert lm.cleaner_offsets == {("t", 0): 2, ("t", 1): 1}
    lm.checkpoint_cleaner_offsets()
    assert cleaner.read_bytes() == b"0\n2\nt 0 2\nt 1 1\n"  # the missing partition is dropped
    lm.shutdown()
    assert cleaner.read_bytes() == b"0\n2\nt 0 2\nt 1 1\n"

    lm = LogManager.open(config(d))
    assert lm.cleaner_offsets == {("t", 0): 2, ("t", 1): 1}
    lm.async_delete("t", 1)
    assert cleaner.read_bytes() == b"0\n1\nt 0 2\n"  # at once, as Kafka's asyncDelete does
    fill(lm, "t", 1, 1)  # recreated: starts without the old entry
    lm.shutdown()
    assert cleaner.read_bytes() == b"0\n1\nt 0 2\n"
    lm = LogManager.open(config(d))
    assert lm.cleaner_offsets == {("t", 0): 2}
    lm.shutdown()


def test_log_start_offset_and_leader_epoch_checkpoints(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    fill(lm, "t", 0, 4, epoch=0)
    lg = fill(lm, "t", 0, 4, epoch=2)  # offsets 4..7 written in epoch 2
    fill(lm, "t", 1, 2, epoch=1)
    fill(lm, "u", 0, 3, epoch=5)
    lm.flush_dirty_logs()  # the flush task writes the epochs the appends assigned
    epochs = d / "t-0" / "leader-epoch-checkpoint"
    assert epochs.read_bytes() == b"0\n2\n0 0\n2 4\n"
    assert (d / "t-1" / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n1 0\n"

    lm.checkpoint_log_start_offsets()
    assert (d / "log-start-offset-checkpoint").read_bytes() == b"0\n0\n"  # all at 0: none listed
    assert lg.maybe_increment_log_start_offset(3)  # DeleteRecords up to offset 3
    assert lm.get_log("u", 0).maybe_increment_log_start_offset(1)
    lm.checkpoint_log_start_offsets()
    assert (d / "log-start-offset-checkpoint").read_bytes() == b"0\n2\nt 0 3\nu 0 1\n"
    assert epochs.read_bytes() == b"0\n2\n0 3\n2 4\n"  # epoch 0 now starts at the log start
    assert lg.maybe_increment_log_start_offset(5)  # into epoch 2: epoch 0 is gone
    assert epochs.read_bytes() == b"0\n1\n2 5\n"
    assert (d / "u-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n5 1\n"
    lm.shutdown()
    assert (d / "log-start-offset-checkpoint").read_bytes() == b"0\n2\nt 0 5\nu 0 1\n"

    lm = LogManager.open(config(d))
    t0 = lm.get_log("t", 0)
    assert (t0.log_start_offset, t0.log_end_offset, t0.high_watermark) == (5, 8, 8)
    assert t0.leader_epoch_cache is not None
    assert [tuple(e) for e in t0.leader_epoch_cache.epoch_entries()] == [(2, 5)]
    assert lm.get_log("u", 0).log_start_offset == 1
    assert lm.get_log("t", 1).log_start_offset == 0
    assert epochs.read_bytes() == b"0\n1\n2 5\n"  # loading did not rewrite it
    lm.shutdown()

    # the files are what loading goes by: edit them (as another tool, or Kafka, could)
    (d / "log-start-offset-checkpoint").write_bytes(b"0\n1\nt 0 6\n")
    epochs.write_bytes(b"0\n2\n2 5\n3 7\n")
    lm = LogManager.open(config(d))
    t0 = lm.get_log("t", 0)
    assert t0.log_start_offset == 6
    assert lm.get_log("u", 0).log_start_offset == 0  # no entry: it starts at its first segment
    assert t0.leader_epoch_cache is not None
    assert [tuple(e) for e in t0.leader_epoch_cache.epoch_entries()] == [(2, 6), (3, 7)]
    assert t0.epoch_for_offset(7) == 3
    lm.shutdown()
    assert (d / "log-start-offset-checkpoint").read_bytes() == b"0\n1\nt 0 6\n"
    assert epochs.read_bytes() == b"0\n2\n2 6\n3 7\n"


def test_log_start_offset_at_the_first_segment_is_not_checkpointed(tmp_path: Path) -> None:
    """Kafka's checkpointLogStartOffsetsInDir lists a log only when its start offset is above
    its first segment's base offset; loading starts every other log at that base anyway."""
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    size = len(build_batch([Record(0, 0, 0, None, b"v0", [])], base_timestamp=0))
    cfg = LogConfig(segment_bytes=2 * size, retention_ms=-1)
    lg = lm.get_or_create_log("r", 0, cfg, uuid.UUID(int=7))
    for i in range(6):
        lg.append_as_leader(bytearray(build_batch([Record(0, 0, 0, None, b"v%d" % i, [])], base_timestamp=0)), 0)
    lg.update_high_watermark(lg.log_end_offset)
    assert [s.base_offset for s in lg.segments] == [0, 2, 4]
    assert lg.maybe_increment_log_start_offset(2)
    lm.checkpoint_log_start_offsets()
    assert (d / "log-start-offset-checkpoint").read_bytes() == b"0\n1\nr 0 2\n"
    assert lm.cleanup_logs() == 1  # segment 0 is wholly below the log start offset
    assert lg.segments[0].base_offset == 2
    lm.checkpoint_log_start_offsets()
    assert (d / "log-start-offset-checkpoint").read_bytes() == b"0\n0\n"
    assert lg.maybe_increment_log_start_offset(3)
    lm.shutdown()
    assert (d / "log-start-offset-checkpoint").read_bytes() == b"0\n1\nr 0 3\n"
    lm = LogManager.open(config(d))
    assert lm.get_log("r", 0).log_start_offset == 3
    lm.shutdown()
    (d / "log-start-offset-checkpoint").write_bytes(b"0\n0\n")  # no entry: the first segment's base
    lm = LogManager.open(config(d))
    assert lm.get_log("r", 0).log_start_offset == 2
    lm.shutdown()
