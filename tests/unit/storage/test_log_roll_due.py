"""storage.log.Log.roll_due: the broker's cheap question before an append ("would this append
roll?"), answered as the append itself would, so the roll can run in an executor first."""

from __future__ import annotations

from pathlib import Path

from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import T0, Clock, client_batch


def test_roll_due_by_size_agrees_with_the_append(tmp_path: Path) -> None:
    size = len(client_batch(5))
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=3 * size + 10), now=Clock())
    try:
        assert not log.roll_due(client_batch(5), T0)  # empty active segment: never
        for _ in range(3):
            assert not log.roll_due(client_batch(5), T0)
            log.append_as_leader(client_batch(5), 0, T0)
        assert log.roll_due(client_batch(5), T0)  # the 4th would not fit
        log.roll()
        assert log.num_segments == 2 and not log.roll_due(client_batch(5), T0)
    finally:
        log.close()


def test_roll_due_by_segment_ms_uses_the_batch_timestamp(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_ms=1000), now=Clock())
    try:
        log.append_as_leader(client_batch(1, base_timestamp=T0), 0)
        assert not log.roll_due(client_batch(1, base_timestamp=T0 + 1000), T0 + 10**9)
        assert log.roll_due(client_batch(1, base_timestamp=T0 + 1001), T0)
    finally:
        log.close()


def test_roll_due_for_log_append_time_uses_now(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_ms=1000, message_timestamp_type="LogAppendTime"),
                   now=Clock())
    try:
        log.append_as_leader(client_batch(1, base_timestamp=0), 0, T0)
        assert not log.roll_due(client_batch(1, base_timestamp=0), T0 + 1000)
        assert log.roll_due(client_batch(1, base_timestamp=0), T0 + 1001)
    finally:
        log.close()
