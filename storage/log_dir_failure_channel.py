"""LogDirFailureChannel: where an I/O error in a log dir is reported, once, and from where the
broker takes the dirs to stop serving (Kafka's LogDirFailureChannel).

Why a channel: an I/O error surfaces wherever the disk is touched -- an append on the event
loop, a flush or checkpoint in an executor thread, a follower's truncation -- and each of those
places must only say "this dir failed" and answer KAFKA_STORAGE_ERROR; stopping the dir's
partitions, telling the controller and maybe halting the broker is one job, done once per dir,
by the ReplicaManager's log-dir failure handler (broker.replica_manager), which takes the dirs
from here in the order they failed.

Thread safety: :meth:`maybe_add_offline_log_dir` and :meth:`has_offline_log_dir` may be called
from any thread; :meth:`take_next_offline_log_dir` is awaited on the event loop that called
:meth:`start`. A dir is offline until the broker restarts (Kafka's rule in ZooKeeper mode).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
from collections import deque
from pathlib import Path

log = logging.getLogger("odradek.storage.log_dir_failure")


def io_error_of(e: BaseException) -> OSError | None:
    """The OSError behind ``e`` (itself, or the cause or context it was raised from), or None:
    what decides whether a failed log operation takes its dir offline (Kafka: an IOException).
    A StorageError raised for a logic problem (a roll onto an existing segment) has none."""
    seen = 0
    cur: BaseException | None = e
    while cur is not None and seen < 10:
        if isinstance(cur, OSError):
            return cur
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return None


def describe_io_error(e: OSError) -> str:
    """`No space left on device (ENOSPC)`, with `on <file>` when the error names one: the reason
    an operator reads in the one error line."""
    name = errno.errorcode.get(e.errno) if e.errno is not None else None
    text = e.strerror or str(e)
    reason = f"{text} ({name})" if name else text
    return f"{reason} on {e.filename}" if e.filename is not None and e.strerror else reason


class LogDirFailureChannel:
    """See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}  # dir -> the message of the error that took it offline
        self._queue: deque[str] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None

    @staticmethod
    def _key(log_dir: Path | str) -> str:
        return str(Path(log_dir).absolute())

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind the consumer's event loop (the one that awaits :meth:`take_next_offline_log_dir`)."""
        self._loop = loop

    @property
    def any_offline(self) -> bool:
        """Whether any dir is offline (cheap: the append path asks it before the dir's name)."""
        return bool(self._offline)

    def has_offline_log_dir(self, log_dir: Path | str) -> bool:
        return self._key(log_dir) in self._offline

    @property
    def offline_log_dirs(self) -> dict[str, str]:
        """Every offline dir with the message of the error that took it offline."""
        with self._lock:
            return dict(self._offline)

    def maybe_add_offline_log_dir(self, log_dir: Path | str, message: str, error: BaseException) -> bool:
        """Report an I/O error in ``log_dir``: the first report of a dir logs one error line
        (what failed, the dir, the reason; no traceback -- a full disk is not a bug) and queues
        the dir for the failure handler; later ones are ignored. True when this call took the
        dir offline."""
        key = self._key(log_dir)
        reason = describe_io_error(error) if isinstance(error, OSError) else str(error)
        with self._lock:
            if key in self._offline:
                return False
            self._offline[key] = f"{message}: {reason}"
            self._queue.append(key)
            loop, waiter = self._loop, self._waiter
        log.error("%s: %s. Log directory %s is offline: its partitions stop here until the broker restarts",
                  message, reason, key)
        if loop is not None and waiter is not None:
            try:
                loop.call_soon_threadsafe(_wake, waiter)
            except RuntimeError:  # the loop closed: the broker is stopping anyway
                pass
        return True

    async def take_next_offline_log_dir(self) -> str:
        """The next dir that went offline, in order; waits for one (Kafka's blocking take)."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._queue:
                    return self._queue.popleft()
                self._loop = loop
                self._waiter = waiter = loop.create_future()
            try:
                await waiter
            finally:
                with self._lock:
                    if self._waiter is waiter:
                        self._waiter = None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
