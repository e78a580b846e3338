"""Kafka 3.9's `kafka-transactions.sh` against one Odradek node (issue #22): list, describe and
describe-producers show what the coordinator and the partitions know of a committed transaction
and of one left open by a SIGKILLed producer; find-hanging reports a transaction no coordinator
knows once it is older than --max-transaction-timeout, and not the open one its coordinator
knows; abort ends the hanging transaction with WriteTxnMarkers, after which the last stable
offset moves and a read_committed consumer reads past it. `odradek transactions list|describe`
print the tool's tables. Every assertion reads the tool's table or the broker's state, not only
an exit code.

The broker runs DescribeProducers (61), DescribeTransactions (65), ListTransactions (66); the
tool fails (UnsupportedVersionException) without them."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from tests.broker_process import BrokerProcess, module_broker
from tests.integration.test_cli import failed, ok
from tests.raw_client import RawConnection
from tests.transactions_tool import commit_one, leave_hanging, open_and_kill, rows, transactions
from tests.txn_raw import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    confluent_values,
    create_topic,
    list_offset,
)

broker = module_broker("txn-tool", ["transaction.state.log.min.isr=1", "transaction.state.log.num.partitions=5",
                                    "transaction.partition.verification.enable=false"])


def test_list_describe_and_describe_producers(broker: BrokerProcess) -> None:
    with RawConnection(broker.port) as conn:
        create_topic(conn, "tt", 2)
    commit_one(broker.bootstrap, "tool-done", "tt", 0)
    before_open = int(time.time() * 1000)
    open_and_kill(broker.bootstrap, "tool-open", "tt", 1)

    listed = {r["TransactionalId"]: r for r in rows(transactions(broker.bootstrap, "list").stdout)}
    assert {t: (r["Coordinator"], r["TransactionState"]) for t, r in listed.items()} == {
        "tool-done": ("0", "CompleteCommit"), "tool-open": ("0", "Ongoing")}
    open_pid = listed["tool-open"]["ProducerId"]
    assert listed["tool-done"]["ProducerId"] != open_pid

    (described,) = rows(transactions(broker.bootstrap, "describe", "--transactional-id", "tool-open").stdout)
    assert {k: described[k] for k in ("CoordinatorId", "ProducerId", "ProducerEpoch", "TransactionState",
                                      "TransactionTimeoutMs", "TopicPartitions")} == {
        "CoordinatorId": "0", "ProducerId": open_pid, "ProducerEpoch": "0", "TransactionState": "Ongoing",
        "TransactionTimeoutMs": "900000", "TopicPartitions": "tt-1"}
    assert before_open <= int(described["CurrentTransactionStartTimeMs"]) <= int(time.time() * 1000)
    (finished,) = rows(transactions(broker.bootstrap, "describe", "--transactional-id", "tool-done").stdout)
    assert (finished["TransactionState"], finished["TopicPartitions"]) == ("CompleteCommit", "")

    unknown = transactions(broker.bootstrap, "describe", "--transactional-id", "tool-nope", check=False)
    assert unknown.returncode == 1
    assert "transactionalId `tool-nope` failed because the ID could not be found" in unknown.stderr

    (producer,) = rows(transactions(broker.bootstrap, "describe-producers", "--topic", "tt", "--partition", "1").stdout)
    assert {k: producer[k] for k in ("ProducerId", "ProducerEpoch", "LastSequence", "CurrentTransactionStartOffset",
                                     "LatestCoordinatorEpoch")} == {
        "ProducerId": open_pid, "ProducerEpoch": "0", "LastSequence": "0", "CurrentTransactionStartOffset": "0",
        "LatestCoordinatorEpoch": "-1"}
    (committer,) = rows(transactions(broker.bootstrap, "describe-producers", "--topic", "tt", "--partition", "0").stdout)
    assert committer["CurrentTransactionStartOffset"] == "None"  # its COMMIT marker was written

    # KIP-994's duration filter (ListTransactions v1): the open transaction is younger than an hour
    old = rows(transactions(broker.bootstrap, "list", "--duration-filter", "3600000").stdout)
    assert [r["TransactionalId"] for r in old] == []


def test_find_hanging_and_abort(broker: BrokerProcess) -> None:
    with RawConnection(broker.port) as conn:
        create_topic(conn, "th", 1)
        plain = Producer({"bootstrap.servers": broker.bootstrap})
        plain.produce("th", b"before", partition=0)
        plain.flush(30)
        pid = leave_hanging(conn, "th", 0, age_ms=120_000)  # offset 1, two minutes old
        plain.produce("th", b"after", partition=0)
        plain.flush(30)
        assert (list_offset(conn, ("th", 0), READ_UNCOMMITTED), list_offset(conn, ("th", 0), READ_COMMITTED)) == (3, 1)

        # older than 1 minute, younger than the default 15: reported with the first only
        assert rows(transactions(broker.bootstrap, "find-hanging", "--broker-id", "0").stdout) == []
        for scope in (["--broker-id", "0"], ["--topic", "th"], ["--topic", "th", "--partition", "0"]):
            (hanging,) = rows(transactions(broker.bootstrap, "find-hanging", *scope,
                                           "--max-transaction-timeout", "1").stdout)
            assert {k: hanging[k] for k in ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                                            "StartOffset", "Duration(min)")} == {
                "Topic": "th", "Partition": "0", "ProducerId": str(pid), "ProducerEpoch": "0",
                "CoordinatorEpoch": "-1", "StartOffset": "1", "Duration(min)": "2"}
        # the SIGKILLed producer's transaction (tt-1, its coordinator knows it) is not hanging
        everywhere = rows(transactions(broker.bootstrap, "find-hanging", "--broker-id", "0",
                                       "--max-transaction-timeout", "0").stdout)
        assert [(r["Topic"], r["Partition"]) for r in everywhere] == [("th", "0")]
        assert confluent_values(broker.bootstrap, [("th", 0)], 1) == ["before"]

        transactions(broker.bootstrap, "abort", "--topic", "th", "--partition", "0", "--start-offset", "1")
        # the ABORT marker at offset 3 ends it: the LSO is the end, the hanging record is skipped
        assert (list_offset(conn, ("th", 0), READ_UNCOMMITTED), list_offset(conn, ("th", 0), READ_COMMITTED)) == (4, 4)
    assert confluent_values(broker.bootstrap, [("th", 0)], 2) == ["after", "before"]
    (producer,) = rows(transactions(broker.bootstrap, "describe-producers", "--topic", "th", "--partition", "0").stdout)
    assert (producer["ProducerId"], producer["CurrentTransactionStartOffset"]) == (str(pid), "None")
    assert rows(transactions(broker.bootstrap, "find-hanging", "--topic", "th",
                             "--max-transaction-timeout", "0").stdout) == []


def test_odradek_transactions_cli_prints_the_tools_tables(broker: BrokerProcess) -> None:
    """`odradek transactions list|describe` print kafka-transactions.sh's tables byte for byte
    (the rows of `list` in the tool's order aside, and describe's duration, which is the
    reader's clock): same headers, same cells, same padding and tabs."""
    with RawConnection(broker.port) as conn:
        create_topic(conn, "tc", 1)
    commit_one(broker.bootstrap, "cli-done", "tc", 0)
    open_and_kill(broker.bootstrap, "cli-open", "tc", 0)
    theirs = transactions(broker.bootstrap, "list").stdout.splitlines()
    ours = ok("transactions", "list", bootstrap=broker.bootstrap).splitlines()
    assert ours[0] == theirs[0] and sorted(ours[1:]) == sorted(theirs[1:])
    assert {r["TransactionalId"] for r in rows("\n".join(ours))} >= {"cli-done", "cli-open"}
    ongoing = {r["TransactionalId"] for r in rows(ok("transactions", "list", "--state", "Ongoing",
                                                     bootstrap=broker.bootstrap))}
    assert "cli-open" in ongoing and "cli-done" not in ongoing

    for tid in ("cli-open", "cli-done"):
        (theirs_row,) = rows(transactions(broker.bootstrap, "describe", "--transactional-id", tid).stdout)
        out = ok("transactions", "describe", "--transactional-id", tid, bootstrap=broker.bootstrap)
        (ours_row,) = rows(out)
        assert int(ours_row.pop("TransactionDurationMs")) >= 0 and theirs_row.pop("TransactionDurationMs")
        assert ours_row == theirs_row
        header = out.splitlines()[0]
        assert header.startswith("CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState")
    (described,) = rows(ok("transactions", "describe", "--transactional-id", "cli-open", bootstrap=broker.bootstrap))
    assert (described["TransactionState"], described["TopicPartitions"]) == ("Ongoing", "tc-0")
    assert "transactional id 'cli-nope' was not found" in failed("transactions", "describe", "--transactional-id",
                                                                 "cli-nope", bootstrap=broker.bootstrap)
