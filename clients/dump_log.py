"""`odradek dump-log`: print segment, index and time-index files as Kafka's kafka-dump-log.sh.

Why its own reader: the tool must work on files copied off any broker (ours or Apache Kafka's),
so it reads the on-disk formats directly — RecordBatch v2 for `.log`, (int32 relative offset,
int32 position) for `.index`, (int64 timestamp, int32 relative offset) for `.timeindex`, the
producer-state snapshot schema for `.snapshot` and aborted-transaction entries for `.txnindex`
(storage's codecs for those two, which need no broker) — and never needs a running broker. The lines are Kafka's
`kafka.tools.DumpLogSegments` lines, character for character (tests/compat/test_on_disk_format.py
compares the two on the same files).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from pathlib import Path

import click

from protocol.compression import CODEC_NAMES
from protocol.records import (
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    RecordsError,
    decode_records,
    parse_control_record,
    read_header,
    verify_crc,
)

_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        raise click.ClickException(f"{path}: not a segment file name (20-digit base offset)") from None


def dump_log_file(path: Path, deep: bool, print_data: bool) -> Iterator[str]:
    yield f"Dumping {path}"
    yield f"Log starting offset: {_base_offset(path)}"
    data = path.read_bytes()
    pos = 0
    while pos + LOG_OVERHEAD + MIN_BATCH_LENGTH <= len(data):
        h = read_header(data, pos)
        size = h.size_in_bytes
        if h.batch_length < MIN_BATCH_LENGTH or pos + size > len(data):
            break
        valid = verify_crc(data, pos)
        ts_type = "LogAppendTime" if h.timestamp_type else "CreateTime"
        horizon = f"OptionalLong[{h.delete_horizon_ms}]" if h.has_delete_horizon else "OptionalLong.empty"
        yield (
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
            f"deleteHorizonMs: {horizon} position: {pos} {ts_type}: {h.max_timestamp} size: {size} "
            f"magic: {h.magic} compresscodec: {CODEC_NAMES.get(h.compression, h.compression)} "
            f"crc: {h.crc} isvalid: {str(valid).lower()}"
        )
        if (deep or print_data) and valid:
            try:
                _, records = decode_records(data, pos)
            except RecordsError as e:
                yield f"| could not decode records: {e}"
                records = []
            for r in records:
                seq = -1 if h.base_sequence < 0 else h.base_sequence + r.offset_delta
                # a LogAppendTime batch gives every record the batch's max timestamp (Kafka's
                # DefaultRecordBatch iterator); header keys joined by "," (Scala mkString)
                ts = h.max_timestamp if h.timestamp_type else h.base_timestamp + r.timestamp_delta
                line = (
                    f"| offset: {h.base_offset + r.offset_delta} {ts_type}: {ts} "
                    f"keySize: {-1 if r.key is None else len(r.key)} "
                    f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {seq} "
                    f"headerKeys: [{','.join(k for k, _ in r.headers)}]"
                )
                if h.is_control:
                    ctype, epoch = parse_control_record(r)
                    line += f" endTxnMarker: {'COMMIT' if ctype == 1 else 'ABORT'} coordinatorEpoch: {epoch}"
                elif print_data:  # key and payload only when present, as Kafka's parser
                    if r.key is not None:
                        line += f" key: {_text(r.key)}"
                    if r.value is not None:
                        line += f" payload: {_text(r.value)}"
                yield line
        pos += size
    if pos < len(data):
        yield f"Found {len(data) - pos} invalid bytes at the end of {path.name}"


def _text(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def _entries(path: Path, entry: struct.Struct) -> Iterator[tuple[int, int]]:
    size = path.stat().st_size
    if size == 0:
        return
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for pos in range(0, size - size % entry.size, entry.size):
            yield entry.unpack_from(m, pos)


def dump_index_file(path: Path) -> Iterator[str]:
    yield f"Dumping {path}"
    base = _base_offset(path)
    if path.stat().st_size < _INDEX_ENTRY.size:
        yield f"{path} is empty."
        return
    for i, (rel, position) in enumerate(_entries(path, _INDEX_ENTRY)):
        if i > 0 and rel == 0:
            break  # preallocated (zeroed) tail: Kafka stops at the first entry back at the base offset
        yield f"offset: {base + rel} position: {position}"


def dump_time_index_file(path: Path) -> Iterator[str]:
    yield f"Dumping {path}"
    base = _base_offset(path)
    for i, (ts, rel) in enumerate(_entries(path, _TIME_ENTRY)):
        if i > 0 and rel == 0:
            break
        yield f"timestamp: {ts} offset: {base + rel}"


def dump_producer_snapshot_file(path: Path) -> Iterator[str]:
    """One line per producer: its epoch, coordinator epoch, open transaction and last batch."""
    from storage.producer_state import CorruptSnapshotError, read_snapshot

    yield f"Dumping {path}"
    try:
        entries = read_snapshot(path)
    except CorruptSnapshotError as e:
        raise click.ClickException(str(e)) from None
    for e in entries:
        txn = "OptionalLong.empty" if e.current_txn_first_offset is None else f"OptionalLong[{e.current_txn_first_offset}]"
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {txn} lastTimestamp: {e.last_timestamp} "
        )
        if e.batch_metadata:  # Kafka prints the first retained batch (a snapshot holds one)
            b = e.batch_metadata[0]
            line += (
                f"firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
                f"offsetDelta: {b.offset_delta} timestamp: {b.timestamp}"
            )
        yield line


def dump_txn_index_file(path: Path) -> Iterator[str]:
    """One line per aborted transaction the segment's `.txnindex` records."""
    from storage.txn_index import ABORTED_TXN_VERSION, AbortedTxn, CorruptIndexError

    yield f"Dumping {path}"
    data = path.read_bytes()
    size = len(AbortedTxn(0, 0, 0, 0).to_bytes())
    for pos in range(0, len(data) - len(data) % size, size):
        try:
            t = AbortedTxn.from_bytes(data, pos)
        except CorruptIndexError as e:
            raise click.ClickException(f"{path}: {e}") from None
        yield (
            f"version: {ABORTED_TXN_VERSION} producerId: {t.producer_id} firstOffset: {t.first_offset} "
            f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}"
        )


