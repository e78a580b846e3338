"""The append path never writes leader-epoch-checkpoint (it runs on the event loop): a new epoch
is kept in memory and marked dirty, and Log.flush -- an executor's work -- writes it before the
recovery point passes it."""

from __future__ import annotations

from pathlib import Path

from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import T0, Clock, client_batch


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
