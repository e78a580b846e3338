"""broker.loop_audit reports blocking file syscalls made on the audited thread, and only there.

Audit hooks cannot be removed, so each case runs in a fresh interpreter."""

from __future__ import annotations

import os
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


RETENTION_SCRIPT = """
import asyncio, os, sys, threading, time, uuid
from pathlib import Path
from broker import loop_audit
from broker.partition import Partition
from controller.image import PartitionState, TopicState
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager

loop_audit.install()  # before the Log is made: its lock is audited
def batch():
    return bytearray(build_batch([Record(0, 0, 0, None, b"v" * 100, [])], base_timestamp=1700000000000))

log = Log.open(Path(sys.argv[1]) / "t-0", LogConfig(segment_bytes=1024, retention_bytes=1024))
state = PartitionState(0, [1], leader=1, leader_epoch=0, isr=[1])
partition = Partition(TopicState("t", uuid.uuid4(), {0: state}), state, log, broker_id=1)
for _ in range(40):
    partition.append_records_to_leader(batch(), 1, 1700000000000)
renaming = threading.Event()
real_replace = os.replace
def slow_replace(src, dst):  # a slow disk: each rename of retention takes 30 ms
    renaming.set()
    time.sleep(0.03)
    real_replace(src, dst)
os.replace = slow_replace

async def main():
    loop = asyncio.get_running_loop()
    loop_audit.arm()
    now = 1700000000000
    if sys.argv[2] == "executor":  # as the retention task ran before: straight into an executor
        job = loop.run_in_executor(None, LogManager.cleanup_log, log, now)
    else:  # under the partition's serialisation point (ReplicaManager.cleanup_logs)
        job = asyncio.ensure_future(partition.run_exclusive(LogManager.cleanup_log, log, now))
    await loop.run_in_executor(None, renaming.wait, 10)
    await partition.append_records(batch(), 1, now)
    print("deleted", await job)
    loop_audit.disarm()

asyncio.run(main())
"""


def test_retention_under_the_partition_serialisation_never_makes_the_loop_wait_on_the_log_lock(
        tmp_path: Path) -> None:
    """Issue #20: retention ran in an executor holding the log's lock while it renamed segments
    (30 ms each here); an append on the loop took the same lock and the loop waited. Run under
    the partition's serialisation point the append queues behind it instead. The audit reports
    lock waits on the loop (LOCK_WAIT_REPORT_MS): it sees the old path and not the new one."""
    def run(mode: str) -> list[str]:
        out = subprocess.run([sys.executable, "-c", RETENTION_SCRIPT, str(tmp_path / mode), mode], cwd=REPO,
                             capture_output=True, text=True, timeout=60,
                             env={**os.environ, "ODRADEK_AUDIT_LOOP_IO": "1"})
        assert out.returncode == 0, out.stderr[-3000:]
        assert "deleted " in out.stdout and "deleted 0" not in out.stdout, out.stdout
        return [line for line in out.stderr.splitlines() + out.stdout.splitlines()
                if "event loop waited on a lock" in line]

    assert run("executor"), "the audit did not see the loop wait on the log's lock"
    assert run("serialised") == []