# checkpoint files a log dir (or a partition dir) holds, and what their offset means
_OFFSET_CHECKPOINTS = {
    "cleaner-offset-checkpoint": "firstDirtyOffset",
    "recovery-point-offset-checkpoint": "recoveryPoint",
    "log-start-offset-checkpoint": "logStartOffset",
    "replication-offset-checkpoint": "highWatermark",
}


def dump_checkpoint_file(path: Path) -> Iterator[str]:
    """The entries of an offset checkpoint (per partition) or a leader-epoch-checkpoint (per
    epoch). Kafka's tool has no reader for these; the cleaner-offset-checkpoint is where the
    log cleaner's progress shows (the first offset it has not cleaned, per compacted log)."""
    from storage.checkpoints import LeaderEpochCheckpointFile, OffsetCheckpointFile

    yield f"Dumping {path}"
    try:
        if path.name == "leader-epoch-checkpoint":
            for e in LeaderEpochCheckpointFile(path, create=False).read():
                yield f"epoch: {e.epoch} startOffset: {e.start_offset}"
            return
        what = _OFFSET_CHECKPOINTS[path.name]
        for (topic, partition), offset in sorted(OffsetCheckpointFile(path, create=False).read().items()):
            yield f"partition: {topic}-{partition} {what}: {offset}"
    except (OSError, ValueError) as e:
        raise click.ClickException(f"{path}: {e}") from None


@click.command("dump-log")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--deep-iteration", is_flag=True, help="Print every record, not only batch headers.")
@click.option("--print-data-log", is_flag=True, help="Print keys and payloads (implies --deep-iteration).")
def dump_log(files: tuple[Path, ...], deep_iteration: bool, print_data_log: bool) -> None:
    """Print .log, .index, .timeindex, .snapshot and .txnindex files as Kafka's kafka-dump-log.sh does.

    Checkpoint files are printed too: cleaner-offset-checkpoint (how far the log cleaner has
    compacted each log), recovery-point, log-start-offset, replication-offset and
    leader-epoch-checkpoint.

    \b
    Examples:
      odradek dump-log data/orders-0/00000000000000000000.log --print-data-log
      odradek dump-log data/orders-0/00000000000000000000.index
      odradek dump-log data/cleaner-offset-checkpoint
    """
    for path in files:
        if path.suffix == ".log":
            lines = dump_log_file(path, deep_iteration, print_data_log)
        elif path.suffix == ".index":
            lines = dump_index_file(path)
        elif path.suffix == ".timeindex":
            lines = dump_time_index_file(path)
        elif path.suffix == ".snapshot":
            lines = dump_producer_snapshot_file(path)
        elif path.suffix == ".txnindex":
            lines = dump_txn_index_file(path)
        elif path.name in _OFFSET_CHECKPOINTS or path.name == "leader-epoch-checkpoint":
            lines = dump_checkpoint_file(path)
        else:
            raise click.ClickException(
                f"{path}: unsupported file type (expected .log, .index, .timeindex, .snapshot, "
                ".txnindex, or a checkpoint file)"
            )
        for line in lines:
            click.echo(line)
