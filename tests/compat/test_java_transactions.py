"""Kafka's Java transactional producer (kafka-clients 3.9) and Kafka's own DumpLogSegments
against a real single `odradek serve` (issue #22's first half of the transaction coordinator).

* TransactionalFencing: `initTransactions()` of a producer, then of a second producer with the
  same transactional.id, which fences the first: the first's send and commit fail with
  ProducerFencedException (Kafka's answer to an epoch that was bumped).
* The `__transaction_state` records the coordinator wrote are Kafka's: with the broker stopped,
  `kafka.tools.DumpLogSegments --transaction-log-decoder` decodes each of them (transactional id,
  producer id, epoch, state) as it decodes a Kafka broker's.

The broker runs with transaction.state.log.min.isr=1 (as Kafka's example server.properties):
Kafka's default of 2 cannot be met by one broker.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker_process import BrokerProcess
from tests.compat.jvm import JAVA_SRC, compile_java, kafka_version, run_tool
from tests.compat.test_java_client import run_java

SINGLE_BROKER_TXN = ["transaction.state.log.min.isr=1", "transaction.state.log.replication.factor=1"]


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    assert kafka_version().startswith("3.9."), kafka_version()
    sources = [JAVA_SRC / "src" / n for n in ("TransactionalFencing.java", "CreateTopic.java", "Json.java")]
    return compile_java(sources, tmp_path_factory.mktemp("java-txn") / "classes")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=SINGLE_BROKER_TXN).start()
    try:
        yield b
    finally:
        b.stop()


def fencing_steps(classes: str, bootstrap: str, transactional_id: str, topic: str) -> list[dict[str, Any]]:
    return run_java(classes, "TransactionalFencing", bootstrap, transactional_id, topic, timeout=120)


FENCED = [
    {"initialized": "first"},
    {"initialized": "second"},
    {"first": "send", "error": "ProducerFencedException"},
    {"first": "commit", "error": "ProducerFencedException"},
]


def test_java_init_transactions_and_a_second_producer_fences_the_first(classes: str, broker: BrokerProcess) -> None:
    assert run_java(classes, "CreateTopic", broker.bootstrap, "txn-out", "2", timeout=60) == [
        {"created": "txn-out", "partitions": 2}]
    assert fencing_steps(classes, broker.bootstrap, "java-txn", "txn-out") == FENCED


def test_kafka_dump_log_decodes_the_transaction_state_written(classes: str, broker: BrokerProcess) -> None:
    run_java(classes, "CreateTopic", broker.bootstrap, "txn-out", "1", timeout=60)
    assert fencing_steps(classes, broker.bootstrap, "dump-me", "txn-out") == FENCED
    broker.stop()
    segments = sorted(broker.log_dir.glob("__transaction_state-*/*.log"))
    assert len(segments) == 50  # transaction.state.log.num.partitions
    written = [s for s in segments if s.stat().st_size > 0]
    assert len(written) == 1  # every record of one id goes to its partition
    out = run_tool("kafka.tools.DumpLogSegments", "--transaction-log-decoder", "--files", str(written[0])).stdout
    decoded = re.findall(r"payload: (\S+)", out)
    # first producer: epoch -1 -> 0; second: 0 -> 1 (both Empty, no partitions); nothing else
    assert [re.findall(r"key: transaction_metadata::transactionalId=(\S+)", out)] == [["dump-me", "dump-me"]], out
    fields = r"producerId:(\d+),producerEpoch:(\d+),state=(\w+),partitions=(\[[^]]*\]),.*txnTimeoutMs=(\d+)"
    steps = [re.fullmatch(fields, d).groups() for d in decoded]  # type: ignore[union-attr]
    producer_id = steps[0][0]
    assert steps == [(producer_id, "0", "Empty", "[]", "60000"), (producer_id, "1", "Empty", "[]", "60000")], out
