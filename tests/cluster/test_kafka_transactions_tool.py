"""Kafka 3.9's `kafka-transactions.sh` against the 3-broker ZooKeeper cluster (issue #22): `list`
asks every broker and names each id's coordinator (the broker FindCoordinator names), `describe`
goes to the id's coordinator, `describe-producers` reads the partition's leader and, with
--broker-id, a follower's replica of the producer state (NOT_LEADER_OR_FOLLOWER from a broker
without a replica, as Kafka); `find-hanging` finds a transaction no coordinator knows on the
leader and on a follower once it is older than --max-transaction-timeout, and `abort` writes the
ABORT marker through the partition's leader: the last stable offset reaches the high watermark,
the followers' producer state has no open transaction any more, and read_committed reads past
it. The brokers run with transaction.partition.verification.enable=false, as Kafka must for such
a transaction to be written (tests/transactions_tool.py)."""

from __future__ import annotations

import asyncio

from protocol.errors import ErrorCode
from protocol.messages import DescribeProducersRequest
from protocol.messages.describe_producers_request import TopicRequest
from tests.cluster.processes import RF1, WAIT, Cluster, cluster_fixture, cluster_until, partitions
from tests.cluster.test_transactions import coordinator
from tests.raw_client import RawConnection
from tests.transactions_tool import commit_one, leave_hanging, open_and_kill, rows, transactions
from tests.txn_raw import READ_COMMITTED, READ_UNCOMMITTED, confluent_values, list_offset

cluster = cluster_fixture("transaction.state.log.num.partitions=5", "transaction.partition.verification.enable=false")


def describe_producers_error(port: int, topic: str, partition: int) -> int:
    with RawConnection(port) as conn:
        r = conn.call(61, 0, DescribeProducersRequest(topics=[TopicRequest(name=topic, partition_indexes=[partition])]))
    return r.topics[0].partitions[0].error_code


async def test_kafka_transactions_tool_on_the_cluster(cluster: Cluster) -> None:
    await cluster.open()
    bootstrap = ",".join(cluster.brokers[i].bootstrap for i in cluster.live())
    done = await asyncio.to_thread(commit_one, bootstrap, "cl-done", "rf3", 0)  # creates __transaction_state
    await asyncio.to_thread(open_and_kill, bootstrap, "cl-open", "rf3", 1)
    view = await cluster.until_all_agree(lambda m: True, "the metadata")

    def tool(*args: str) -> list[dict[str, str]]:
        return rows(transactions(bootstrap, *args).stdout)

    listed = {r["TransactionalId"]: r for r in await asyncio.to_thread(tool, "list")}
    assert {t: r["TransactionState"] for t, r in listed.items()} == {"cl-done": "CompleteCommit", "cl-open": "Ongoing"}
    for tid, row in listed.items():
        assert int(row["Coordinator"]) == coordinator(cluster, tid, 1)
    (described,) = await asyncio.to_thread(tool, "describe", "--transactional-id", "cl-open")
    assert (described["CoordinatorId"], described["TransactionState"], described["TopicPartitions"]) == (
        listed["cl-open"]["Coordinator"], "Ongoing", "rf3-1")

    _, leader1, _, replicas1, *_ = partitions(view, "rf3")[1]
    follower1 = next(r for r in replicas1 if r != leader1)
    (on_leader,) = await asyncio.to_thread(tool, "describe-producers", "--topic", "rf3", "--partition", "1")
    assert (on_leader["ProducerId"], on_leader["CurrentTransactionStartOffset"]) == (listed["cl-open"]["ProducerId"], "0")
    (on_follower,) = await asyncio.to_thread(tool, "describe-producers", "--topic", "rf3", "--partition", "1",
                                             "--broker-id", str(follower1))
    assert on_follower == on_leader
    [alone] = RF1[0]
    other = next(i for i in cluster.live() if i != alone)
    assert describe_producers_error(cluster.ports[other], "rf1", 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert describe_producers_error(cluster.ports[alone], "rf1", 0) == ErrorCode.NONE

    # a hanging transaction on rf3-2, two minutes old, behind a committed record
    _, leader2, _, replicas2, *_ = partitions(view, "rf3")[2]
    follower2 = next(r for r in replicas2 if r != leader2)
    with RawConnection(cluster.ports[leader2]) as conn:
        pid = leave_hanging(conn, "rf3", 2, age_ms=120_000)
        assert (list_offset(conn, ("rf3", 2), READ_UNCOMMITTED), list_offset(conn, ("rf3", 2), READ_COMMITTED)) == (1, 0)
    for broker in (leader2, follower2):
        found = await asyncio.to_thread(tool, "find-hanging", "--broker-id", str(broker), "--max-transaction-timeout", "1")
        assert [(r["Topic"], r["Partition"], r["ProducerId"], r["StartOffset"]) for r in found] == [
            ("rf3", "2", str(pid), "0")]
    assert await asyncio.to_thread(tool, "find-hanging", "--topic", "rf3") == []  # younger than 15 minutes

    await asyncio.to_thread(transactions, bootstrap, "abort", "--topic", "rf3", "--partition", "2",
                            "--start-offset", "0")
    with RawConnection(cluster.ports[leader2]) as conn:
        assert (list_offset(conn, ("rf3", 2), READ_UNCOMMITTED), list_offset(conn, ("rf3", 2), READ_COMMITTED)) == (2, 2)
    for broker in replicas2:  # the marker reached every replica's producer state

        def ended(b: int = broker) -> bool:
            (state,) = tool("describe-producers", "--topic", "rf3", "--partition", "2", "--broker-id", str(b))
            return state["CurrentTransactionStartOffset"] == "None"

        await asyncio.to_thread(cluster_until, ended, WAIT)
    # nothing hangs now; cl-open's transaction on rf3-1 is open but its coordinator knows it
    assert await asyncio.to_thread(tool, "find-hanging", "--topic", "rf3", "--max-transaction-timeout", "0") == []
    done.begin_transaction()
    done.produce("rf3", b"after", partition=2)
    await asyncio.to_thread(done.commit_transaction, 60)
    assert await asyncio.to_thread(confluent_values, bootstrap, [("rf3", 2)], 1) == ["after"]

