"""The transaction coordinator on a 3-broker ZooKeeper cluster with Kafka's defaults for
`__transaction_state` (50 partitions, replication factor 3, min.insync.replicas 2; issue #22).

* Kafka's Java producer: `initTransactions()` succeeds, and a second producer with the same
  transactional.id fences the first (ProducerFencedException on its send and commit).
* The coordinator's state is replicated: after the coordinator's broker is killed (kill -9), the
  leader elected for the id's partition loads it, and InitProducerId there bumps the epoch the
  killed coordinator wrote, for the same producer id.
* The coordinator killed between EndTxn and the markers: the transaction's only partition is
  offline (its broker killed), so the coordinator has written PrepareCommit and answered the
  commit but cannot write the marker; it is then killed (kill -9) and the partition's broker
  restarted. The broker elected for the id's `__transaction_state` partition loads PrepareCommit,
  sends the marker and writes CompleteCommit: the last stable offset reaches the high watermark
  and read_committed reads the record. Without the marker sender, or without its resend of a
  loaded Prepare transaction, the partition's last stable offset stays before the record.
"""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Producer

from protocol.messages import FindCoordinatorRequest
from tests.cluster.processes import RF1, WAIT, Cluster, cluster_fixture, partitions
from tests.compat.test_java_transactions import FENCED, classes, fencing_steps
from tests.raw_client import RawConnection
from tests.txn_requests import RETRIABLE, init, read_values, until_stable

cluster = cluster_fixture()
__all__ = ["classes"]  # the compiled Java programs, a module fixture of the compat test


def coordinator(c: Cluster, tid: str, ask: int) -> int:
    """The transaction coordinator broker `ask` names for `tid` (-1 while not available)."""
    with RawConnection(c.ports[ask]) as conn:
        found = conn.call(10, 3, FindCoordinatorRequest(key=tid, key_type=1))
    return found.node_id if found.error_code == 0 else -1


def init_at_coordinator(c: Cluster, tid: str, timeout: float = WAIT) -> tuple[int, int, int]:
    """InitProducerId at the coordinator a live broker names, retried on the retriable answers
    (a new leader loads the partition first), bounded."""
    deadline = time.monotonic() + timeout
    while True:
        node = coordinator(c, tid, c.live()[0])
        answer = (-1, -1, -1)
        if node in c.live():
            with RawConnection(c.ports[node]) as conn:
                answer = init(conn, tid)
            if answer[0] not in RETRIABLE:
                return answer
        assert time.monotonic() < deadline, f"no coordinator answered InitProducerId for {tid}: {answer}"
        time.sleep(0.1)


async def test_java_transactions_and_a_coordinator_failover(cluster: Cluster, classes: str) -> None:
    await cluster.open()
    bootstrap = ",".join(cluster.brokers[i].bootstrap for i in cluster.live())
    steps = await asyncio.to_thread(fencing_steps, classes, bootstrap, "cluster-txn", "rf3")
    assert steps == FENCED
    # the Java producers took epochs 0 and 1; this is the third InitProducerId
    error, pid, epoch = await asyncio.to_thread(init_at_coordinator, cluster, "cluster-txn")
    assert (error, epoch) == (0, 2)
    old = coordinator(cluster, "cluster-txn", cluster.live()[0])
    await asyncio.to_thread(cluster.brokers[old].kill)
    assert await asyncio.to_thread(init_at_coordinator, cluster, "cluster-txn") == (0, pid, 3)
    assert coordinator(cluster, "cluster-txn", cluster.live()[0]) not in (old, -1)


async def test_a_new_coordinator_completes_a_transaction_whose_markers_were_not_written(cluster: Cluster) -> None:
    await cluster.open()
    tid = "failover-commit"
    bootstrap = ",".join(cluster.brokers[i].bootstrap for i in cluster.live())
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    await asyncio.to_thread(producer.init_transactions, 60)  # creates __transaction_state (RF 3)
    old = coordinator(cluster, tid, cluster.live()[0])
    data = next(i for i in cluster.live() if i != old)  # the partition's broker, not the coordinator
    [partition] = [p for p, replicas in RF1.items() if replicas == [data]]
    producer.begin_transaction()
    producer.produce("rf1", b"committed", partition=partition)
    assert await asyncio.to_thread(producer.flush, 30) == 0

    await asyncio.to_thread(cluster.brokers[data].kill)  # the marker cannot be written now
    await cluster.until_all_agree(
        lambda m: partitions(m, "rf1")[partition][1] == -1
        and all(data not in s[4] for s in partitions(m, "__transaction_state").values()),
        f"rf1-{partition} offline and broker {data} out of the ISRs")
    await asyncio.to_thread(producer.commit_transaction, 30)  # PrepareCommit written, answered
    await asyncio.to_thread(cluster.brokers[old].kill)
    await cluster.start(data)
    await asyncio.to_thread(until_stable, cluster.ports[data], "rf1", [partition], WAIT)
    live = ",".join(cluster.brokers[i].bootstrap for i in cluster.live())
    assert await asyncio.to_thread(read_values, live, "rf1", [partition], "read_committed") == [b"committed"]
    assert coordinator(cluster, tid, cluster.live()[0]) not in (old, -1)
