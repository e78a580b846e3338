"""`odradek dump-log` prints our segment and index files as Kafka's kafka-dump-log.sh does."""

from __future__ import annotations

import struct
from pathlib import Path

from click.testing import CliRunner

from clients.cli import main
from protocol.records import Record, build_batch, build_control_batch


def write_segment(d: Path) -> Path:
    b1 = bytearray(build_batch([Record(0, 0, 0, b"k1", b"hello", [("h", b"v")]), Record(0, 5, 1, None, b"world", [])],
                               base_timestamp=1000, base_offset=0))
    b2 = bytearray(build_batch([Record(0, 0, 0, b"k2", None, [])], base_timestamp=2000, base_offset=2,
                               compression=1, producer_id=7, producer_epoch=1, base_sequence=0))
    b3 = bytearray(build_control_batch(True, 3, 7, 1, base_offset=3, timestamp=3000))
    path = d / "00000000000000000000.log"
    path.write_bytes(bytes(b1 + b2 + b3))
    return path


def test_dump_log_batches_and_records(tmp_path: Path) -> None:
    path = write_segment(tmp_path)
    out = CliRunner().invoke(main, ["dump-log", str(path), "--print-data-log"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1")
    assert "isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1005" in lines[2]
    assert lines[2].endswith("isvalid: true") and "compresscodec: none" in lines[2]
    assert lines[3] == "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: -1 headerKeys: [h] key: k1 payload: hello"
    assert lines[4] == "| offset: 1 CreateTime: 1005 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [] payload: world"
    assert "baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7 producerEpoch: 1" in lines[5]
    assert "compresscodec: gzip" in lines[5]
    # a null value prints no payload at all (Kafka's parser returns None for it)
    assert lines[6] == "| offset: 2 CreateTime: 2000 keySize: 2 valueSize: -1 sequence: 0 headerKeys: [] key: k2"
    assert "isControl: true" in lines[7]
    assert "endTxnMarker: COMMIT coordinatorEpoch: 3" in lines[8]


def test_dump_log_deep_iteration_prints_record_metadata_without_data(tmp_path: Path) -> None:
    """`--deep-iteration` alone: kafka-dump-log.sh prints one "| offset: ..." line per record with
    its metadata (timestamp, key/value sizes, sequence, header keys joined by ",", the marker of
    a control record) and neither keys nor payloads."""
    path = write_segment(tmp_path)
    b4 = build_batch(
        [Record(0, 0, 0, b"k4", b"appended", [("a", b"1"), ("b", b""), ("a", None)]), Record(0, 3, 1, None, None, [])],
        base_timestamp=4000, base_offset=4, timestamp_type=1, max_timestamp=9999,
        producer_id=8, producer_epoch=0, base_sequence=5,
    )
    path.write_bytes(path.read_bytes() + b4)
    out = CliRunner().invoke(main, ["dump-log", "--deep-iteration", str(path)])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[:2] == [f"Dumping {path}", "Log starting offset: 0"]
    batches = [line for line in lines if line.startswith("baseOffset: ")]
    assert [line.split(" lastOffset")[0] for line in batches] == [
        "baseOffset: 0", "baseOffset: 2", "baseOffset: 3", "baseOffset: 4"
    ]
    assert " LogAppendTime: 9999 " in batches[3]
    assert [line for line in lines if line.startswith("|")] == [
        "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: -1 headerKeys: [h]",
        "| offset: 1 CreateTime: 1005 keySize: -1 valueSize: 5 sequence: -1 headerKeys: []",
        "| offset: 2 CreateTime: 2000 keySize: 2 valueSize: -1 sequence: 0 headerKeys: []",
        "| offset: 3 CreateTime: 3000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: []"
        " endTxnMarker: COMMIT coordinatorEpoch: 3",
        # LogAppendTime: every record carries the batch's max timestamp, as Kafka's iterator gives
        "| offset: 4 LogAppendTime: 9999 keySize: 2 valueSize: 8 sequence: 5 headerKeys: [a,b,a]",
        "| offset: 5 LogAppendTime: 9999 keySize: -1 valueSize: -1 sequence: 6 headerKeys: []",
    ]
    assert len(lines) == 2 + 4 + 6  # nothing else: one line per batch and per record
    for secret in ("hello", "world", "k1", "k2", "appended", "payload:", "key:"):
        assert secret not in out.output
    # without the flag only batch lines are printed
    shallow = CliRunner().invoke(main, ["dump-log", str(path)]).output.splitlines()
    assert shallow == lines[:2] + batches


def test_dump_log_flags_corrupt_batches_and_torn_tail(tmp_path: Path) -> None:
    path = write_segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: CRC no longer matches
    path.write_bytes(bytes(data) + b"\x00\x00\x00")
    out = CliRunner().invoke(main, ["dump-log", str(path)])
    assert out.exit_code == 0
    assert "isvalid: false" in out.output.splitlines()[2]
    assert out.output.splitlines()[-1] == f"Found 3 invalid bytes at the end of {path.name}"


def test_dump_index_and_time_index(tmp_path: Path) -> None:
    idx = tmp_path / "00000000000000000100.index"
    idx.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 3, 4096) + bytes(16))  # preallocated tail
    tix = tmp_path / "00000000000000000100.timeindex"
    tix.write_bytes(struct.pack(">qi", 1700, 0) + struct.pack(">qi", 1800, 3))
    out = CliRunner().invoke(main, ["dump-log", str(idx), str(tix)])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == [
        f"Dumping {idx}", "offset: 100 position: 0", "offset: 103 position: 4096",
        f"Dumping {tix}", "timestamp: 1700 offset: 100", "timestamp: 1800 offset: 103",
    ]


