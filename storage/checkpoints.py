"""Kafka's small text files in log dirs and partition dirs, byte for byte.

Files (names exactly as Kafka's)::

    <log.dir>/meta.properties                      Java properties, see below
    <log.dir>/recovery-point-offset-checkpoint     OffsetCheckpointFile
    <log.dir>/replication-offset-checkpoint        OffsetCheckpointFile (high watermarks)
    <log.dir>/log-start-offset-checkpoint          OffsetCheckpointFile
    <log.dir>/cleaner-offset-checkpoint            OffsetCheckpointFile
    <log.dir>/.kafka_cleanshutdown                 clean-shutdown marker
    <log.dir>/<topic>-<p>/leader-epoch-checkpoint  LeaderEpochCheckpointFile
    <log.dir>/<topic>-<p>/partition.metadata       PartitionMetadataFile

Checkpoint format (Kafka's ``CheckpointFile``), UTF-8, lines ended by ``\\n``::

    0                 <- version (always 0 for these files)
    2                 <- number of entries
    topic 0 42        <- one entry per line: OffsetCheckpointFile "topic partition offset",
    topic 1 17           LeaderEpochCheckpointFile "epoch startOffset"

Reading follows ``CheckpointFile.CheckpointReadBuffer``: an empty file, or a file holding only the
version line, is an empty checkpoint; a version other than the expected one, a line that does not
parse (fields split on Java's ``\\s+``), or an entry count that does not match the entries raise
:class:`CheckpointFormatError` (an ``OSError``, as Kafka raises ``IOException``) naming the file and
the line, e.g. "Malformed line in checkpoint file [/path]: garbage".

``partition.metadata`` is ``"version: 0\\ntopic_id: <topic id>"`` with no trailing newline, the
topic id in Kafka's ``Uuid.toString`` form (URL-safe base64 of the 16 bytes, no padding, 22 chars,
see :func:`kafka_uuid_str`).

``meta.properties`` is written as Java's ``Properties.store(writer, "")`` writes it::

    #
    #Thu Jan 01 00:00:00 UTC 1970
    broker.id=0
    cluster.id=Ys5_CZ4vRpWb6-5UoFrjdw
    version=0

Keys are sorted (what JDK 18+ writes; JDK 17 writes hash order, which no reader depends on); the
date is ``Date.toString()`` in UTC. v0 (ZooKeeper mode) has ``broker.id`` and ``cluster.id``; v1
(KRaft) has ``node.id`` and ``cluster.id``; both may have ``directory.id`` (Kafka 3.7+).

The clean-shutdown marker ``.kafka_cleanshutdown`` is empty as Kafka 3.0-3.6 write it, or, given a
broker epoch, ``{"version":0,"brokerEpoch":N}`` as Kafka 3.7+ write it; its presence is what counts.

Invariants:

* Every write is atomic: the content goes to ``<file>.tmp``, which is flushed and fsynced, then
  renamed over the file, then the directory is fsynced (``sync=False`` skips both fsyncs, as
  Kafka's ``write(entries, sync=false)``). A crash leaves the old file or the new one, never a mix.
* Nothing here caches file contents; every ``read()`` reads the file.

Who may call: the owner of the directory -- the LogManager for log-dir files, the partition's log
for partition files -- one writer at a time (these classes take no locks). Reads and writes block
on disk I/O; call them from a thread or at startup/shutdown, not from latency-sensitive code on the
event loop. Imports only the stdlib.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

__all__ = [
    "CHECKPOINT_VERSION",
    "CLEANER_OFFSET_CHECKPOINT_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "META_PROPERTIES_FILE",
    "PARTITION_METADATA_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
    "ZERO_UUID",
    "CheckpointFile",
    "CheckpointFormatError",
    "CleanShutdownFileHandler",
    "EntryFormatter",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "MetaProperties",
    "OffsetCheckpointFile",
    "PartitionMetadata",
    "PartitionMetadataFile",
    "atomic_write",
    "decode_java_properties",
    "encode_java_properties",
    "fsync_dir",
    "kafka_uuid_str",
    "parse_kafka_uuid",
    "read_meta_properties",
    "write_meta_properties",
]

CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES_FILE = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

ZERO_UUID = uuid.UUID(int=0)

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

T = TypeVar("T")


class CheckpointFormatError(OSError):
    """A checkpoint, partition.metadata or meta.properties file that does not parse.

    An ``OSError`` because Kafka raises ``IOException`` here (and takes the log dir offline);
    ``str()`` is the message, which names the file and the offending line.
    """


# ---------------------------------------------------------------------------------------------
# atomic writes


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename or create inside it is durable (no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # e.g. Windows cannot open directories; Kafka's Utils.flushDir skips it too
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically (Kafka's write-temp-then
    ``Utils.atomicMoveWithFallback``): write ``<path>.tmp``, flush (+fsync when ``sync``),
    rename over ``path``, fsync the directory when ``sync``. The temp file is removed on failure.
    """
    target = os.fspath(path)
    tmp = target + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(target)))


