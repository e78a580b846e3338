"""Java exactly-once end to end on the 3-broker ZooKeeper cluster (issue #22 §3; the single-node
runs of the same scenarios are tests/compat/test_java_eos.py, the scenarios tests/compat/eos.py).
`__consumer_offsets`, `__transaction_state` and the topics are replicated 3 ways (the
transaction log and the topics with min.insync.replicas 2, as Kafka's defaults and system test).

* the consume-transform-produce application, with aborts, and killed mid-transaction then rerun;
* Kafka's transactions_test.py: two TransactionalMessageCopier copy 20,000 records while each
  broker in turn is bounced, the transaction coordinator of copier-0 first: cleanly (SIGTERM,
  a controlled shutdown, then a restart) in one test, with kill -9 (restarted once ZooKeeper
  dropped its registration, as the system test waits) in the other. Before the next bounce the
  restarted broker is back in every ISR, so each bounce leaves two replicas in sync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.cluster.processes import IDS, Cluster, cluster_fixture, partitions
from tests.cluster.test_transactions import coordinator
from tests.compat import eos

cluster = cluster_fixture("offsets.topic.replication.factor=3")


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    return eos.compile_eos(tmp_path_factory.mktemp("java-eos") / "classes")


def bootstrap(c: Cluster) -> str:
    return ",".join(c.brokers[i].bootstrap for i in IDS)


async def test_consume_transform_produce_commits_and_aborts(cluster: Cluster, classes: str) -> None:
    await cluster.open()
    await asyncio.to_thread(eos.consume_transform_produce, classes, bootstrap(cluster), 3)


async def test_application_killed_mid_transaction_resumes_exactly_once(cluster: Cluster, classes: str) -> None:
    await cluster.open()
    await asyncio.to_thread(eos.copier_killed_mid_transaction, classes, bootstrap(cluster), 3)


def in_every_isr(broker: int) -> Callable[[dict[str, Any]], bool]:
    """Every partition of the test's topics and of the two coordinators' topics led, with
    `broker` in its ISR."""
    def check(m: dict[str, Any]) -> bool:
        topics = ("input-topic", "output-topic", "__transaction_state", "__consumer_offsets")
        return all(t in m["topics"] and all(s[0] == 0 and broker in s[4] for s in partitions(m, t).values())
                   for t in topics)
    return check


def bounces(cluster: Cluster, loop: asyncio.AbstractEventLoop, hard: bool) -> list[Callable[[], None]]:
    """One bounce per broker, the coordinator of copier-0 first (found when its turn comes)."""
    done: list[int] = []

    def bounce() -> None:
        first = coordinator(cluster, "copier-0", cluster.live()[0])
        i = first if first not in (-1, *done) else next(b for b in IDS if b not in done)
        done.append(i)
        future = asyncio.run_coroutine_threadsafe(restart(cluster, i, hard), loop)
        future.result(timeout=120)

    return [bounce for _ in IDS]


async def restart(cluster: Cluster, i: int, hard: bool) -> None:
    b = cluster.brokers[i]
    if hard:
        await asyncio.to_thread(b.kill)
        await cluster.until_all_agree(lambda m: i not in [b[0] for b in m["brokers"]], f"broker {i} deregistered")
    else:
        await asyncio.to_thread(b.stop)
    await cluster.start(i)
    await cluster.until_all_agree(in_every_isr(i), f"broker {i} back in every ISR", timeout=90)


async def copy_while_bouncing(cluster: Cluster, hard: bool) -> dict[str, Any]:
    await cluster.open()
    loop = asyncio.get_running_loop()
    measured = await asyncio.to_thread(eos.transactions_test, bootstrap(cluster), 3, bounces(cluster, loop, hard))
    print(measured)
    return measured


async def test_kafka_transactional_message_copier_with_clean_broker_bounces(cluster: Cluster) -> None:
    await copy_while_bouncing(cluster, hard=False)


async def test_kafka_transactional_message_copier_with_hard_broker_bounces(cluster: Cluster) -> None:
    await copy_while_bouncing(cluster, hard=True)
