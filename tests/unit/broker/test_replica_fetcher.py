"""ReplicaFetcherManager bookkeeping, without a leader to fetch from: one fetcher per leader,
partitions moved between them, and a fetcher left without partitions stopped with its connection
closed (a cluster whose leaders move must not collect sockets)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from broker.replica_fetcher import (
    FetcherConfig,
    PartitionFetchState,
    ReplicaFetcherManager,
    fetcher_id,
    truncation_offset,
)
from broker.replication_quota import ReplicationQuotaManager
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log


def state() -> PartitionFetchState:
    return PartitionFetchState(fetch_offset=0, leader_epoch=1, last_fetched_epoch=-1)


async def test_fetchers_follow_the_leaders_and_close_when_left_without_partitions() -> None:
    manager = ReplicaFetcherManager(FetcherConfig(broker_id=1, backoff_ms=10),
                                    SimpleNamespace(partitions={}, follower_quota=ReplicationQuotaManager("follower", 1)), lambda broker_id: None)
    manager.add_partitions({("t", 0): (2, state()), ("t", 1): (3, state())})
    assert set(manager.fetchers) == {(2, 0), (3, 0)}
    to_2 = manager.fetchers[(2, 0)]
    manager.add_partitions({("t", 0): (3, state())})  # t-0's leader moved to broker 3
    assert set(manager.fetchers) == {(3, 0)} and set(manager.fetchers[(3, 0)].partitions) == {("t", 0), ("t", 1)}
    # stopped by the move itself, its connection closing without anyone awaiting it
    assert to_2._closing is not None
    await asyncio.wait_for(asyncio.shield(to_2._closing), 5)
    assert to_2.client.closed and to_2._task.done()
    assert manager.fetch_state(("t", 0)) is not None and manager.fetch_state(("t", 0))[0] == 3
    await asyncio.wait_for(manager.shutdown(), 5)
    assert not manager.fetchers


async def test_num_replica_fetchers_spreads_a_leaders_partitions_as_kafka_does() -> None:
    """num.replica.fetchers=3: Kafka's getFetcherId, abs(31 * "t".hashCode() + p) % 3 with
    "t".hashCode() = 116, puts t-0, t-1, t-2 on fetchers 2, 0, 1 -- each its own connection."""
    assert [fetcher_id(("t", p), 3) for p in range(3)] == [2, 0, 1]
    assert fetcher_id(("t", 5), 1) == 0
    # Java's String.hashCode overflows: "polygenelubricants".hashCode() == Integer.MIN_VALUE, and
    # Kafka's Utils.abs takes that as 0 (31 * MIN_VALUE + 0 wraps to MIN_VALUE again)
    assert fetcher_id(("polygenelubricants", 0), 7) == 0
    manager = ReplicaFetcherManager(FetcherConfig(broker_id=1, backoff_ms=10, num_fetchers=3),
                                    SimpleNamespace(partitions={}, follower_quota=ReplicationQuotaManager("follower", 1)),
                                    lambda broker_id: None)
    manager.add_partitions({("t", p): (2, state()) for p in range(3)})
    assert {k: set(f.partitions) for k, f in manager.fetchers.items()} == {
        (2, 2): {("t", 0)}, (2, 0): {("t", 1)}, (2, 1): {("t", 2)}}
    assert len({id(f.client) for f in manager.fetchers.values()}) == 3
    assert manager.fetchers[(2, 1)].client.config.client_id == "broker-1-fetcher-1"
    await asyncio.wait_for(manager.shutdown(), 5)


def _follower_log(tmp_path: Path, batches: list[tuple[int, int, int]]) -> Log:
    """A follower's log holding (base offset, records, leader epoch) batches."""
    log_ = Log.open(tmp_path / "t-0", LogConfig())
    for base, n, epoch in batches:
        log_.append_as_follower(bytearray(build_batch(
            [Record(0, i, i, None, b"v", []) for i in range(n)], base_offset=base,
            base_timestamp=1_700_000_000_000, partition_leader_epoch=epoch)))
    return log_


def test_truncation_is_bounded_by_our_own_end_of_the_diverging_epoch(tmp_path: Path) -> None:
    """We led epoch 1 briefly and wrote offset 18 in it; the new leader's epoch 0 ends at 19 (its
    offset 18 is another record). Truncating to the leader's 19 kept our offset 18 and the next
    fetch diverged again, forever (found by tests/sim: the ISR never filled again)."""
    log_ = _follower_log(tmp_path, [(0, 18, 0), (18, 1, 1)])
    try:
        assert truncation_offset(log_, 0, 19) == 18
        assert truncation_offset(log_, 1, 25) == 19  # the leader has all of our epoch 1: nothing to cut
        assert truncation_offset(log_, 2, 30) == 19  # an epoch we never saw: our end of the one below
        assert truncation_offset(log_, -1, -1) == min(log_.high_watermark, 19)  # undefined: to the HW
    finally:
        log_.close()


def test_truncation_when_the_leader_knows_an_epoch_we_skipped(tmp_path: Path) -> None:
    """Our epochs 0 and 3; the leader answers its epoch 2 ends at 12: we know no epoch 2, so we
    cut to the end of our largest epoch below it (0, ending where our 3 starts) and ask again."""
    log_ = _follower_log(tmp_path, [(0, 10, 0), (10, 5, 3)])
    try:
        assert truncation_offset(log_, 2, 12) == 10
    finally:
        log_.close()