# ---------------------------------------------------------------------------------------------
# Java parsing helpers

_INT_RE = re.compile(r"[+-]?[0-9]+")
_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")  # Java's \s
_LINE_END = re.compile(r"\r\n|\r|\n")  # BufferedReader.readLine terminators


def _parse_int(text: str, lo: int, hi: int) -> int | None:
    """Integer.parseInt / Long.parseLong on ASCII digits: None when Java would throw."""
    if not _INT_RE.fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def _java_lines(text: str) -> list[str]:
    """The lines BufferedReader.readLine returns, in order."""
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()  # a final terminator does not start another line
    return lines


def _java_split_ws(line: str) -> list[str]:
    """String.split("\\\\s+"): a leading empty field is kept, trailing empty fields dropped."""
    parts = _JAVA_WS.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


# ---------------------------------------------------------------------------------------------
# CheckpointFile


class EntryFormatter(Generic[T]):
    """Converts one entry to its line and back (Kafka's ``CheckpointFile.EntryFormatter``)."""

    def __init__(self, to_line: Callable[[T], str], from_line: Callable[[str], T | None]) -> None:
        self.to_line = to_line
        self.from_line = from_line  # None when the line is malformed


class CheckpointFile(Generic[T]):
    """Kafka's versioned, line-oriented checkpoint file (see the module docstring for the format).

    Creates an empty file at construction when none exists, as Kafka's ``CheckpointFile`` does
    (``create=False`` to not). Who may call: the file's single owner; blocking I/O.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        version: int,
        formatter: EntryFormatter[T],
        *,
        create: bool = True,
    ) -> None:
        self.path = Path(path)
        self.version = version
        self.formatter = formatter
        if create:
            try:
                os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except FileExistsError:
                pass

    def encode(self, entries: Iterable[T]) -> bytes:
        """The exact bytes :meth:`write` puts on disk."""
        lines = [self.formatter.to_line(e) for e in entries]
        out = [str(self.version), str(len(lines)), *lines]
        return ("\n".join(out) + "\n").encode("utf-8")

    def write(self, entries: Iterable[T], *, sync: bool = True) -> None:
        atomic_write(self.path, self.encode(entries), sync=sync)

    def decode(self, data: bytes) -> list[T]:
        """Parse file contents; raises CheckpointFormatError (see the module docstring)."""
        location = str(self.path.absolute())
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CheckpointFormatError(f"Checkpoint file [{location}] is not UTF-8: {e}") from None
        lines = _java_lines(text)
        if not lines:
            return []

        def malformed(line: str) -> CheckpointFormatError:
            return CheckpointFormatError(f"Malformed line in checkpoint file [{location}]: {line}")

        version = _parse_int(lines[0], _INT32_MIN, _INT32_MAX)
        if version is None:
            raise malformed(lines[0])
        if version != self.version:
            raise CheckpointFormatError(
                f"Unrecognised version:{version}, expected version: {self.version} "
                f"in checkpoint file at: {location}"
            )
        if len(lines) == 1:
            return []
        expected = _parse_int(lines[1], 0, _INT32_MAX)
        if expected is None:
            raise malformed(lines[1])
        entries: list[T] = []
        for line in lines[2:]:
            entry = self.formatter.from_line(line)
            if entry is None:
                raise malformed(line)
            entries.append(entry)
        if len(entries) != expected:
            raise CheckpointFormatError(
                f"Expected [{expected}] entries in checkpoint file [{location}], "
                f"but found only [{len(entries)}]"
            )
        return entries

    def read(self) -> list[T]:
        """The entries on disk; a missing or empty file is an empty checkpoint."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return self.decode(data)


