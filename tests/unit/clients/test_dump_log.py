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
    assert lines[6] == "| offset: 2 CreateTime: 2000 keySize: 2 valueSize: -1 sequence: 0 headerKeys: [] key: k2 payload: null"
    assert "isControl: true" in lines[7]
    assert "endTxnMarker: COMMIT coordinatorEpoch: 3" in lines[8]


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


def test_dump_log_rejects_other_files(tmp_path: Path) -> None:
    other = tmp_path / "leader-epoch-checkpoint"
    other.write_text("0\n0\n")
    out = CliRunner().invoke(main, ["dump-log", str(other)])
    assert out.exit_code != 0 and "unsupported file type" in out.output
