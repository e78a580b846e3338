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


FOLLOWER_SCRIPT = """
import asyncio, sys, uuid
from pathlib import Path
from broker import loop_audit
from broker.partition import Partition
from controller.image import PartitionState, TopicState
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log

def batch(base, n, epoch):
    records = [Record(0, i, i, None, b"v", []) for i in range(n)]
    return bytearray(build_batch(records, base_offset=base, base_timestamp=1700000000000,
                                 partition_leader_epoch=epoch))

log = Log.open(Path(sys.argv[1]) / "t-0", LogConfig())   # start-up may block
log.append_as_follower(batch(0, 3, 0))
log.flush()
state = PartitionState(0, [1, 2], leader=2, leader_epoch=4, isr=[1, 2])
partition = Partition(TopicState("t", uuid.uuid4(), {0: state}), state, log, broker_id=1)
loop_audit.install()

async def main():
    loop_audit.arm()
    log.append_as_follower(batch(3, 2, 1))       # new epochs: the checkpoint only marked dirty
    log.append_as_follower(batch(5, 2, 2))
    await partition.truncate_to(4)               # diverged: in an executor
    log.append_as_follower(batch(4, 2, 3))
    await partition.truncate_fully_and_start_at(10)
    log.append_as_follower(batch(10, 1, 4))
    loop_audit.disarm()
    log.flush()
    print("epochs", [tuple(e) for e in log.leader_epoch_cache.epoch_entries()], log.log_end_offset)
    log.close()

asyncio.run(main())
"""


def test_follower_appends_and_truncations_do_no_file_syscall_on_the_loop(tmp_path: Path) -> None:
    """A replica's appends assign new leader epochs as the leader's do -- the checkpoint is only
    marked dirty, written by Log.flush -- and its truncations (files cut and renamed, the
    checkpoint written) run in an executor through Partition. Before: each new epoch of a
    follower append wrote and fsynced leader-epoch-checkpoint on the loop thread."""
    out = subprocess.run(
        [sys.executable, "-c", FOLLOWER_SCRIPT, str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    reports = [line for line in out.stderr.splitlines() + out.stdout.splitlines()
               if "blocking file syscall on the event loop" in line]
    assert reports == []
    assert "epochs [(4, 10)] 11" in out.stdout, out.stdout
