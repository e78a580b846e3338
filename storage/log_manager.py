"""LogManager: the broker's log directories and every partition log in them.

On-disk layout of each log dir (Kafka's): `.lock` (held with flock while the broker runs),
`meta.properties`, `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint`, `cleaner-offset-checkpoint`, `.kafka_cleanshutdown` (present
only between a clean shutdown and the next start), and one directory `<topic>-<partition>` per
log. A directory `<topic>-<partition>.<id>-delete` is a deleted log awaiting removal (see below). A KRaft
Kafka's metadata log `__cluster_metadata-0` is skipped and left untouched (Kafka's LogManager skips
it too), so a Kafka log dir can be adopted in place.

The four checkpoints are Kafka's OffsetCheckpointFile (`0`, count, `topic partition offset`
lines; storage.checkpoints), one set per log dir, each listing only that dir's partitions. They
are read once, at start-up, and rewritten whole by the `checkpoint_*` methods and at shutdown.
`cleaner-offset-checkpoint` belongs to the log cleaner (storage.cleaner): each compacted log's
first dirty offset, moved after every cleaning; the entry of a deleted partition is dropped at
once (Kafka's `updateCheckpoints(dir, partitionToRemove)` in `asyncDelete`), after any cleaning of
it was stopped.

Several log dirs: each has its own `.lock`, `meta.properties`, checkpoints and marker; a new log
goes to the dir holding the fewest logs (Kafka's `nextLogDirs`; ties go to the dir listed first).
Loading reports progress per dir ("Loaded i/n logs in <dir> (p%)") at every tenth of its logs
and at least once a second.

Why the marker and the recovery points: after a clean shutdown every log was flushed and closed,
so loading skips recovery; after a crash each log re-validates everything past its recovery point
(the offset up to which it was known to be flushed) and truncates a torn tail.

Deleting a log is Kafka's asyncDelete: the log leaves `logs`, its files are closed (not flushed)
and its directory is renamed `<topic>-<partition>.<uuid>-delete` -- that is all a StopReplica
(delete=true) or a topic deletion waits for -- and the renamed directory is removed
`file.delete.delay.ms` (the broker's `log.segment.delete.delay.ms`, 60 s) later by `delete_logs`,
which the broker runs in the background (Kafka's kafka-delete-logs task). Why: removing 1,000
logs' files took about 0.7 s per StopReplica, and the controller's next requests to that broker
(a new topic's LeaderAndIsr and UpdateMetadata) wait behind it. A `-delete` directory found at
start-up (a broker stopped before removing it) is scheduled the same way, never loaded as a log.

Who calls what: `open()` and `shutdown()` are blocking and run in an executor at broker start and
stop; `get_or_create_log`, `async_delete` and the periodic `cleanup_logs` / `flush_dirty_logs` /
`checkpoint_*` / `delete_logs` run from the event loop (the periodic ones hand their file work to
an executor through the broker's scheduler).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    CheckpointFormatError,
    MetaProperties,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    read_meta_properties,
    write_meta_properties,
)
from storage.config import LogConfig
from storage.errors import KafkaStorageError
from storage.log import Log
from storage.log_dir_failure_channel import LogDirFailureChannel, describe_io_error, io_error_of
from storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

log = logging.getLogger("odradek.storage.log_manager")

LOCK_FILE = ".lock"
# KRaft's metadata log (`__cluster_metadata-0`) sits in a Kafka log dir beside the partition
# logs; it is not a partition log, and Kafka's own LogManager skips it too (it is left as found).
KRAFT_METADATA_TOPIC = "__cluster_metadata"
# Kafka's legal topic characters (Topic.validate); anything else cannot be one of our partitions
_PARTITION_DIR = re.compile(r"^([a-zA-Z0-9._-]+)-(\d+)$")
_DELETE_DIR = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})-delete$")
# Longest file name the common file systems (ext4, xfs, btrfs) allow.
_MAX_FILE_NAME = 255


def log_delete_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>.<uuid>-delete`, with the topic cut so the name stays within 255
    bytes, as Kafka's `UnifiedLog.logDeleteDirName`: a 249-character topic would otherwise fail
    the rename with "File name too long" and could never be deleted. The uuid keeps the name
    unique, and only the suffix matters to the start-up sweep (`_DELETE_DIR`)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}-delete"
    return topic[: min(len(topic), _MAX_FILE_NAME - len(suffix))] + suffix


TopicPartition = tuple[str, int]


class LogsOnDisk(NamedTuple):
    """A topic's logs as loaded (LogManager.topics_on_disk)."""

    partitions: set[int]
    topic_ids: set[uuid.UUID]
    latest_epochs: dict[int, int]  # partition -> latest leader epoch in its leader-epoch-checkpoint


