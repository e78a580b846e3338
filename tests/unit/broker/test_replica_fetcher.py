"""ReplicaFetcherManager bookkeeping, without a leader to fetch from: one fetcher per leader,
partitions moved between them, and a fetcher left without partitions stopped with its connection
closed (a cluster whose leaders move must not collect sockets)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.replica_fetcher import FetcherConfig, PartitionFetchState, ReplicaFetcherManager
from broker.replication_quota import ReplicationQuotaManager


def state() -> PartitionFetchState:
    return PartitionFetchState(fetch_offset=0, leader_epoch=1, last_fetched_epoch=-1)


async def test_fetchers_follow_the_leaders_and_close_when_left_without_partitions() -> None:
    manager = ReplicaFetcherManager(FetcherConfig(broker_id=1, backoff_ms=10),
                                    SimpleNamespace(partitions={}, follower_quota=ReplicationQuotaManager("follower", 1)), lambda broker_id: None)
    manager.add_partitions({("t", 0): (2, state()), ("t", 1): (3, state())})
    assert set(manager.fetchers) == {2, 3}
    to_2 = manager.fetchers[2]
    manager.add_partitions({("t", 0): (3, state())})  # t-0's leader moved to broker 3
    assert set(manager.fetchers) == {3} and set(manager.fetchers[3].partitions) == {("t", 0), ("t", 1)}
    # stopped by the move itself, its connection closing without anyone awaiting it
    assert to_2._closing is not None
    await asyncio.wait_for(asyncio.shield(to_2._closing), 5)
    assert to_2.client.closed and to_2._task.done()
    assert manager.fetch_state(("t", 0)) is not None and manager.fetch_state(("t", 0))[0] == 3
    await asyncio.wait_for(manager.shutdown(), 5)
    assert not manager.fetchers
