"""Child processes a test starts itself with subprocess.Popen (a CLI under --watch, a Java
console client), stopped however the test ends."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def reaped(proc: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """`proc` for the block; afterwards killed if it still runs (a failed assertion left it
    running), waited for, and its pipes closed."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
