"""The transaction coordinator on a 3-broker ZooKeeper cluster with Kafka's defaults for
`__transaction_state` (50 partitions, replication factor 3, min.insync.replicas 2; issue #22).

* Kafka's Java producer: `initTransactions()` succeeds, and a second producer with the same
  transactional.id fences the first (ProducerFencedException on its send and commit).
* The coordinator's state is replicated: after the coordinator's broker is killed (kill -9), the
  leader elected for the id's partition loads it, and InitProducerId there bumps the epoch the
  killed coordinator wrote, for the same producer id.
"""

from __future__ import annotations

import asyncio
import time

from protocol.messages import FindCoordinatorRequest
from tests.cluster.processes import WAIT, Cluster, cluster_fixture
from tests.compat.test_java_transactions import FENCED, classes, fencing_steps
from tests.raw_client import RawConnection
from tests.txn_requests import RETRIABLE, init

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
