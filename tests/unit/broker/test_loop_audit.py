"""broker.loop_audit reports blocking file syscalls made on the audited thread, and only there.

Audit hooks cannot be removed, so each case runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SCRIPT = """
import os, sys, threading
from broker import loop_audit
path = sys.argv[1]
loop_audit.install()
with open(path, "wb") as f:            # before arm(): start-up may block
    os.fsync(f.fileno())
loop_audit.arm()
fd = os.open(path, os.O_RDWR)          # open
os.ftruncate(fd, 4096)                 # os.truncate
os.fsync(fd)                           # wrapped
os.close(fd)
os.replace(path, path + ".2")          # os.rename
def elsewhere():                       # an executor thread: not reported
    fd = os.open(path + ".2", os.O_RDWR)
    os.fsync(fd)
    os.close(fd)
t = threading.Thread(target=elsewhere); t.start(); t.join()
os.unlink(path + ".2")                 # os.remove
"""


def test_reports_each_blocking_call_on_the_loop_thread_only(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "f")],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    )
    reports = [line for line in out.stderr.splitlines() + out.stdout.splitlines()
               if "blocking file syscall on the event loop" in line]
    syscalls = [line.split("syscall=")[1].split()[0].strip("'") for line in reports]
    assert syscalls == ["open", "os.truncate", "os.fsync", "os.rename", "os.remove"], reports