def parse_partition_dir(name: str) -> TopicPartition | None:
    m = _PARTITION_DIR.match(name)
    if m is None or name.startswith("."):
        return None
    return m.group(1), int(m.group(2))


# What a log dir holds and a partition dir never does (issue #21: `./data/zk-broker-1` inside a
# single node's `./data` parses as partition 1 of topic `zk-broker`; loading it would write into
# another broker's log dir).
_LOG_DIR_FILES = (META_PROPERTIES_FILE, LOCK_FILE, CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT_FILE,
                  LOG_START_OFFSET_CHECKPOINT_FILE, REPLICATION_OFFSET_CHECKPOINT_FILE)


def _log_dir_files(p: Path) -> list[str]:
    """The log-dir files (meta.properties, .lock, checkpoints) and subdirectories in `p`: none in
    a partition log, whose files are segments, indexes, snapshots and checkpoints of its own."""
    found = [name for name in _LOG_DIR_FILES if (p / name).exists()]
    found += [f"{c.name}/" for c in sorted(p.iterdir()) if c.is_dir()][:3]
    return found


def _read_checkpoint(d: Path, name: str, fallback: str) -> dict[TopicPartition, int] | None:
    """A log-dir checkpoint, or None when it cannot be read: logged with what loading does
    instead (``fallback``), as Kafka's ``LogManager.loadLogs`` resets an unreadable recovery
    point or log start offset checkpoint rather than refusing to start."""
    path = d / name
    try:
        return OffsetCheckpointFile(path).read()
    except (OSError, ValueError) as e:
        log.warning("Error occurred while reading %s (%s): %s", path, e, fallback)
        return None


class LogDirError(RuntimeError):
    """A log dir cannot be used (cannot be created, locked, or belongs to another node): the
    broker must not start. The message names the dir; the server logs it as one line."""


