"""The cleaner's worker process: ``python -m storage.cleaner.worker``, started and owned by one
cleaner thread (storage.cleaner.log_cleaner).

Why a process: cleaning decodes every record of the dirty section twice (building the offset
map, then filtering) -- CPU work that, in a thread of the broker, would hold the GIL against the
event loop and add its switch interval to request latencies. In its own process it uses another
core and the broker only waits on a pipe.

Protocol: length-prefixed (4 bytes, big-endian) pickles on stdin (from the broker) and stdout
(to it). The broker sends ``("clean", CleanJob)``; the worker answers ``("group",
CleanedGroup)`` after each group it wrote and waits for ``("go", bool)`` -- the broker swaps the
group in first, and says False to stop --, then ``("done", CleanResult)``, ``("aborted", why)``,
``("io_error", WorkerIOError)`` -- an I/O error (a full disk, a failing device) as errno,
strerror and file name, which the broker turns into its log dir going offline -- or ``("error",
traceback)`` for anything else (a bug, a corrupt segment: the log is left uncleaned). End of
stdin means the broker is gone: the worker exits. While it works it also checks that its parent
is still the process that started it, so a broker killed with kill -9 does not leave it writing
``.cleaned`` files into a log dir that the next broker is loading.

The worker lowers its own priority (nice 10): cleaning is background work, and on a machine
with busy cores the broker's event loop must not wait for it.

``log.cleaner.io.max.bytes.per.second`` is enforced here: the worker sleeps between chunks when
it read or wrote faster (Kafka's Throttler).
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import time
import traceback
from pathlib import Path
from typing import Any, BinaryIO

from storage.cleaner.cleaner import (
    CleanedGroup,
    CleanJob,
    LogCleaningAbortedError,
    WorkerIOError,
    clean,
)
from storage.log_dir_failure_channel import io_error_of
from storage.segment import (
    CLEANED_FILE_SUFFIX,
    log_file,
    offset_index_file,
    time_index_file,
    txn_index_file,
)

__all__ = ["read_message", "write_message"]

_LEN = struct.Struct(">I")


def write_message(out: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LEN.pack(len(data)) + data)
    out.flush()


def read_message(inp: BinaryIO) -> Any:
    """The next message, or None at end of stream."""
    head = inp.read(4)
    if len(head) < 4:
        return None
    (n,) = _LEN.unpack(head)
    data = inp.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)  # our own parent process, over a private pipe


class _Throttle:
    """Sleep so that the bytes handled per second stay under ``rate`` (Kafka's Throttler)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.done = 0

    def __call__(self, n: int) -> None:
        if self.rate <= 0 or self.rate == float("inf"):
            return
        self.done += n
        elapsed = time.monotonic() - self.start
        ahead = self.done / self.rate - elapsed
        if ahead > 0.01:
            time.sleep(ahead)
        if elapsed > 1.0:
            self.start, self.done = time.monotonic(), 0


class _BrokerGone(Exception):
    """The pipe to the broker closed: it was killed, or it stopped this worker."""


def _remove_unswapped(job: CleanJob, base: int) -> None:
    """Remove the ``.cleaned`` files of a group the broker never saw -- only while its
    ``.log.cleaned`` is still there: Log.replace_segments renames the ``.log`` first, so a swap
    the broker began is left whole for the next load to complete."""
    d = Path(job.directory)
    if not log_file(d, base, CLEANED_FILE_SUFFIX).exists():
        return
    for f in (log_file, offset_index_file, time_index_file, txn_index_file):
        f(d, base, CLEANED_FILE_SUFFIX).unlink(missing_ok=True)


def main() -> int:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    parent = os.getppid()
    # background work: when the cores are busy, the broker's event loop goes first
    try:
        os.nice(10)
    except OSError:
        pass

    while True:
        msg = read_message(inp)
        if msg is None:
            return 0
        kind, payload = msg
        if kind != "clean":
            continue
        job: CleanJob = payload[0]
        throttle = _Throttle(payload[1])

        def on_group(group: CleanedGroup) -> bool:
            try:
                write_message(out, ("group", group))
                reply = read_message(inp)  # the broker swaps the group in meanwhile
            except OSError:  # EPIPE: the broker is gone and never saw this group
                reply = None
            if reply is None:
                _remove_unswapped(job, group.base_offset)  # noqa: B023 - called only during this job
                raise _BrokerGone()
            return reply[0] == "go" and bool(reply[1])

        def check(n: int) -> None:
            if os.getppid() != parent:
                raise LogCleaningAbortedError("the broker that started this cleaner is gone")
            throttle(n)  # noqa: B023 - called only during this job

        try:
            result = clean(job, on_group, check)
        except _BrokerGone:
            return 0
        except LogCleaningAbortedError as e:
            answer: tuple[str, Any] = ("aborted", str(e))
        except Exception as e:
            io_error = io_error_of(e)
            if io_error is not None:
                answer = ("io_error", WorkerIOError.of(io_error))
            else:
                answer = ("error", traceback.format_exc())
        else:
            answer = ("done", result)
        try:
            write_message(out, answer)
        except OSError:  # the broker is gone
            return 0


if __name__ == "__main__":
    sys.exit(main())
