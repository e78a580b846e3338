"""Kafka's Java transactional producer (kafka-clients 3.9) and Kafka's own DumpLogSegments
against a real single `odradek serve` (issue #22's first half of the transaction coordinator).

* TransactionalFencing: `initTransactions()` of a producer, then of a second producer with the
  same transactional.id, which fences the first: the first's send and commit fail with
  ProducerFencedException (Kafka's answer to an epoch that was bumped).
* Transactions end to end (the marker sender): three transactions over several partitions,
  committed, aborted, committed; a read_committed Java consumer reads exactly the committed
  records, a read_uncommitted one all of them. A producer fenced mid-transaction by a second one
  with the same transactional.id: its transaction is aborted, the second's `initTransactions()`
  completes once the abort's markers are written, and the first's commit fails.
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
from tests.txn_requests import read_values, until_stable

SINGLE_BROKER_TXN = ["transaction.state.log.min.isr=1", "transaction.state.log.replication.factor=1"]


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    assert kafka_version().startswith("3.9."), kafka_version()
    sources = [JAVA_SRC / "src" / n for n in ("TransactionalFencing.java", "Transactions.java", "CreateTopic.java",
                                              "Json.java")]
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


# what Kafka's Java producer 3.9 reports after its coordinator aborted its timed-out transaction
# (the same program against Kafka 3.9.2, tests/compat/reference_kafka.py, prints the same lines)
SEND_AFTER_TIMEOUT = "InvalidProducerEpochException"
COMMIT_AFTER_TIMEOUT = "InvalidProducerEpochException"

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


def consumed(classes: str, bootstrap: str, topic: str, isolation: str) -> list[str]:
    [out] = run_java(classes, "Transactions", "consume", bootstrap, topic, isolation, timeout=120)
    return out["values"]


def test_java_commit_and_abort_read_by_isolation_level(classes: str, broker: BrokerProcess) -> None:
    """Without the marker sender the second transaction's first send waits for ever behind
    CONCURRENT_TRANSACTIONS (the first commit never completes) and the program times out."""
    run_java(classes, "CreateTopic", broker.bootstrap, "txn-ca", "3", timeout=60)
    assert run_java(classes, "Transactions", "commit-abort", broker.bootstrap, "java-ca", "txn-ca", "3",
                    timeout=120) == [{"committed": "c"}, {"aborted": "a"}, {"committed": "d"}]
    until_stable(broker.port, "txn-ca", 3)  # EndTxn is answered before the markers are written
    assert consumed(classes, broker.bootstrap, "txn-ca", "read_committed") == [
        "c-0", "c-1", "c-2", "d-0", "d-1", "d-2"]
    assert read_values(broker.bootstrap, "txn-ca", 3, "read_committed") == [
        b"c-0", b"c-1", b"c-2", b"d-0", b"d-1", b"d-2"]
    assert consumed(classes, broker.bootstrap, "txn-ca", "read_uncommitted") == [
        "a-0", "a-1", "a-2", "c-0", "c-1", "c-2", "d-0", "d-1", "d-2"]


def test_java_producer_fenced_mid_transaction_is_aborted(classes: str, broker: BrokerProcess) -> None:
    """The second producer's initTransactions() fences the first's open transaction and
    completes only once its abort's markers are written (CONCURRENT_TRANSACTIONS until then; it
    would time out without the marker sender)."""
    run_java(classes, "CreateTopic", broker.bootstrap, "txn-fence", "1", timeout=60)
    assert run_java(classes, "Transactions", "fence", broker.bootstrap, "java-fence", "txn-fence", timeout=120) == [
        {"first": "sent"}, {"initialized": "second"}, {"committed": "f2"},
        {"first": "commit", "error": "ProducerFencedException"}]
    until_stable(broker.port, "txn-fence", 1)
    assert consumed(classes, broker.bootstrap, "txn-fence", "read_committed") == ["f2"]
    assert consumed(classes, broker.bootstrap, "txn-fence", "read_uncommitted") == ["f1", "f2"]


def test_java_transaction_left_open_past_its_timeout_is_aborted(classes: str, tmp_path: Path) -> None:
    """transaction.timeout.ms=2000 and the coordinator's check every 500 ms: the transaction the
    producer leaves open is aborted with its epoch fenced (read_committed moves past it, its
    record is in read_uncommitted only), and the producer's next send and its commit fail."""
    b = BrokerProcess(tmp_path / "data", overrides=[
        *SINGLE_BROKER_TXN, "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"]).start()
    try:
        run_java(classes, "CreateTopic", b.bootstrap, "txn-timeout", "1", timeout=60)
        steps = run_java(classes, "Transactions", "timeout", b.bootstrap, "java-timeout", "txn-timeout", "2000",
                         timeout=120)
        assert steps == [{"sent": "t1"}, {"send": "t2", "error": SEND_AFTER_TIMEOUT},
                         {"commit": "t2", "error": COMMIT_AFTER_TIMEOUT}], steps
        until_stable(b.port, "txn-timeout", 1)
        assert consumed(classes, b.bootstrap, "txn-timeout", "read_committed") == []
        assert consumed(classes, b.bootstrap, "txn-timeout", "read_uncommitted") == ["t1"]
    finally:
        b.stop()


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
