"""A command run under a pseudo-terminal (python's `pty`), as an operator's shell runs it: its
stdout is a TTY of a known size, everything it writes is collected by a reader thread, and a test
waits for what the screen shows with a bounded deadline, then sends it Ctrl-C (SIGINT)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\r")
HIDE_CURSOR = b"\x1b[?25l"
SHOW_CURSOR = b"\x1b[?25h"


class TerminalProcess:
    """`args` with stdin/stdout/stderr on a fresh pseudo-terminal of `columns` x `rows`."""

    def __init__(self, args: Sequence[str], cwd: Path, env: dict[str, str], columns: int = 220,
                 rows: int = 50) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {**env, "TERM": "xterm-256color"}
        env.pop("COLUMNS", None)
        env.pop("LINES", None)
        self.proc = subprocess.Popen(list(args), cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                                     close_fds=True)
        os.close(slave)
        self.master = master
        self._raw = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the child closed its side
                return
            if not data:
                return
            with self._lock:
                self._raw += data

    @property
    def raw(self) -> bytes:
        with self._lock:
            return bytes(self._raw)

    def text(self, since: int = 0) -> str:
        """What was written from byte `since` on, escape sequences removed."""
        return ANSI.sub(b"", self.raw[since:]).decode(errors="replace")

    def wait_for(self, seen: Callable[[str], bool], timeout_s: float, since: int = 0) -> str:
        """Poll the screen's text (from byte `since`) until `seen(text)`; AssertionError with
        what was shown when the deadline passes or the process ends first."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.text(since)
            if seen(text):
                return text
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"not seen within {timeout_s} s (exit {self.proc.poll()}):\n{text[-4000:]}")
            time.sleep(0.05)

    def interrupt(self, timeout_s: float = 20.0) -> int:
        """Ctrl-C: SIGINT to the process; its exit code."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout_s)
        self._reader.join(5)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(5)
        os.close(self.master)
