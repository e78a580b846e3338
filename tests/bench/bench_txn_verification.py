"""What KIP-890 part 1's produce verification costs (issue #22): the latency of a transaction's
first Produce to a partition, which the leader verifies with the transaction coordinator
(AddPartitionsToTxn v5 verify_only, over the broker's own listener on one node), against the
transaction's second Produce there (the ongoing transaction is the proof: no request), on
Odradek with transaction.partition.verification.enable true and false, and on Kafka 3.9.2 (one
KRaft node, verification on, as by default) side by side in one run.

Each transaction: AddPartitionsToTxn v3 (retried while the previous commit completes), two
transactional batches of 10 records of 100 B to the same partition (acks=-1, Produce v9), EndTxn
commit. Raw requests on one connection (tests/raw_client.py), so the client adds nothing.

    python -m tests.bench.bench_txn_verification [--transactions 300]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.messages import EndTxnRequest, ProduceRequest
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch
from tests.broker_process import BrokerProcess
from tests.compat.reference_kafka import ReferenceKafka
from tests.raw_client import RawConnection
from tests.txn_raw import create_topic
from tests.txn_requests import add_partitions, init_when_ready

TOPIC = "bench-ver"
RECORDS = 10
VALUE = b"x" * 100


def _produce(conn: RawConnection, tid: str, pid: int, epoch: int, seq: int) -> float:
    """Seconds of one transactional Produce (asserted appended)."""
    batch = build_batch([Record(0, i, i, None, VALUE, []) for i in range(RECORDS)],
                        base_timestamp=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, is_transactional=True)
    request = ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=10000, topic_data=[
        pr.TopicProduceData(name=TOPIC, partition_data=[pr.PartitionProduceData(index=0, records=batch)])])
    t0 = time.perf_counter()
    resp = conn.call(0, 9, request)
    elapsed = time.perf_counter() - t0
    assert resp.responses[0].partition_responses[0].error_code == 0, resp
    return elapsed


def measure(port: int, transactions: int) -> dict[str, list[float]]:
    """Milliseconds of each transaction's first and second Produce."""
    first: list[float] = []
    second: list[float] = []
    tid = "bench-ver-txn"
    with RawConnection(port, "bench-ver") as conn:
        create_topic(conn, TOPIC, 1)
        error, pid, epoch = init_when_ready(conn, tid)
        assert error == 0
        seq = 0
        for _ in range(transactions):
            deadline = time.monotonic() + 30
            while (added := add_partitions(conn, 3, tid, pid, epoch, {TOPIC: [0]})[(TOPIC, 0)]) != 0:
                assert added == ErrorCode.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline, added
                time.sleep(0.001)
            first.append(_produce(conn, tid, pid, epoch, seq) * 1000)
            second.append(_produce(conn, tid, pid, epoch, seq + RECORDS) * 1000)
            seq += 2 * RECORDS
            end = conn.call(26, 3, EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                 committed=True))
            assert end.error_code == 0, end
    return {"first": first, "second": second}


def _summary(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{statistics.median(values):.2f} / {p99:.2f}"


def run_on(start: Callable[[Path], object], stop: Callable[[object], None], port_of: Callable[[object], int],
           transactions: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="bench-ver-") as d:
        broker = start(Path(d))
        try:
            return measure(port_of(broker), transactions)
        finally:
            stop(broker)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=300)
    args = parser.parse_args()
    txn = ["transaction.state.log.min.isr=1", "transaction.state.log.replication.factor=1"]
    systems = {
        "Odradek, verification on": lambda d: BrokerProcess(d / "data", overrides=txn).start(),
        "Odradek, verification off": lambda d: BrokerProcess(
            d / "data", overrides=[*txn, "transaction.partition.verification.enable=false"]).start(),
        "Kafka 3.9.2, verification on": lambda d: ReferenceKafka(d).start(),
    }
    print(f"| broker | first Produce of a transaction, ms (median / p99) | second Produce, ms | "
          f"{args.transactions} transactions |")
    print("|---|---|---|---|")
    for name, start in systems.items():
        result = run_on(start, lambda b: b.stop(), lambda b: b.port, args.transactions)  # type: ignore[attr-defined]
        print(f"| {name} | {_summary(result['first'])} | {_summary(result['second'])} | |")


if __name__ == "__main__":
    main()
