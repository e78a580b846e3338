"""Loop audit: report blocking file syscalls made on the event loop thread (a test aid).

Why: the broker serves every connection from one event loop thread, so an fsync, an
ftruncate of a preallocated index, an open of a new segment or an unlink of a deleted topic's
files on that thread stalls every client for its duration (milliseconds on a busy disk). The
rule is that such work goes to an executor; this module is how a test proves it.

How: with ``ODRADEK_AUDIT_LOOP_IO=1`` in the environment, :func:`install` adds a
``sys.addaudithook`` hook (Python's audit events ``open``, ``os.truncate`` -- raised for
``ftruncate`` too --, ``os.remove``, ``os.rename``, ``os.rmdir``, ``shutil.rmtree``,
``os.mkdir``, ``mmap.__new__``) and wraps ``os.fsync`` / ``os.fdatasync`` (which raise no audit
event). Once :func:`arm` has been called (after start-up: loading logs before serving is
allowed to block), every such call made on the loop thread logs one warning
``blocking file syscall on the event loop`` naming the event, its first argument and the call
site; the same call site is reported once. The appends themselves (``os.pwrite``) raise no audit
event and are not reported: they are the one blocking write the design keeps on the loop.

Lock waits too (issue #20: a lock held by disk work in an executor blocks the loop as surely as
the disk work itself, and no syscall is made on the loop to show it): :func:`install` wraps each
Log's lock, and the loop thread waiting more than LOCK_WAIT_REPORT_MS for one logs
``event loop waited on a lock`` with the wait and the call site.

Audit hooks cannot be removed and cost a call per audited event, so nothing is installed unless
the environment variable is set; production never pays for it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import structlog

__all__ = ["ENV_VAR", "arm", "disarm", "enabled", "install"]

ENV_VAR = "ODRADEK_AUDIT_LOOP_IO"
LOCK_WAIT_REPORT_MS = 5.0  # a wait this long on the loop is a stall every client sees
BLOCKING_EVENTS = frozenset(
    {
        "open",
        "os.truncate",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "shutil.rmtree",
        "mmap.__new__",
    }
)

_CODE_SUFFIXES = (".py", ".pyc", ".so", ".pth")

log = structlog.get_logger("odradek.loop_audit")

_loop_thread: int | None = None
_armed = False
_seen: set[str] = set()
_reporting = threading.local()


def enabled() -> bool:
    return os.environ.get(ENV_VAR, "") not in ("", "0")


def _call_site() -> str:
    """The innermost frames of our own code (not the stdlib's) that led to the event."""
    frames = [
        f"{os.path.relpath(fs.filename)}:{fs.lineno}:{fs.name}"
        for fs in traceback.extract_stack()[:-3]
        if "/python3" not in fs.filename and "loop_audit" not in fs.filename
    ]
    return " <- ".join(reversed(frames[-4:]))


def _report(event: str, arg: Any) -> None:
    if getattr(_reporting, "active", False):
        return
    _reporting.active = True
    try:
        site = _call_site()
        key = f"{event}@{site}"
        if key in _seen:
            return
        _seen.add(key)
        log.warning("blocking file syscall on the event loop", syscall=event, arg=str(arg)[:200], site=site)
    finally:
        _reporting.active = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _armed and event in BLOCKING_EVENTS and threading.get_ident() == _loop_thread:
        if event == "open" and args:
            path = args[0]
            if not isinstance(path, (str, bytes, os.PathLike)):
                return  # os.fdopen of an fd already open: no file system work
            if os.fsdecode(path).endswith(_CODE_SUFFIXES):
                return  # a lazy import: once per process, not the storage work this is about
        _report(event, args[0] if args else "")


def _wrap(name: str) -> None:
    original: Callable[[int], None] = getattr(os, name)

    def wrapper(fd: Any) -> None:
        if _armed and threading.get_ident() == _loop_thread:
            _report(f"os.{name}", fd)
        original(fd)

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(os, name, wrapper)


class _AuditedLock:
    """A lock whose waits on the loop thread are timed (and reported past the threshold)."""

    def __init__(self, inner: Any, name: str) -> None:
        self._inner = inner
        self._name = name

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not (_armed and threading.get_ident() == _loop_thread):
            return bool(self._inner.acquire(blocking, timeout))
        if self._inner.acquire(False):
            return True
        if not blocking:
            return False
        started = time.monotonic()
        got = bool(self._inner.acquire(blocking, timeout))
        waited_ms = (time.monotonic() - started) * 1000
        if waited_ms >= LOCK_WAIT_REPORT_MS and not getattr(_reporting, "active", False):
            _reporting.active = True
            try:
                log.warning("event loop waited on a lock", lock=self._name, waited_ms=round(waited_ms, 1),
                            site=_call_site())
            finally:
                _reporting.active = False
        return got

    def release(self) -> None:
        self._inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def wrap_log_locks(wrap: Callable[[Any, str], Any]) -> Callable[[], None]:
    """Every Log created from now on gets ``wrap(its lock, a name for it)`` as its lock (a test
    aid: this audit, and tests/sim's lock-wait detector); returns what undoes it."""
    from storage.log import Log

    original = Log.__init__

    def init(log_: Any, *args: Any, **kwargs: Any) -> None:
        original(log_, *args, **kwargs)
        log_._lock = wrap(log_._lock, f"the lock of log {log_.name}")

    Log.__init__ = init  # type: ignore[method-assign]

    def undo() -> None:
        Log.__init__ = original  # type: ignore[method-assign]

    return undo


def install() -> None:
    """Install the hook for the calling thread (the event loop's); call once, early."""
    global _loop_thread
    _loop_thread = threading.get_ident()
    sys.addaudithook(_hook)
    for name in ("fsync", "fdatasync"):
        _wrap(name)
    wrap_log_locks(_AuditedLock)
    log.info("auditing blocking file syscalls and lock waits on the event loop thread", env=ENV_VAR)


def arm() -> None:
    """Start reporting (after start-up)."""
    global _armed
    _armed = True


def disarm() -> None:
    """Stop reporting (shutdown may block: it runs after the listeners are closed)."""
    global _armed
    _armed = False
