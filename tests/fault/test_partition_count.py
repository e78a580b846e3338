"""Many partitions under a shell's default open-files limit (soft 1024): the broker raises its
soft limit to the hard one at start (logged), creates them in one request and starts again with
all of them. `make test` runs 2,500 partitions under a hard limit of 4,096; `make fault`
(ODRADEK_FAULT_FULL=1) runs 10,000 under a hard limit of 20,000.

Before: one open file per segment plus one per index map (Python's mmap kept a duplicate
descriptor), so creation ran out of descriptors after ~340 partitions at 1024 and after a third
of the hard limit otherwise, and the half-created logs stopped the next start."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess
from tests.integration.test_partition_limits import (
    LimitedFilesBroker,
    create_topics,
    fetch_partition,
    partition_dirs,
)
from tests.integration.test_storage_integrity import produce, record_values
from tests.raw_client import RawConnection

FULL = os.environ.get("ODRADEK_FAULT_FULL") == "1"
PARTITIONS, HARD = (10_000, 20_000) if FULL else (2_500, 4_096)


@pytest.fixture
def started() -> Iterator[list[BrokerProcess]]:
    brokers: list[BrokerProcess] = []
    yield brokers
    for b in brokers:
        b.stop(timeout=300)


def test_many_partitions_raise_the_soft_limit_and_restart(tmp_path: Path, started: list[BrokerProcess]) -> None:
    parent_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if parent_hard != resource.RLIM_INFINITY and parent_hard < HARD:
        pytest.fail(f"this test needs a hard open-files limit of {HARD} (ulimit -Hn is {parent_hard})")
    data = tmp_path / "data"
    overrides = ["auto.create.topics.enable=false"]
    b = LimitedFilesBroker(data, 1024, HARD, overrides=overrides).start()
    started.append(b)
    assert f"soft={HARD}" in b.wait_for_line("open files limit", timeout=5)
    t0 = time.monotonic()
    with RawConnection(b.port, timeout=300) as conn:
        assert create_topics(conn, {"wide": PARTITIONS})["wide"] == (0, None)
    created_s = time.monotonic() - t0
    assert partition_dirs(data, "wide") == PARTITIONS
    assert b.stop(timeout=300) == 0
    t0 = time.monotonic()
    b2 = LimitedFilesBroker(data, 1024, HARD, port=b.port, overrides=overrides).start(timeout=300)
    started.append(b2)
    restart_s = time.monotonic() - t0
    last = PARTITIONS - 1
    with RawConnection(b2.port, timeout=60) as conn:
        assert produce(conn, "wide", [b"last"], partition=last) == (0, 0)
        p = fetch_partition(conn, "wide", last)
        assert p.error_code == 0 and record_values(p.records) == [b"last"]
    print(f"{PARTITIONS} partitions: created in {created_s:.1f} s, restarted in {restart_s:.1f} s")
