"""Kafka Streams 3.9.2 with processing.guarantee=exactly_once_v2 on the 3-broker ZooKeeper cluster
(issue #22 §3): the word count of tests/compat/streams_eos.py over 5,000 known lines, input and
output with 6 partitions at replication factor 3, Streams' repartition and changelog topics created
by it at replication factor 3, `__consumer_offsets` and `__transaction_state` at 3 too. A broker is
killed (kill -9) while lines are fed and counted, and restarted -- the one leading the most
partitions of the application's topics, or the transaction coordinator of the first stream
thread's transactional id (`<application.id>-<process id kept in the state dir>-1`, the Streams
3.9 naming of exactly_once_v2) -- then the Streams program is killed (kill -9) and started again. A
read_committed consumer of the output must find every word's latest count equal to its count in
the input, and each word's counts only growing.
"""

from __future__ import annotations

import asyncio
import collections
import json
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.processes import Cluster, cluster_fixture, partitions
from tests.cluster.test_transactions import coordinator
from tests.compat.streams_eos import (
    WordCountApp,
    compile_word_count,
    create_topics,
    exactly_once_across_kills,
)

PARTITIONS = 6
APP_TOPICS = ("wc-in", "wc-out", "wc-words-repartition", "wc-counts-changelog")

cluster = cluster_fixture("offsets.topic.replication.factor=3", "offsets.topic.num.partitions=10",
                          "group.initial.rebalance.delay.ms=0")


@pytest.mark.parametrize("victim", ["busiest-leader", "transaction-coordinator"])
async def test_streams_exactly_once_v2_word_count_across_a_broker_kill_and_an_app_kill(
        cluster: Cluster, tmp_path: Path, victim: str) -> None:
    await cluster.open()
    classes = await asyncio.to_thread(compile_word_count, tmp_path / "classes")
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers.values())
    await asyncio.to_thread(create_topics, bootstrap, ["wc-in", "wc-out"], PARTITIONS, 3)
    killed: list[int] = []
    loop = asyncio.get_running_loop()

    def busiest_leader() -> int:
        view = cluster.metadata(cluster.live()[0])
        assert all(t in view["topics"] for t in APP_TOPICS), sorted(view["topics"])
        led = collections.Counter(s[1] for t in APP_TOPICS for s in partitions(view, t).values())
        return max(cluster.live(), key=lambda i: led[i])

    def transaction_coordinator() -> int:
        process_id = json.loads((tmp_path / "state" / "wc" / "kafka-streams-process-metadata").read_text())["processId"]
        node = coordinator(cluster, f"wc-{process_id}-1", cluster.live()[0])
        assert node in cluster.live(), node
        return node

    def kill_victim() -> None:
        killed.append(busiest_leader() if victim == "busiest-leader" else transaction_coordinator())
        cluster.brokers[killed[0]].kill()

    def restart() -> None:
        """Start the victim again and wait until every broker serves the same metadata, every
        partition of the application led by a live broker. A broker answers from when it
        listens, before the controller has sent it any state: a checker's consumer bootstrapped
        in that window was seen stuck for its whole minute in CI (the victim was the controller
        too, and another broker took over, so the window lasted the failover)."""
        cluster.brokers[killed[0]] = cluster.broker_process(killed[0]).start()

        def served(view: dict[str, Any]) -> bool:
            live = set(cluster.live())
            return all(t in view["topics"] and all(s[1] in live for s in partitions(view, t).values())
                       for t in APP_TOPICS)

        asyncio.run_coroutine_threadsafe(
            cluster.until_all_agree(served, "the application's partitions after the restart"), loop).result()

    await asyncio.to_thread(
        exactly_once_across_kills, bootstrap, PARTITIONS,
        lambda: WordCountApp(classes, bootstrap, tmp_path / "state", replication_factor=3).start(),
        kill_victim, restart)
    assert len(killed) == 1
