"""aiokafka's and kafka-python's transactional producers on the 3-broker ZooKeeper cluster with
Kafka's defaults for `__transaction_state` (50 partitions, RF 3, min.insync.replicas 2; issue
#22): the scenarios of tests/integration/test_python_transactions.py (tests/python_txn_clients.py)
on the replicated topic rf3, whose partitions 0 and 1 are led by brokers 1 and 2 while the
transactional id's coordinator is wherever its `__transaction_state` partition is led, so the
leaders' KIP-890 verification (AddPartitionsToTxn verify_only) and the markers cross brokers."""

from __future__ import annotations

import asyncio

from tests.cluster.processes import Cluster, cluster_fixture
from tests.python_txn_clients import (
    aiokafka_commit_abort_fence,
    aiokafka_consume_transform_produce,
    aiokafka_read_committed,
    kafka_python_commit_abort_fence,
    kafka_python_read_committed,
)
from tests.raw_client import RawConnection
from tests.txn_raw import create_topic

cluster = cluster_fixture("group.initial.rebalance.delay.ms=0")


async def test_python_transactional_clients_on_three_brokers(cluster: Cluster) -> None:
    await cluster.open()
    bootstrap = ",".join(cluster.brokers[i].bootstrap for i in cluster.live())
    with RawConnection(cluster.ports[1]) as conn:
        for topic in ("ctp-in", "ctp-out"):
            create_topic(conn, topic, 1, replication_factor=3)
    await cluster.until_all_agree(lambda m: all(t in m["topics"] for t in ("ctp-in", "ctp-out")), "ctp topics")

    aio = await aiokafka_commit_abort_fence(bootstrap, "rf3", "aio-cluster")
    assert aio.fenced_error == "ProducerFenced"
    kp = await asyncio.to_thread(kafka_python_commit_abort_fence, bootstrap, "rf3", "kp-cluster")
    assert kp.fenced_error == "ProducerFencedError"
    committed = sorted(aio.committed + kp.committed)
    assert sorted(await aiokafka_read_committed(bootstrap, "rf3", 2, len(committed))) == committed
    assert sorted(await asyncio.to_thread(kafka_python_read_committed, bootstrap, "rf3", [0, 1],
                                          len(committed))) == committed

    values, offsets = await aiokafka_consume_transform_produce(bootstrap, "ctp-in", "ctp-out", "ctp-group",
                                                               "ctp-cluster", 30)
    assert values == [f"M{i}" for i in range(30)], values
    assert offsets == {0: 30}