def test_dump_empty_index_and_producer_snapshot(tmp_path: Path) -> None:
    """An index without entries and a producer snapshot, in kafka-dump-log.sh's words (its
    snapshot line ends with a space when the producer has no batch left)."""
    from storage.producer_state import BatchMetadata, ProducerStateEntry, write_snapshot

    idx = tmp_path / "00000000000000000100.index"
    idx.write_bytes(b"")
    snap = tmp_path / "00000000000000000100.snapshot"
    write_snapshot(snap, [ProducerStateEntry(7, 2, 5, 1700, None, [BatchMetadata(9, 99, 3, 1700)]),
                          ProducerStateEntry(8, 0, -1, 1600, 42, [])])
    out = CliRunner().invoke(main, ["dump-log", str(idx), str(snap)])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == [
        f"Dumping {idx}", f"{idx} is empty.",
        f"Dumping {snap}",
        "producerId: 7 producerEpoch: 2 coordinatorEpoch: 5 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700 firstSequence: 6 lastSequence: 9 lastOffset: 99 offsetDelta: 3 timestamp: 1700",
        "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong[42] "
        "lastTimestamp: 1600 ",
    ]


def test_dump_txn_index(tmp_path: Path) -> None:
    from storage.txn_index import AbortedTxn

    path = tmp_path / "00000000000000000010.txnindex"
    path.write_bytes(AbortedTxn(7, 10, 14, 10).to_bytes() + AbortedTxn(8, 12, 20, 15).to_bytes())
    out = CliRunner().invoke(main, ["dump-log", str(path)])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == [
        f"Dumping {path}",
        "version: 0 producerId: 7 firstOffset: 10 lastOffset: 14 lastStableOffset: 10",
        "version: 0 producerId: 8 firstOffset: 12 lastOffset: 20 lastStableOffset: 15",
    ]


def test_dump_log_rejects_other_files(tmp_path: Path) -> None:
    other = tmp_path / "partition.metadata"
    other.write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    out = CliRunner().invoke(main, ["dump-log", str(other)])
    assert out.exit_code != 0 and "unsupported file type" in out.output


def test_dump_log_prints_checkpoint_files(tmp_path: Path) -> None:
    """The cleaner-offset-checkpoint shows how far each compacted log was cleaned."""
    from storage.checkpoints import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile

    cleaner = tmp_path / "cleaner-offset-checkpoint"
    OffsetCheckpointFile(cleaner).write({("__consumer_offsets", 7): 51234, ("orders", 0): 900})
    epochs = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(epochs).write([EpochEntry(0, 0), EpochEntry(3, 120)])
    out = CliRunner().invoke(main, ["dump-log", str(cleaner), str(epochs)])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == [
        f"Dumping {cleaner}",
        "partition: __consumer_offsets-7 firstDirtyOffset: 51234",
        "partition: orders-0 firstDirtyOffset: 900",
        f"Dumping {epochs}",
        "epoch: 0 startOffset: 0",
        "epoch: 3 startOffset: 120",
    ]
    bad = tmp_path / "recovery-point-offset-checkpoint"
    bad.write_bytes(b"\x00garbage")
    out = CliRunner().invoke(main, ["dump-log", str(bad)])
    assert out.exit_code != 0 and str(bad) in out.output
