"""LogCleaner: the cleaner threads of a broker (Kafka's ``LogCleaner`` / ``CleanerThread``).

``log.cleaner.threads`` threads; each one loops: ask the LogCleanerManager for the filthiest
compacted log; if there is none, wait ``log.cleaner.backoff.ms`` (or until :meth:`wake`);
otherwise describe the log to its worker process (storage.cleaner.worker: the CPU work happens
there, off the GIL the event loop needs), and for every group the worker reports, open the
``.cleaned`` segment and swap it in with Log.replace_segments (the log's lock is held only for
the renames), then answer "go on". When the cleaning completes, the cleaner-offset-checkpoint
moves to its end offset (after the swaps) and one line is logged: the log, the dirty section,
segments, bytes in and out, the size reduction, duration and MB/s.

A cleaning stops early when the log's cleaning is aborted (topic deletion, truncation: the
manager's abort_and_pause kills the worker so the caller need not wait for a group to finish),
when a group cannot be swapped because the log changed (retention or a truncation got there
first), or when the broker stops. Its ``.cleaned`` files are removed; a crash leaves them for
the next load to remove. A log whose cleaning fails with an error is not cleaned again until the
broker restarts (logged; Kafka's uncleanable partitions); a worker process killed from outside
is replaced and the cleaning retried, up to three times in a row for one log.

An I/O error (a full disk, a failing device) is no bug of the log: wherever it happens -- the
worker reading segments or writing the ``.cleaned`` files (it answers ``io_error`` with errno,
strerror and file name), or here opening the ``.cleaned`` segment and swapping it in -- it takes
the log's dir offline through the log's LogDirFailureChannel, with one error line naming the dir
and no traceback, as Kafka's CleanerThread does (maybeAddOfflineLogDir). The broker's failure
handler then stops the dir's partitions, aborting their cleanings (LogManager.handle_log_dir_failure);
until then no log of an offline dir is chosen, and nothing in it is removed or swapped: a
``.cleaned`` or ``.swap`` left there is removed or completed by the next load.

Who may call: :meth:`startup` / :meth:`shutdown` from the broker's startup and shutdown (in an
executor: shutdown joins threads), :meth:`abort_and_pause` / :meth:`resume` from the code that
deletes or truncates a log (blocking until the cleaning of that log stopped).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from storage.cleaner.cleaner import CleanJob, CleanResult, SegmentInfo
from storage.cleaner.manager import LogCleanerManager, LogToClean, TopicPartition
from storage.cleaner.worker import read_message, write_message
from storage.errors import KafkaStorageError
from storage.log_dir_failure_channel import io_error_of
from storage.segment import CLEANED_FILE_SUFFIX

__all__ = ["CleanerConfig", "LogCleaner", "make_clean_job"]

log = logging.getLogger("odradek.storage.cleaner")

_MB = 1024 * 1024
MAX_WORKER_DEATHS = 3  # consecutive worker deaths while cleaning one log before it is left alone


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings (Kafka's CleanerConfig)."""

    num_threads: int = 1
    dedupe_buffer_size: int = 128 * _MB
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15_000
    enable: bool = True


class _WorkerGone(Exception):
    pass


