"""aiokafka's and kafka-python's transactional producers against one `odradek serve` (issue #22):
commit and abort, fencing by a second producer with the same transactional.id, their own
read_committed consumers reading every committed record once and no aborted one, and aiokafka's
consume-transform-produce loop with send_offsets_to_transaction (one transaction aborted and
redone). Their transactional produces go through the leader's KIP-890 verification (on by
default), so each first batch of a transaction on a partition is checked with the coordinator.
The scenarios are in tests/python_txn_clients.py; tests/cluster/test_python_transactions.py
runs them on three brokers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.broker_process import BrokerProcess
from tests.python_txn_clients import (
    aiokafka_commit_abort_fence,
    aiokafka_consume_transform_produce,
    aiokafka_read_committed,
    kafka_python_commit_abort_fence,
    kafka_python_read_committed,
)
from tests.raw_client import RawConnection
from tests.txn_raw import create_topic

SINGLE_BROKER_TXN = ["transaction.state.log.min.isr=1", "transaction.state.log.num.partitions=3",
                     "offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("py-txn") / "data", overrides=SINGLE_BROKER_TXN).start()
    try:
        with RawConnection(b.port, "py-txn") as conn:
            for topic, partitions in (("aio-txn", 2), ("kp-txn", 2), ("ctp-in", 1), ("ctp-out", 1)):
                create_topic(conn, topic, partitions)
        yield b
    finally:
        b.stop()


def test_aiokafka_commit_abort_and_fencing(broker: BrokerProcess) -> None:
    out = asyncio.run(aiokafka_commit_abort_fence(broker.bootstrap, "aio-txn", "aio-tid"))
    assert out.fenced_error == "ProducerFenced"
    read = asyncio.run(aiokafka_read_committed(broker.bootstrap, "aio-txn", 2, len(out.committed)))
    assert sorted(read) == sorted(out.committed), read
    # kafka-python's read_committed consumer reads the same
    assert sorted(kafka_python_read_committed(broker.bootstrap, "aio-txn", [0, 1], len(out.committed))) == sorted(
        out.committed)


def test_kafka_python_commit_abort_and_fencing(broker: BrokerProcess) -> None:
    out = kafka_python_commit_abort_fence(broker.bootstrap, "kp-txn", "kp-tid")
    assert out.fenced_error == "ProducerFencedError"
    read = kafka_python_read_committed(broker.bootstrap, "kp-txn", [0, 1], len(out.committed))
    assert sorted(read) == sorted(out.committed), read
    assert sorted(asyncio.run(aiokafka_read_committed(broker.bootstrap, "kp-txn", 2, len(out.committed)))) == sorted(
        out.committed)


def test_aiokafka_consume_transform_produce(broker: BrokerProcess) -> None:
    values, committed = asyncio.run(aiokafka_consume_transform_produce(
        broker.bootstrap, "ctp-in", "ctp-out", "ctp-group", "ctp-tid", 30))
    assert values == [f"M{i}" for i in range(30)], values
    assert committed == {0: 30}
