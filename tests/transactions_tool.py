"""Kafka 3.9's `kafka-transactions.sh` (org.apache.kafka.tools.TransactionsCommand) for tests, and
the two kinds of open transaction it inspects: one its coordinator knows (a confluent-kafka
producer SIGKILLed inside its transaction) and a hanging one (a transactional batch whose producer
id no coordinator knows, as a client without KIP-890 verification could leave one; the broker
runs with transaction.partition.verification.enable=false as Kafka would have to)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

from tests.compat.jvm import run_tool
from tests.raw_client import RawConnection
from tests.txn_raw import TxnProducer, init_producer_id

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"

_OPEN_AND_DIE = """
import os, signal, sys
from confluent_kafka import Producer
bootstrap, tid, topic, partition = sys.argv[1:5]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 900000})
p.init_transactions(30)
p.begin_transaction()
p.produce(topic, b"never-committed", partition=int(partition))
assert p.flush(30) == 0
os.kill(os.getpid(), signal.SIGKILL)
"""


def transactions(bootstrap: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`kafka-transactions.sh --bootstrap-server <bootstrap> <args>`, run to completion."""
    return run_tool(TRANSACTIONS, "--bootstrap-server", bootstrap, *args, check=check)


def rows(out: str) -> list[dict[str, str]]:
    """The tool's table (a header line, then rows; every cell padded and followed by a tab) as
    one dict per row, header -> cell."""
    lines = [[cell.strip() for cell in line.split("\t")[:-1]] for line in out.splitlines() if "\t" in line]
    assert lines, f"no table in:\n{out}"
    header, *body = lines
    return [dict(zip(header, row, strict=True)) for row in body]


def commit_one(bootstrap: str, transactional_id: str, topic: str, partition: int) -> Any:
    """A confluent-kafka transactional producer that commits one record to the partition; the
    producer, for more transactions."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=partition)
    producer.commit_transaction(60)
    return producer


def open_and_kill(bootstrap: str, transactional_id: str, topic: str, partition: int) -> None:
    """A confluent-kafka transactional producer (transaction.timeout.ms 15 min) that writes one
    record to the partition inside a transaction and is SIGKILLed before it commits: its
    transaction stays Ongoing at the coordinator, which knows the partition."""
    proc = subprocess.run([sys.executable, "-c", _OPEN_AND_DIE, bootstrap, transactional_id, topic, str(partition)],
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def leave_hanging(conn: RawConnection, topic: str, partition: int, age_ms: int) -> int:
    """A transactional batch written by a producer id no transactional id owns (InitProducerId
    without one), timestamped `age_ms` ago, never ended: a hanging transaction. Returns the
    producer id; the batch is at the partition's end offset before the call."""
    producer = TxnProducer(conn, init_producer_id(conn), transactional_id="hanging-producer")
    error, _ = producer.send((topic, partition), ["hanging"], timestamp_ms=int(time.time() * 1000) - age_ms)
    assert error == 0, error
    return producer.producer_id