class _CleanerThread(threading.Thread):
    def __init__(self, cleaner: LogCleaner, index: int) -> None:
        super().__init__(name=f"kafka-log-cleaner-thread-{index}", daemon=True)
        self.cleaner = cleaner
        self.index = index
        self.proc: subprocess.Popen[bytes] | None = None
        self.current: TopicPartition | None = None
        self._proc_lock = threading.Lock()
        self.worker_deaths: dict[TopicPartition, int] = {}  # consecutive, per log

    # -- the worker process ---------------------------------------------------------------

    def _worker(self) -> subprocess.Popen[bytes]:
        with self._proc_lock:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "storage.cleaner.worker"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    close_fds=True,
                )
                log.info("Started log cleaner worker process %d for %s", self.proc.pid, self.name)
            return self.proc

    def kill_worker(self) -> None:
        """Stop the worker at once (an abort or shutdown); the thread sees its pipe close."""
        with self._proc_lock:
            proc = self.proc
            if proc is not None and proc.poll() is None:
                proc.kill()

    def close_worker(self) -> None:
        with self._proc_lock:
            proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout):
            if f is not None:
                f.close()

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        c = self.cleaner
        while not c.stopping.is_set():
            try:
                ltc = c.manager.grab_filthiest_compacted_log(c.time_ms())
            except Exception:  # pragma: no cover - a bug; keep the thread alive
                log.exception("Error choosing a log to clean")
                ltc = None
            if ltc is None:
                c.wait_for_work()
                continue
            self.current = ltc.tp
            end_offset: int | None = None
            try:
                end_offset = self._clean(ltc)
                self.worker_deaths.pop(ltc.tp, None)
            except _WorkerGone:
                if not c.stopping.is_set() and not c.manager.is_aborted(ltc.tp):
                    # killed from outside (the OOM killer, an operator): a new worker retries;
                    # a log that kills its worker every time is left alone after a few
                    deaths = self.worker_deaths[ltc.tp] = self.worker_deaths.get(ltc.tp, 0) + 1
                    if deaths >= MAX_WORKER_DEATHS:
                        log.error(
                            "The log cleaner worker process died %d times in a row while cleaning %s; "
                            "it will not be cleaned again until the broker restarts", deaths, ltc.log.name,
                        )
                        c.manager.mark_uncleanable(ltc.tp)
                    else:
                        log.error(
                            "The log cleaner worker process died while cleaning %s; a new one will "
                            "retry (%d of %d)", ltc.log.name, deaths, MAX_WORKER_DEATHS,
                        )
                self._remove_cleaned_files(ltc)
            except KafkaStorageError:
                # the log's dir went offline (reported where the error happened, one line) or
                # was already: its files are left alone, the next load completes or removes the
                # .swap / .cleaned files (Kafka: "partition is already offline. let it go")
                pass
            except Exception as e:
                cause = io_error_of(e)
                if cause is None or not self._take_dir_offline(ltc, cause):
                    log.exception(
                        "Unexpected error while cleaning %s; it will not be cleaned again until the "
                        "broker restarts", ltc.log.name,
                    )
                    c.manager.mark_uncleanable(ltc.tp)
                    self._remove_cleaned_files(ltc)
            finally:
                self.current = None
                c.manager.done_cleaning(ltc.tp, end_offset)
        self.close_worker()

    @staticmethod
    def _take_dir_offline(ltc: LogToClean, e: OSError) -> bool:
        """An I/O error while cleaning ``ltc`` (in the worker or here) takes the log's dir
        offline through its LogDirFailureChannel -- one error line naming the dir and the file,
        no traceback, no retry -- as Kafka's CleanerThread.cleanLog does for an IOException; the
        broker's failure handler then stops the dir's partitions and aborts their cleaning.
        False when the log has no channel (opened on its own): it is only left uncleaned."""
        lg = ltc.log
        channel = lg.log_dir_failure_channel
        if channel is None:
            return False
        d = lg.dir.parent
        channel.maybe_add_offline_log_dir(
            d, f"Failed to clean up log for {ltc.tp[0]}-{ltc.tp[1]} in dir {d} due to IOException", e)
        return True

    def _remove_cleaned_files(self, ltc: LogToClean) -> None:
        """Remove the ``.cleaned`` files of a cleaning that stopped -- not in an offline dir,
        whose files are not touched again (the next load removes them)."""
        if ltc.log.dir_offline:
            return
        try:
            for p in ltc.log.dir.glob("*" + CLEANED_FILE_SUFFIX):
                p.unlink(missing_ok=True)
        except OSError:
            pass

    def _clean(self, ltc: LogToClean) -> int | None:
        """One cleaning; its end offset, or None when it stopped early."""
        c = self.cleaner
        lg = ltc.log
        truncations = lg.truncations
        try:
            job = c.make_job(ltc)
        except FileNotFoundError as e:  # a segment went meanwhile (retention): the log changed, not the disk
            log.info("Cleaning of %s stopped: the log changed since it started (%s)", lg.name, e)
            return None
        proc = self._worker()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            write_message(proc.stdin, ("clean", (job, c.config.max_io_bytes_per_second)))
        except (BrokenPipeError, OSError) as e:
            raise _WorkerGone() from e
        swapped: list[int] = []
        while True:
            msg = read_message(proc.stdout)
            if msg is None:
                self.close_worker()
                raise _WorkerGone()
            kind, payload = msg
            if kind == "group":
                go = False
                if not c.stopping.is_set() and not c.manager.is_aborted(ltc.tp):
                    try:
                        swapped_in = lg.swap_in_cleaned(payload.base_offset, payload.replaces, truncations)
                    except BaseException:
                        # (an I/O error took the dir offline: KafkaStorageError) the worker,
                        # which waits for an answer, is killed -- it removes nothing in that
                        # dir -- and the next cleaning starts a new one
                        self.close_worker()
                        raise
                    if swapped_in:
                        go = True
                        swapped.append(payload.base_offset)
                        log.info(
                            "Swapped in cleaned segment %d for segment(s) %s in log %s (%d -> %d bytes)",
                            payload.base_offset, list(payload.replaces), lg.name, payload.size_in, payload.size_out,
                        )
                    else:
                        log.info("Cleaning of %s stopped: the log changed since it started", lg.name)
                try:
                    write_message(proc.stdin, ("go", go))
                except (BrokenPipeError, OSError) as e:
                    raise _WorkerGone() from e
            elif kind == "done":
                self._log_stats(ltc, payload, len(swapped))
                return int(payload.end_offset)
            elif kind == "aborted":
                log.info("Cleaning of %s aborted: %s", lg.name, payload)
                self._remove_cleaned_files(ltc)
                return None
            elif kind == "io_error":
                raise payload.to_os_error()
            else:
                raise RuntimeError(f"log cleaner worker failed on {lg.name}:\n{payload}")

    def _log_stats(self, ltc: LogToClean, result: CleanResult, groups: int) -> None:
        s = result.stats
        size_in = sum(g.size_in for g in result.groups)
        size_out = sum(g.size_out for g in result.groups)
        mb = (s.map_bytes_read + s.bytes_read) / _MB
        log.info(
            "Log cleaner thread %d cleaned log %s (dirty section = [%d, %d]): %d segments in %d "
            "groups, %.1f MB -> %.1f MB (%.1f%% size reduction, %d -> %d messages), cleanable "
            "ratio %.2f, %.2f s (%.1f MB of log read, %.1f MB/s; offset map %.1f%% full)",
            self.index, ltc.log.name, ltc.first_dirty_offset, result.end_offset,
            sum(len(g.replaces) for g in result.groups), groups,
            size_in / _MB, size_out / _MB, 100.0 * (1 - size_out / size_in) if size_in else 0.0,
            s.messages_read, s.messages_written, ltc.cleanable_ratio,
            s.elapsed_s, mb, mb / s.elapsed_s, 100.0 * s.buffer_utilization,
        )
        self.cleaner.record(ltc, result)