# ---------------------------------------------------------------------------------------------
# OffsetCheckpointFile


def _offset_to_line(entry: tuple[tuple[str, int], int]) -> str:
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


def _offset_from_line(line: str) -> tuple[tuple[str, int], int] | None:
    parts = _java_split_ws(line)
    if len(parts) != 3 or not parts[0]:
        return None
    partition = _parse_int(parts[1], _INT32_MIN, _INT32_MAX)
    offset = _parse_int(parts[2], _INT64_MIN, _INT64_MAX)
    if partition is None or offset is None:
        return None
    return (parts[0], partition), offset


class OffsetCheckpointFile:
    """A ``{(topic, partition): offset}`` checkpoint: recovery-point-offset-checkpoint,
    replication-offset-checkpoint, log-start-offset-checkpoint, cleaner-offset-checkpoint.

    Format: version 0, count, then ``"<topic> <partition> <offset>"`` per line. Entries are
    written sorted by (topic, partition) -- Kafka writes HashMap order, which no reader relies on.
    Topics may not contain whitespace (Kafka's legal topic characters never do).
    Who may call: the LogManager / log cleaner owning the log dir; blocking I/O.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self._file: CheckpointFile[tuple[tuple[str, int], int]] = CheckpointFile(
            path,
            CHECKPOINT_VERSION,
            EntryFormatter(_offset_to_line, _offset_from_line),
            create=create,
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def encode(self, offsets: Mapping[tuple[str, int], int]) -> bytes:
        for topic, _ in offsets:
            if not topic or _JAVA_WS.search(topic):
                raise ValueError(f"topic {topic!r} cannot be written to an offset checkpoint")
        return self._file.encode(sorted(offsets.items()))

    def write(self, offsets: Mapping[tuple[str, int], int], *, sync: bool = True) -> None:
        atomic_write(self.path, self.encode(offsets), sync=sync)

    def read(self) -> dict[tuple[str, int], int]:
        """The offsets on disk (a later duplicate line wins, as in Kafka's HashMap)."""
        return dict(self._file.read())


# ---------------------------------------------------------------------------------------------
# LeaderEpochCheckpointFile


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it (Kafka's ``EpochEntry``)."""

    epoch: int
    start_offset: int


def _epoch_to_line(entry: EpochEntry) -> str:
    return f"{entry.epoch} {entry.start_offset}"


def _epoch_from_line(line: str) -> EpochEntry | None:
    parts = _java_split_ws(line)
    if len(parts) != 2:
        return None
    epoch = _parse_int(parts[0], _INT32_MIN, _INT32_MAX)
    offset = _parse_int(parts[1], _INT64_MIN, _INT64_MAX)
    if epoch is None or offset is None:
        return None
    return EpochEntry(epoch, offset)


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint``: version 0, count, then ``"<epoch> <startOffset>"`` per line,
    in the order given (the cache keeps them ascending). Who may call: the partition's
    LeaderEpochFileCache only; blocking I/O.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self._file: CheckpointFile[EpochEntry] = CheckpointFile(
            path,
            CHECKPOINT_VERSION,
            EntryFormatter(_epoch_to_line, _epoch_from_line),
            create=create,
        )

    @staticmethod
    def new_file(partition_dir: str | os.PathLike[str]) -> Path:
        return Path(partition_dir) / LEADER_EPOCH_CHECKPOINT_FILE

    @property
    def path(self) -> Path:
        return self._file.path

    def encode(self, entries: Iterable[EpochEntry]) -> bytes:
        return self._file.encode(entries)

    def write(self, entries: Iterable[EpochEntry], *, sync: bool = True) -> None:
        self._file.write(entries, sync=sync)

    def read(self) -> list[EpochEntry]:
        return self._file.read()


# ---------------------------------------------------------------------------------------------
# Kafka Uuid

_UUID_RE = re.compile(r"[A-Za-z0-9_-]{22}(==)?")


def kafka_uuid_str(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 big-endian bytes, unpadded (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString`` (22 URL-safe base64 chars, optionally padded with ``==``).

    Raises ValueError for anything else.
    """
    if not _UUID_RE.fullmatch(text):
        raise ValueError(f"{text!r} is not a base64 (URL-safe) encoded 16-byte UUID")
    core = text.rstrip("=")
    try:
        raw = base64.urlsafe_b64decode(core + "==")
    except (binascii.Error, ValueError):  # pragma: no cover - regex already guarantees this
        raise ValueError(f"{text!r} is not a base64 (URL-safe) encoded 16-byte UUID") from None
    return uuid.UUID(bytes=raw)


# ---------------------------------------------------------------------------------------------
# partition.metadata


class PartitionMetadata(NamedTuple):
    version: int
    topic_id: uuid.UUID


_PM_SPLIT = re.compile(r":[ \t\n\x0b\f\r]+")


class PartitionMetadataFile:
    """``partition.metadata``: ``"version: 0\\ntopic_id: <kafka uuid>"`` (no trailing newline).

    :meth:`record` then :meth:`maybe_flush` (Kafka's two-step) or :meth:`write` directly. Reading
    accepts any version >= 0 (Kafka's downgrade rule) and rejects the all-zero topic id.
    Who may call: the partition's log; blocking I/O.
    """

    CURRENT_VERSION = 0

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._dirty: uuid.UUID | None = None

    @staticmethod
    def new_file(partition_dir: str | os.PathLike[str]) -> Path:
        return Path(partition_dir) / PARTITION_METADATA_FILE

    @staticmethod
    def encode(topic_id: uuid.UUID, version: int = CURRENT_VERSION) -> bytes:
        return f"version: {version}\ntopic_id: {kafka_uuid_str(topic_id)}".encode()

    def record(self, topic_id: uuid.UUID) -> None:
        """Remember ``topic_id`` for the next :meth:`maybe_flush`; a different id than one
        already recorded is an error (Kafka's InconsistentTopicIdException)."""
        if self._dirty is not None and self._dirty != topic_id:
            raise ValueError(
                f"Tried to record topic ID {kafka_uuid_str(topic_id)} to file but had already "
                f"recorded {kafka_uuid_str(self._dirty)}"
            )
        self._dirty = topic_id

    def maybe_flush(self) -> None:
        if self._dirty is not None:
            self.write(self._dirty)
            self._dirty = None

    def write(self, topic_id: uuid.UUID, *, sync: bool = True) -> None:
        atomic_write(self.path, self.encode(topic_id), sync=sync)

    def decode(self, data: bytes) -> PartitionMetadata:
        location = str(self.path.absolute())

        def malformed(line: str | None) -> CheckpointFormatError:
            return CheckpointFormatError(
                f"Malformed line in partition metadata file [{location}]: {line}"
            )

        try:
            lines = _java_lines(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise malformed(repr(data[:60])) from None

        def value_of(index: int, key: str) -> str:
            line = lines[index] if index < len(lines) else None
            if line is None:
                raise malformed(None)
            parts = _PM_SPLIT.split(line, maxsplit=1)
            if len(parts) != 2 or parts[0] != key:
                raise malformed(line)
            return parts[1]

        version = _parse_int(value_of(0, "version"), _INT32_MIN, _INT32_MAX)
        if version is None:
            raise malformed(lines[0])
        if version < self.CURRENT_VERSION:
            raise CheckpointFormatError(
                f"Unrecognized version of partition metadata file ({location}): {version}"
            )
        try:
            topic_id = parse_kafka_uuid(value_of(1, "topic_id"))
        except ValueError:
            raise malformed(lines[1]) from None
        if topic_id == ZERO_UUID:
            raise CheckpointFormatError(f"Invalid topic ID in partition metadata file ({location})")
        return PartitionMetadata(version, topic_id)

    def read(self) -> PartitionMetadata:
        """Raises FileNotFoundError when absent, CheckpointFormatError when malformed."""
        return self.decode(self.path.read_bytes())

    def exists(self) -> bool:
        return self.path.exists()

    def delete(self) -> None:
        self.path.unlink()


# ---------------------------------------------------------------------------------------------
# Java properties (meta.properties)

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _java_date(now: _dt.datetime) -> str:
    """``java.util.Date.toString()`` ("EEE MMM dd HH:mm:ss zzz yyyy") in UTC."""
    t = now.astimezone(_dt.UTC) if now.tzinfo else now
    return (
        f"{_DAYS[t.weekday()]} {_MONTHS[t.month - 1]} {t.day:02d} "
        f"{t.hour:02d}:{t.minute:02d}:{t.second:02d} UTC {t.year}"
    )


def _save_convert(text: str, *, escape_space: bool) -> str:
    """``Properties.saveConvert`` with escUnicode (non-ASCII as \\uXXXX, so any reader agrees)."""
    out: list[str] = []
    for i, c in enumerate(text):
        o = ord(c)
        if 61 < o < 127:
            out.append("\\\\" if c == "\\" else c)
        elif c == " ":
            out.append("\\ " if i == 0 or escape_space else " ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif c in "=:#!":
            out.append("\\" + c)
        elif o < 0x20 or o > 0x7E:
            units = c.encode("utf-16-be", "surrogatepass")
            for j in range(0, len(units), 2):
                out.append(f"\\u{int.from_bytes(units[j : j + 2], 'big'):04X}")
        else:
            out.append(c)
    return "".join(out)


def encode_java_properties(
    props: Mapping[str, str], *, comment: str = "", now: _dt.datetime | None = None
) -> bytes:
    """What ``Properties.store(writer, comment)`` writes: ``#comment``, ``#date``, then sorted
    ``key=value`` lines, ``\\n``-terminated. ``now`` defaults to the current time."""
    when = now if now is not None else _dt.datetime.now(_dt.UTC)
    lines = [f"#{comment}", f"#{_java_date(when)}"]
    for key in sorted(props):
        k = _save_convert(key, escape_space=True)
        v = _save_convert(props[key], escape_space=False)
        lines.append(f"{k}={v}")
    return ("\n".join(lines) + "\n").encode("ascii")


_PROP_WS = " \t\f"


def _load_convert(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        if c != "\\" or i >= n:
            out.append(c)
            continue
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append({"t": "\t", "r": "\r", "n": "\n", "f": "\f"}.get(c, c))
    # \uXXXX surrogate pairs become one character, as in a Java String
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def _logical_lines(text: str) -> Iterable[str]:
    """Java ``Properties.LineReader``: skip blanks/comments, join backslash continuations."""
    pending: str | None = None
    for raw in _LINE_END.split(text):
        line = raw.lstrip(_PROP_WS)
        if pending is None:
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def decode_java_properties(text: str) -> dict[str, str]:
    """``Properties.load`` semantics: comments (#, !), ``=``/``:``/whitespace separators,
    backslash escapes and continuation lines. Raises ValueError on a bad \\u escape."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        key_end = n
        value_start = n
        has_sep = False
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:":
                key_end, value_start, has_sep = i, i + 1, True
                break
            if c in _PROP_WS:
                key_end, value_start = i, i + 1
                break
            i += 1
        j = value_start
        while j < n and line[j] in _PROP_WS:
            j += 1
        if not has_sep and j < n and line[j] in "=:":
            j += 1
        while j < n and line[j] in _PROP_WS:
            j += 1
        props[_load_convert(line[:key_end])] = _load_convert(line[j:])
    return props


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """One log dir's ``meta.properties`` (Kafka's ``MetaProperties``).

    ``node_id`` is written as ``broker.id`` in version 0 and ``node.id`` in version 1; version 1
    requires ``cluster_id`` and ``node_id``. A ZooKeeper-mode Kafka 3.x writes version 0 with
    ``broker.id`` and ``cluster.id``.
    """

    version: int = 0
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: uuid.UUID | None = None

    def __post_init__(self) -> None:
        if self.version not in (0, 1):
            raise ValueError(f"Unknown meta.properties version number {self.version}")
        if self.version == 1:
            if self.cluster_id is None:
                raise ValueError("cluster.id was not found.")
            if self.node_id is None:
                raise ValueError("node.id was not found.")

    def to_properties(self) -> dict[str, str]:
        props = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            props["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = kafka_uuid_str(self.directory_id)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MetaProperties:
        """Kafka's ``MetaProperties.Builder(Properties)``; ValueError when invalid."""
        version = _parse_int(props.get("version", "0"), _INT32_MIN, _INT32_MAX)
        if version not in (0, 1):
            raise ValueError(f"Unknown meta.properties version number {props.get('version')}")
        id_key = "broker.id" if version == 0 else "node.id"
        node_id = None
        if id_key in props or version == 1:
            if id_key not in props:
                raise ValueError(f"Failed to find {id_key}")
            node_id = _parse_int(props[id_key], _INT32_MIN, _INT32_MAX)
            if node_id is None:
                raise ValueError(f"Unable to read {id_key} as a base-10 number.")
        directory_id = None
        if "directory.id" in props:
            try:
                directory_id = parse_kafka_uuid(props["directory.id"])
            except ValueError as e:
                raise ValueError(f"Unable to read directory.id as a Uuid: {e}") from None
        return cls(version, props.get("cluster.id"), node_id, directory_id)


def write_meta_properties(
    path: str | os.PathLike[str],
    meta: MetaProperties,
    *,
    now: _dt.datetime | None = None,
    sync: bool = True,
) -> None:
    """Write ``meta.properties`` atomically (Kafka's ``PropertiesUtils.writePropertiesFile``)."""
    atomic_write(path, encode_java_properties(meta.to_properties(), now=now), sync=sync)


# the keys Kafka (any version) and Odradek write into meta.properties
_META_PROPERTIES_KEYS = frozenset({"version", "broker.id", "node.id", "cluster.id", "directory.id"})
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def read_meta_properties(path: str | os.PathLike[str]) -> MetaProperties:
    """Read ``meta.properties``. FileNotFoundError when absent; CheckpointFormatError when the
    contents are not a valid meta.properties. Decoded as ISO-8859-1, as Kafka's
    ``Properties.load(InputStream)`` does.

    Stricter than Kafka, so that a garbled file is detected rather than read as an empty v0
    (issue #12): control characters, a key neither Kafka nor Odradek writes (a flipped byte
    in ``broker.id``), or no property at all are refused too."""
    data = Path(path).read_bytes()
    try:
        bad = _CONTROL_BYTES.search(data)
        if bad is not None:
            raise ValueError(f"control character {bad.group()!r} at byte {bad.start()}")
        props = decode_java_properties(data.decode("latin-1"))
        if not props:
            raise ValueError("no properties in it")
        unknown = sorted(set(props) - _META_PROPERTIES_KEYS)
        if unknown:
            raise ValueError(f"unknown keys {unknown}")
        return MetaProperties.from_properties(props)
    except ValueError as e:
        raise CheckpointFormatError(f"Invalid meta.properties file [{path}]: {e}") from None


# ---------------------------------------------------------------------------------------------
# clean shutdown marker


class CleanShutdownFileHandler:
    """``<log.dir>/.kafka_cleanshutdown``: present iff the broker shut down cleanly and the log
    dir needs no recovery. The LogManager deletes it after loading logs at startup and writes it
    as the last step of a clean shutdown.

    Content: empty (Kafka 3.0-3.6) or, with a broker epoch, ``{"version":0,"brokerEpoch":N}``
    (Kafka 3.7+, KIP-966). Who may call: the LogManager; blocking I/O.
    """

    CURRENT_VERSION = 0

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.path = Path(log_dir) / CLEAN_SHUTDOWN_FILE

    @staticmethod
    def encode(broker_epoch: int | None) -> bytes:
        if broker_epoch is None:
            return b""
        return json.dumps(
            {"version": CleanShutdownFileHandler.CURRENT_VERSION, "brokerEpoch": broker_epoch},
            separators=(",", ":"),
        ).encode()

    def write(self, broker_epoch: int | None = None, *, sync: bool = True) -> None:
        atomic_write(self.path, self.encode(broker_epoch), sync=sync)

    def read(self) -> int | None:
        """The broker epoch in the marker; None when absent, empty, or not Kafka's JSON."""
        try:
            content = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(content, dict) or content.get("version") != self.CURRENT_VERSION:
            return None
        epoch = content.get("brokerEpoch")
        return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None

    def exists(self) -> bool:
        return self.path.exists()

    def delete(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