def halt_broker(message: str) -> None:
    """Kafka's fatal line and Exit.halt(1): the process ends at once, without a shutdown (its
    logs cannot be written any more; the next start recovers them)."""
    log.critical(message)
    logging.shutdown()  # flushes the handlers: the line must reach the operator
    sys.stderr.flush()
    os._exit(1)


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        broker_id: int,
        default_config: LogConfig,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.broker_id = broker_id
        self.default_config = default_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.logs: dict[TopicPartition, Log] = {}
        self.log_dir_of: dict[TopicPartition, Path] = {}
        self._locks: dict[Path, int] = {}
        # I/O errors of the logs and checkpoints take their dir offline here (Kafka's
        # LogDirFailureChannel); the ReplicaManager's handler then calls handle_log_dir_failure
        self.log_dir_failure_channel = LogDirFailureChannel()
        # what ends the process when no log dir is left (tests of the pure logic replace it)
        self.halt: Callable[[str], None] = halt_broker
        self.had_clean_shutdown: dict[Path, bool] = {}
        # dirs this start found without meta.properties and without any log: nothing to recover
        self._new_dirs: set[Path] = set()
        # cluster.id of the first meta.properties naming one (Kafka writes it; a log dir taken
        # over from Kafka keeps its cluster id through this)
        self.stored_cluster_id: str | None = None
        # cleaner-offset-checkpoint entries: first dirty offset of each compacted log, moved by
        # the log cleaner after each cleaning (storage.cleaner.manager)
        self.cleaner_offsets: dict[TopicPartition, int] = {}
        self._cleaner_checkpoint_lock = threading.Lock()
        # the LogCleaner, when the broker runs one: a log about to be deleted stops being cleaned
        self.cleaner: Any = None
        # partition.metadata files of new logs, written but not yet fsynced (Kafka's record()
        # then maybeFlush() on its scheduler): creating a topic runs on the event loop, where
        # fifty fsyncs for __consumer_offsets would stall every connection.
        self._unsynced_metadata: list[PartitionMetadataFile] = []
        self._metadata_lock = threading.Lock()
        # renamed `-delete` directories and when each was scheduled (wall ms), oldest first
        # (Kafka's logsToBeDeleted): removed by delete_logs file.delete.delay.ms after
        self._logs_to_be_deleted: deque[tuple[Path, int]] = deque()
        self._to_be_deleted_lock = threading.Lock()

    # -- start-up -------------------------------------------------------------------------------

    @classmethod
    def open(cls, config: Any) -> LogManager:
        """Lock and load every log dir of a KafkaConfig (blocking)."""
        defaults = LogConfig.from_props(config.topic_defaults())
        manager = cls(config.log_dirs, config.broker_id, defaults, config["producer.id.expiration.ms"])
        manager.startup()
        return manager

    def startup(self) -> None:
        """Create, lock and check every log dir before writing anything to any of them (a dir
        that cannot be used fails the start with LogDirError and leaves the others as they
        were), then write the missing meta.properties files, then load."""
        missing_meta: list[Path] = []
        for d in self.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise LogDirError(f"Cannot create log dir {d}: {e.strerror or e}") from e
            self._lock(d)
            if not self._check_meta_properties(d):
                missing_meta.append(d)
        for d in missing_meta:
            if not any(p.is_dir() for p in d.iterdir()):
                self._new_dirs.add(d)
            try:
                write_meta_properties(d / META_PROPERTIES_FILE, MetaProperties(version=0, node_id=self.broker_id))
            except OSError as e:
                raise LogDirError(f"Cannot write {d / META_PROPERTIES_FILE}: {e.strerror or e}") from e
        for d in self.log_dirs:
            self._load_dir(d)

    def _lock(self, d: Path) -> None:
        try:
            fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise LogDirError(f"Cannot lock log dir {d}: {e.strerror or e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirError(
                f"Failed to acquire lock on file .lock in {d}. A Kafka instance in another process "
                "or thread is using this directory."
            ) from None
        self._locks[d] = fd

    def _check_meta_properties(self, d: Path) -> bool:
        """Check d's meta.properties against this broker (read only); False when there is none."""
        path = d / META_PROPERTIES_FILE
        if not path.exists():
            return False
        meta = read_meta_properties(path)
        if self.stored_cluster_id is None:
            self.stored_cluster_id = meta.cluster_id
        if meta.node_id is not None and meta.node_id != self.broker_id:
            raise LogDirError(
                f"Stored node id {meta.node_id} doesn't match previous node id {self.broker_id} in "
                f"{path}. If you moved your data, make sure your configured node id matches."
            )
        return True

    def _load_dir(self, d: Path) -> None:
        marker = d / CLEAN_SHUTDOWN_FILE
        marker_found = marker.exists()
        clean = marker_found or d in self._new_dirs  # a new dir has nothing to recover
        recovery_points = _read_checkpoint(
            d, RECOVERY_POINT_CHECKPOINT_FILE, "recovering every log of the dir from offset 0"
        )
        if recovery_points is None:
            clean, recovery_points = False, {}
        self.had_clean_shutdown[d] = clean
        start_offsets = _read_checkpoint(
            d, LOG_START_OFFSET_CHECKPOINT_FILE, "each log starts at its first segment's base offset"
        ) or {}
        high_watermarks = _read_checkpoint(
            d, REPLICATION_OFFSET_CHECKPOINT_FILE, "high watermarks start at the log start offsets"
        ) or {}
        cleaner_offsets = _read_checkpoint(
            d, CLEANER_OFFSET_CHECKPOINT_FILE, "no cleaner offsets are kept"
        ) or {}
        entries = sorted(p for p in d.iterdir() if p.is_dir())
        todo = []
        for p in entries:
            if _DELETE_DIR.match(p.name):  # a deleted log: removed later, never loaded (Kafka's loadLog)
                self._schedule_deletion(p)
                continue
            tp = parse_partition_dir(p.name)
            if tp is None:
                log.warning("Skipping %s: its name is not <topic>-<partition>, so it is not a partition log", p)
            elif tp[0] == KRAFT_METADATA_TOPIC:
                log.info("Skipping %s: KRaft's metadata log, not a partition log", p)
            elif (marks := _log_dir_files(p)):
                log.warning("Skipping %s: it holds %s, so it is another broker's log dir, not a partition log; "
                            "give each broker a log dir of its own, outside the others", p, ", ".join(marks))
            else:
                todo.append((tp, p))
        started = time.monotonic()
        last_report = started
        tenth = 0  # progress is reported at every tenth of the logs, and at least every second
        log.info(
            "Loading %d logs in %s (%s)", len(todo), d,
            "new log dir" if d in self._new_dirs else "clean shutdown" if clean else "UNCLEAN shutdown: recovering",
        )
        for i, (tp, path) in enumerate(todo, 1):
            self.logs[tp] = Log.open(
                path,
                self.default_config,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp),
                clean_shutdown=clean,
                high_watermark=high_watermarks.get(tp),
                producer_id_expiration_ms=self.producer_id_expiration_ms,
            )
            self.logs[tp].log_dir_failure_channel = self.log_dir_failure_channel
            self.log_dir_of[tp] = d
            if tp in cleaner_offsets:
                self.cleaner_offsets[tp] = cleaner_offsets[tp]
            now = time.monotonic()
            if i * 10 // len(todo) > tenth or now - last_report >= 1.0:
                tenth = i * 10 // len(todo)
                log.info("Loaded %d/%d logs in %s (%.1f%%)", i, len(todo), d, 100.0 * i / len(todo))
                last_report = now
        if marker_found:
            marker.unlink()  # a crash from here on must be detected at the next start
        log.info("Loaded %d logs in %s in %.0f ms", len(todo), d, (time.monotonic() - started) * 1000)

    # -- log dirs ---------------------------------------------------------------------------------

    @property
    def live_log_dirs(self) -> list[Path]:
        """The log dirs no I/O error has taken offline (Kafka's liveLogDirs)."""
        channel = self.log_dir_failure_channel
        if not channel.any_offline:
            return self.log_dirs
        return [d for d in self.log_dirs if not channel.has_offline_log_dir(d)]

    def is_log_dir_online(self, d: Path) -> bool:
        return not self.log_dir_failure_channel.has_offline_log_dir(d)

    def maybe_add_offline_log_dir(self, d: Path, message: str, error: BaseException) -> None:
        self.log_dir_failure_channel.maybe_add_offline_log_dir(d, message, error)

    def handle_log_dir_failure(self, d: Path) -> list[TopicPartition]:
        """Stop serving the logs of a failed dir (Kafka's LogManager.handleLogDirFailure): they
        leave this manager with their file handles closed, nothing written (blocking: run it in
        an executor), their cleaning aborted, the dir's lock released; returns their partitions.
        When no log dir is left the broker halts, as Kafka's does."""
        d = next((x for x in self.log_dirs if x.absolute() == Path(d).absolute()), Path(d))
        log.warning("Stopping serving logs in dir %s", d)
        live = self.live_log_dirs
        if not live:
            self.halt(f"Shutdown broker because all log dirs in {', '.join(map(str, self.log_dirs))} have failed")
        offline = sorted(tp for tp, ld in list(self.log_dir_of.items()) if ld == d)
        for tp in offline:
            if self.cleaner is not None:
                self.cleaner.abort_and_pause(tp)
                self.cleaner.forget(tp)
            lg = self.logs.pop(tp, None)
            self.log_dir_of.pop(tp, None)
            self.cleaner_offsets.pop(tp, None)
            if lg is not None:
                try:
                    lg.close_handlers()
                except OSError as e:  # swallowed, as Kafka's CoreUtils.swallow
                    log.warning("Closing the files of %s in the failed dir %s: %s", lg.name, d, e)
        log.warning("Logs for partitions %s are offline due to failure on log directory %s",
                    ",".join(f"{t}-{p}" for t, p in offline), d)
        fd = self._locks.pop(d, None)
        if fd is not None:
            os.close(fd)
        return offline

    # -- logs -------------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig, topic_id: uuid.UUID) -> Log:
        """The partition's log, created in the live dir holding the fewest logs when there is
        none. An I/O error creating it (its directory, partition.metadata, segment files) takes
        that dir offline, as Kafka's getOrCreateLog does, and raises KafkaStorageError."""
        tp = (topic, partition)
        existing = self.logs.get(tp)
        if existing is None:
            counts = Counter(self.log_dir_of.values())
            live = self.live_log_dirs
            if not live:
                raise KafkaStorageError(f"Can not create log for {topic}-{partition} because log directories "
                                        f"{', '.join(map(str, self.log_dirs))} are offline")
            d = min(live, key=lambda x: counts[x])  # the fewest logs; ties: first listed
        else:
            d = self.log_dir_of[tp]
        try:
            return self._get_or_create_log_in(d, tp, existing, config, topic_id)
        except KafkaStorageError:
            raise
        except Exception as e:
            cause = io_error_of(e)
            if cause is None:
                raise
            message = f"Error while creating log for {topic}-{partition} in dir {d}"
            self.maybe_add_offline_log_dir(d, message, cause)
            raise KafkaStorageError(f"{message}: {describe_io_error(cause)}") from e

    def _get_or_create_log_in(self, d: Path, tp: TopicPartition, existing: Log | None, config: LogConfig,
                              topic_id: uuid.UUID) -> Log:
        if existing is not None:
            existing.update_config(config)
            metadata = PartitionMetadataFile(PartitionMetadataFile.new_file(existing.dir))
            if not metadata.exists():  # a log adopted without one (Kafka's UnifiedLog.assignTopicId)
                metadata.write(topic_id)
            return existing
        path = d / f"{tp[0]}-{tp[1]}"
        path.mkdir(parents=True, exist_ok=True)
        metadata = PartitionMetadataFile(PartitionMetadataFile.new_file(path))
        metadata.write(topic_id, sync=False)  # readable now; durable at the next flush task
        metadata.record(topic_id)
        with self._metadata_lock:
            self._unsynced_metadata.append(metadata)
        new = Log.open(
            path,
            config,
            recovery_point=0,
            log_start_offset=0,
            clean_shutdown=True,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
        )
        new.log_dir_failure_channel = self.log_dir_failure_channel
        self.logs[tp] = new
        self.log_dir_of[tp] = d
        return new

    def topics_on_disk(self) -> dict[str, LogsOnDisk]:
        """Every topic with a loaded log: the partitions found, the topic ids their
        `partition.metadata` files name (none for a log without the file; an unreadable file is
        logged and counts as none), and each log's latest leader epoch. The broker adopts topics
        its metadata store does not know from this, e.g. partition dirs copied from another
        Kafka broker (blocking: reads files)."""
        found: dict[str, LogsOnDisk] = {}
        for (topic, partition), d in sorted(self.log_dir_of.items()):
            logs = found.setdefault(topic, LogsOnDisk(set(), set(), {}))
            logs.partitions.add(partition)
            cache = self.logs[topic, partition].leader_epoch_cache
            if cache is not None and cache.latest_epoch is not None:
                logs.latest_epochs[partition] = cache.latest_epoch
            metadata = PartitionMetadataFile(PartitionMetadataFile.new_file(d / f"{topic}-{partition}"))
            try:
                logs.topic_ids.add(metadata.read().topic_id)
            except FileNotFoundError:
                continue
            except CheckpointFormatError as e:
                log.warning("Ignoring unreadable %s: %s", metadata.path, e)
        return found

    def max_producer_id(self) -> int:
        """The highest producer id the producer state of any log holds (-1: none): the broker's
        producer-id allocator must stay above it, since logs adopted from another broker carry
        the ids that broker handed out."""
        return max((pid for _, lg in self for pid in lg.producer_state.active_producers), default=-1)

    def async_delete(self, topic: str, partition: int) -> Path | None:
        """Detach a log now, rename its directory `<tp>.<id>-delete` and schedule its removal
        file.delete.delay.ms later (:meth:`delete_logs`), as Kafka's asyncDelete: the caller (a
        StopReplica) waits for the rename only. Returns the renamed directory (None: no such log)."""
        tp = (topic, partition)
        if self.cleaner is not None and tp in self.logs:
            self.cleaner.abort_and_pause(tp)
        lg = self.logs.pop(tp, None)
        d = self.log_dir_of.pop(tp, None)
        if self.cleaner is not None:
            self.cleaner.forget(tp)
        if lg is None or d is None:
            return None
        lg.close_handlers()  # as Kafka's asyncDelete: nothing of a deleted log is flushed
        if self.cleaner_offsets.pop(tp, None) is not None:
            self.checkpoint_cleaner_offsets([d])
        src = d / f"{topic}-{partition}"
        dst = d / log_delete_dir_name(topic, partition)
        try:
            os.replace(src, dst)
        except OSError as e:  # Kafka: an IOException deleting a log takes its dir offline
            self.maybe_add_offline_log_dir(d, f"Error while deleting log for {topic}-{partition} in dir {d}", e)
            raise KafkaStorageError(f"Error while deleting log for {topic}-{partition} in dir {d}: {e}") from e
        self._schedule_deletion(dst)
        log.info("Log for partition %s-%d is renamed to %s and is scheduled for deletion", topic, partition, dst)
        return dst

    def _schedule_deletion(self, renamed: Path, now_ms: int | None = None) -> None:
        scheduled = _wall_ms() if now_ms is None else now_ms
        with self._to_be_deleted_lock:
            self._logs_to_be_deleted.append((renamed, scheduled))

    @property
    def logs_to_be_deleted(self) -> list[Path]:
        """The renamed directories waiting for their removal, oldest first."""
        with self._to_be_deleted_lock:
            return [p for p, _ in self._logs_to_be_deleted]

    def delete_logs(self, now_ms: int | None = None) -> int:
        """Remove every renamed `-delete` directory scheduled at least file.delete.delay.ms
        (the broker default's) ago, oldest first (Kafka's deleteLogs). Blocking: an executor runs
        it. Returns the milliseconds until the next one is due, or the delay when none waits --
        when the caller should run it again. A directory that cannot be removed is logged and
        left (the next start schedules it again)."""
        delay = self.default_config.file_delete_delay_ms
        while True:
            now = _wall_ms() if now_ms is None else now_ms
            with self._to_be_deleted_lock:
                if not self._logs_to_be_deleted:
                    return delay
                path, scheduled = self._logs_to_be_deleted[0]
                if scheduled + delay > now:
                    return scheduled + delay - now
                self._logs_to_be_deleted.popleft()
            try:
                shutil.rmtree(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                log.error("Exception while deleting %s in dir %s: %s", path.name, path.parent, e)
                continue
            log.info("Deleted log %s in %s.", path.name, path.parent)

    def __iter__(self) -> Iterator[tuple[TopicPartition, Log]]:
        return iter(list(self.logs.items()))

    # -- periodic work (blocking: run in an executor) ------------------------------------------------

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention for every log, removal of expired `.deleted` files, and expiry of producer
        ids idle for producer.id.expiration.ms (Kafka runs that every 10 minutes; here it runs
        with retention, every log.retention.check.interval.ms)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        deleted = 0
        for _, lg in self:
            try:
                deleted += self.cleanup_log(lg, now_ms)
            except KafkaStorageError:  # its dir went offline (reported): the other logs go on
                pass
        return deleted

    @staticmethod
    def cleanup_log(lg: Log, now_ms: int) -> int:
        """One log's part of :meth:`cleanup_logs` (blocking: the segments' renames hold the log's
        lock). The broker runs it under the partition's serialisation point for a hosted one, so
        appends queue behind it instead of the event loop waiting on that lock."""
        with lg.unless_closed() as is_open:  # deleted meanwhile: its files are not ours
            if not is_open:
                return 0
            deleted = lg.delete_old_segments(now_ms)
            lg.delete_expired_files(now_ms)
            lg.remove_expired_producers(now_ms)
            return deleted

    def flush_partition_metadata(self) -> int:
        """Write durably (fsync, rename, fsync dir) the partition.metadata files of logs created
        since the last call; a log deleted meanwhile is skipped. Returns files written."""
        with self._metadata_lock:
            pending, self._unsynced_metadata = self._unsynced_metadata, []
        written = 0
        for metadata in pending:
            d = metadata.path.parent.parent
            if not self.is_log_dir_online(d):
                continue
            try:
                metadata.maybe_flush()
            except FileNotFoundError:  # the partition was deleted since
                continue
            except OSError as e:
                self.maybe_add_offline_log_dir(d, f"Error while writing {metadata.path}", e)
                continue
            written += 1
        return written

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """fsync what flush.ms / flush.messages or a roll has made due, new logs'
        partition.metadata, and leader-epoch checkpoints the append path marked dirty; returns
        logs flushed."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.flush_partition_metadata()
        flushed = 0
        for _, lg in self:
            with lg.unless_closed() as is_open:  # deleted meanwhile: its files are not ours
                if not is_open:
                    continue
                try:
                    lg.checkpoint_leader_epochs()  # epochs the append path assigned (not fsynced there)
                    offset = lg.flush_due(now_ms)
                    if offset is not None:
                        lg.flush(offset)
                        flushed += 1
                except KafkaStorageError:  # its dir went offline (reported): the other logs go on
                    pass
        return flushed

    def _write_checkpoint(
        self,
        file_name: str,
        offset_of: Callable[[TopicPartition, Log], int | None],
        dirs: Iterable[Path] | None = None,
    ) -> None:
        """Rewrite the checkpoint ``file_name`` of each log dir (default: all) with
        ``offset_of(tp, log)`` for every log in that dir; None leaves the log out. An offline
        dir is skipped; a dir whose write fails goes offline (Kafka: the checkpoint's
        IOException reaches the LogDirFailureChannel), the others are still written."""
        for d in self.live_log_dirs if dirs is None else dirs:
            if not self.is_log_dir_online(d):
                continue
            offsets = {}
            for tp, lg in self:
                if self.log_dir_of.get(tp) == d:
                    offset = offset_of(tp, lg)
                    if offset is not None:
                        offsets[tp] = offset
            try:
                OffsetCheckpointFile(d / file_name).write(offsets)
            except OSError as e:
                self.maybe_add_offline_log_dir(d, f"Disk error while writing {file_name} in dir {d}", e)

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT_FILE, lambda _tp, lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        """Only logs whose start offset is above their first segment's base offset (Kafka's
        checkpointLogStartOffsetsInDir): loading starts the others at that base anyway."""

        def start_offset(_tp: TopicPartition, lg: Log) -> int | None:
            lso = lg.log_start_offset
            return lso if lso > lg.segments[0].base_offset else None

        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE, start_offset)

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT_FILE, lambda _tp, lg: lg.high_watermark)

    def checkpoint_cleaner_offsets(self, dirs: Iterable[Path] | None = None) -> None:
        """cleaner-offset-checkpoint: each compacted log's first dirty offset (entries of logs
        that no longer exist are dropped). The cleaner threads and shutdown both write it."""
        with self._cleaner_checkpoint_lock:
            self._write_checkpoint(
                CLEANER_OFFSET_CHECKPOINT_FILE, lambda tp, _lg: self.cleaner_offsets.get(tp), dirs
            )

    def checkpoint_cleaner_offset_of(self, tp: TopicPartition) -> None:
        """Rewrite the cleaner-offset-checkpoint of ``tp``'s log dir (after a cleaning)."""
        d = self.log_dir_of.get(tp)
        if d is not None:
            self.checkpoint_cleaner_offsets([d])

    # -- shutdown -------------------------------------------------------------------------------------

    def shutdown(self) -> bool:
        """Flush and close every log (closing snapshots its producer state at the log end
        offset), write the checkpoints and the clean-shutdown marker. Returns whether all of it
        was done. On a full or failing disk every step is still tried and each failing step is
        logged once, but the clean-shutdown marker is not written: the next start then recovers
        from the recovery points instead of trusting files this shutdown could not write."""
        failed: list[str] = []

        def attempt(what: str, steps: Iterable[tuple[str, Callable[[], Any]]]) -> None:
            errors = []
            for name, step in steps:
                try:
                    step()
                except Exception as e:  # logged once per step; shutdown goes on with the rest
                    errors.append(f"{name}: {e}")
            if errors:
                failed.append(what)
                log.error("Shutdown: could not %s (%d failed; first: %s)", what, len(errors), errors[0])

        logs = list(self)
        attempt("write partition.metadata files", [("partition.metadata", self.flush_partition_metadata)])
        attempt("flush logs", [(f"{tp[0]}-{tp[1]}", lg.flush) for tp, lg in logs])
        attempt("write checkpoints", [
            (RECOVERY_POINT_CHECKPOINT_FILE, self.checkpoint_recovery_points),
            (LOG_START_OFFSET_CHECKPOINT_FILE, self.checkpoint_log_start_offsets),
            (REPLICATION_OFFSET_CHECKPOINT_FILE, self.checkpoint_high_watermarks),
            (CLEANER_OFFSET_CHECKPOINT_FILE, self.checkpoint_cleaner_offsets),
        ])
        attempt("close logs", [(f"{tp[0]}-{tp[1]}", lg.close) for tp, lg in logs])
        if not failed:
            attempt("write the clean-shutdown markers", [(str(d), lambda d=d: _write_marker(d)) for d in self.live_log_dirs])
        for fd in self._locks.values():
            os.close(fd)
        self._locks.clear()
        if failed:
            log.error("Shutdown incomplete (%s): no clean-shutdown marker written, the next start recovers",
                      "; ".join(failed))
            return False
        log.info("Shutdown complete: %d logs flushed and closed", len(self.logs))
        return True


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _write_marker(d: Path) -> None:
    """The clean-shutdown marker, made durable with the dir's entry."""
    (d / CLEAN_SHUTDOWN_FILE).touch()
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
