"""The append paths never write leader-epoch-checkpoint (they run on the event loop): a new epoch
is kept in memory and marked dirty, and Log.flush -- an executor's work -- writes it before the
recovery point passes it. A truncation (run in an executor) writes it at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import T0, Clock, client_batch

REPO = Path(__file__).resolve().parents[3]


def test_new_epoch_is_written_by_flush_not_by_the_append(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), now=Clock())
    checkpoint = log.dir / "leader-epoch-checkpoint"
    try:
        before = checkpoint.read_bytes()
        log.append_as_leader(client_batch(3), 0, T0)
        log.append_as_leader(client_batch(2), 4, T0)  # epoch 4 starts at offset 3
        assert checkpoint.read_bytes() == before  # nothing written on the append path
        assert log.leader_epoch_cache is not None
        assert [tuple(e) for e in log.leader_epoch_cache.epoch_entries()] == [(0, 0), (4, 3)]
        log.flush()
        assert checkpoint.read_bytes() == b"0\n2\n0 0\n4 3\n"
        assert log.recovery_point == 5
    finally:
        log.close()
    reopened = Log.open(tmp_path / "t-0", LogConfig(), now=Clock(), recovery_point=5, clean_shutdown=True)
    try:
        assert reopened.leader_epoch_cache is not None and reopened.leader_epoch_cache.latest_epoch == 4
    finally:
        reopened.close()


CRASH_CHILD = """
import sys, time
from pathlib import Path
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log

def batch(base, n, epoch):
    records = [Record(0, i, i, None, b"v%d" % (base + i), []) for i in range(n)]
    return bytearray(build_batch(records, base_offset=base, base_timestamp=1700000000000,
                                 partition_leader_epoch=epoch))

log = Log.open(Path(sys.argv[1]), LogConfig())
log.append_as_follower(batch(0, 6, 0))
log.append_as_follower(batch(6, 2, 1))
log.append_as_follower(batch(8, 6, 2))   # epoch 2 at 8-13: diverged from the new leader's log
log.flush()
log.truncate_to(8)
log.append_as_follower(batch(8, 4, 1))   # the leader's epoch-1 records at 8-11
log.append_as_follower(batch(12, 2, 3))  # then its epoch 3: marked dirty, not written
print("ready", log.recovery_point, log.log_end_offset, flush=True)
time.sleep(600)
"""


def test_follower_epochs_and_truncation_survive_kill_9(tmp_path: Path) -> None:
    """A follower diverged at offset 8: it truncates there, then appends the leader's epoch-1
    records 8-11 and epoch 3 from 12, and is killed with SIGKILL before any flush. The
    truncation wrote leader-epoch-checkpoint at once, so no (2, 8) entry survives in the file
    (recovery could not remove it: it only adds epochs above the latest, and the log end 14 is
    above 8); the new epoch 3 was only marked dirty and comes back from recovering the batches
    above the recovery point. Either way the reloaded cache matches the log."""
    d = tmp_path / "t-0"
    proc = subprocess.Popen([sys.executable, "-c", CRASH_CHILD, str(d)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # bounded: the child prints it or exits (EOF)
        assert line.startswith("ready"), proc.stderr.read() if proc.stderr else line
    finally:
        proc.kill()
        proc.wait(timeout=30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    _ready, recovery_point, log_end = line.split()
    assert (int(recovery_point), int(log_end)) == (8, 14)
    assert (d / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n0 0\n1 6\n"
    log = Log.open(d, LogConfig(), now=Clock(), recovery_point=int(recovery_point), clean_shutdown=False)
    try:
        assert log.log_end_offset == 14
        assert log.leader_epoch_cache is not None
        assert [tuple(e) for e in log.leader_epoch_cache.epoch_entries()] == [(0, 0), (1, 6), (3, 12)]
        assert log.leader_epoch_cache.end_offset_for(1, log.log_end_offset) == (1, 12)
    finally:
        log.close()


def test_a_deleted_log_never_writes_into_the_directory_of_a_topic_recreated_at_its_path(tmp_path: Path) -> None:
    """Issue #20: the flush task, holding a Log from before a topic's deletion, wrote its dirty
    leader-epoch-checkpoint after the deletion (FileNotFoundError when the directory was gone;
    the new log's epochs overwritten when a topic of the same name had been created meanwhile)."""
    old = Log.open(tmp_path / "t-0", LogConfig(), now=Clock())
    old.append_as_leader(client_batch(3), 7, T0)  # epoch 7: dirty, not written yet
    old.delete()
    new = Log.open(tmp_path / "t-0", LogConfig(), now=Clock())
    try:
        written = (new.dir / "leader-epoch-checkpoint").read_bytes()
        old.checkpoint_leader_epochs()  # what the periodic flush and an append-path flush call
        old.flush()
        assert (new.dir / "leader-epoch-checkpoint").read_bytes() == written  # epoch 7 is not the new log's
    finally:
        new.close()


def test_close_waits_for_file_work_in_progress(tmp_path: Path) -> None:
    """A periodic task inside Log.unless_closed() holds off close() (and delete()): the deletion
    renames the directory only after that work is done."""
    import threading

    log = Log.open(tmp_path / "t-0", LogConfig(), now=Clock())
    inside, release, closed = threading.Event(), threading.Event(), threading.Event()

    def periodic() -> None:
        with log.unless_closed() as is_open:
            assert is_open
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=periodic)
    worker.start()
    assert inside.wait(10)
    closer = threading.Thread(target=lambda: (log.close(), closed.set()))
    closer.start()
    assert not closed.wait(0.2)  # bounded: it must not close while the work runs
    release.set()
    worker.join(10)
    closer.join(10)
    assert closed.is_set()
    with log.unless_closed() as is_open:
        assert not is_open