class LogCleaner:
    """See the module docstring."""

    def __init__(
        self,
        config: CleanerConfig,
        manager: LogCleanerManager,
        time_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.config = config
        self.manager = manager
        self.time_ms = time_ms
        self.stopping = threading.Event()
        self._wake = threading.Condition()
        self._woken = False
        self._threads: list[_CleanerThread] = []
        # per log: (number of cleanings, time of the last, its end offset, bytes in, bytes out)
        self.history: dict[TopicPartition, dict[str, Any]] = {}

    def startup(self) -> None:
        log.info("Starting the log cleaner with %d threads", self.config.num_threads)
        for i in range(self.config.num_threads):
            t = _CleanerThread(self, i)
            self._threads.append(t)
            t.start()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads, killing a cleaning in progress (its files are removed; a cleaning
        is redone from the checkpoint)."""
        self.stopping.set()
        self.wake()
        for t in self._threads:
            t.kill_worker()
        for t in self._threads:
            t.join(timeout_s)
        self._threads.clear()

    def wake(self) -> None:
        """Look for work now instead of after the backoff."""
        with self._wake:
            self._woken = True
            self._wake.notify_all()

    def wait_for_work(self) -> None:
        with self._wake:
            if not self._woken:
                self._wake.wait(self.config.backoff_ms / 1000)
            self._woken = False

    def make_job(self, ltc: LogToClean) -> CleanJob:
        return make_clean_job(ltc, self.config, self.time_ms())

    def record(self, ltc: LogToClean, result: CleanResult) -> None:
        h = self.history.setdefault(ltc.tp, {"cleanings": 0})
        h["cleanings"] += 1
        h["last_cleaned_ms"] = self.time_ms()
        h["end_offset"] = result.end_offset
        h["bytes_in"] = sum(g.size_in for g in result.groups)
        h["bytes_out"] = sum(g.size_out for g in result.groups)

    def abort_and_pause(self, tp: TopicPartition, timeout_s: float = 60.0) -> None:
        """Stop any cleaning of ``tp`` now and hold off new ones until :meth:`resume`."""

        def kill() -> None:
            for t in self._threads:
                if t.current == tp:
                    t.kill_worker()

        self.manager.abort_and_pause(tp, timeout_s, on_abort=kill)

    def resume(self, tp: TopicPartition) -> None:
        self.manager.resume(tp)

    def forget(self, tp: TopicPartition) -> None:
        self.manager.forget(tp)
        self.history.pop(tp, None)


def make_clean_job(ltc: LogToClean, config: CleanerConfig, now_ms: int) -> CleanJob:
    """Describe ``ltc`` for a worker: its non-active segments below the first uncleanable
    offset, the producers whose last batch stays, the aborted transactions (blocking: reads
    index sizes, modification times and transaction indexes)."""
    lg = ltc.log
    segs = [s for s in lg.segments[:-1] if s.base_offset < ltc.first_uncleanable_offset]
    infos = []
    for i, s in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else ltc.first_uncleanable_offset
        infos.append(SegmentInfo(
            s.base_offset, nxt, s.size, s.offset_index.size_in_bytes, s.time_index.size_in_bytes, s.last_modified,
        ))
    return CleanJob(
        directory=str(lg.dir.resolve()),
        name=lg.name,
        config=lg.config,
        segments=tuple(infos),
        first_dirty_offset=ltc.first_dirty_offset,
        first_uncleanable_offset=ltc.first_uncleanable_offset,
        active_producers=lg.last_records_of_active_producers(),
        aborted_txns=tuple(lg.aborted_txns(0, ltc.first_uncleanable_offset)),
        now_ms=now_ms,
        map_memory=max(config.dedupe_buffer_size // config.num_threads, 1 << 20),
        io_buffer_size=config.io_buffer_size,
        load_factor=config.dedupe_buffer_load_factor,
    )
