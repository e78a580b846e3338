"""Kafka Streams 3.9.2 with processing.guarantee=exactly_once_v2 against a single `odradek serve`
(issue #22 §3): the word count of tests/compat/streams_eos.py over 5,000 known lines fed at a
steady rate; the broker is killed (kill -9) and restarted once 1,000 lines are counted, the Streams
program killed (kill -9) and started again on its state dir once 2,500 are. A read_committed
consumer of the output must then find every word's latest count equal to its count in the input
(nothing counted twice, nothing lost), and each word's counts only growing. With
processing.guarantee=at_least_once the same test fails (the lines the killed program had counted
since its last commit are counted again), and so it does when the broker's read_committed fetches
leave out their aborted transactions (the killed program's aborted records of the repartition
topic are counted by its successor).

Streams drives the broker through CreateTopics with configs (its repartition and changelog topics),
InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit / EndTxn every commit
interval, read_committed fetches of its repartition topic, DeleteRecords on it, the group protocol
with a static member, and ListOffsets / Fetch of the changelog to restore its store after the kill.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess
from tests.compat.streams_eos import (
    WordCountApp,
    compile_word_count,
    create_topics,
    exactly_once_across_kills,
)
from tests.compat.test_java_transactions import SINGLE_BROKER_TXN

PARTITIONS = 4


@pytest.fixture(scope="module")
def word_count(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_word_count(tmp_path_factory.mktemp("java-streams") / "classes")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=[*SINGLE_BROKER_TXN, "group.initial.rebalance.delay.ms=0"]).start()
    try:
        yield b
    finally:
        b.stop()


def test_streams_exactly_once_v2_word_count_across_broker_and_app_kills(
        word_count: str, broker: BrokerProcess, tmp_path: Path) -> None:
    create_topics(broker.bootstrap, ["wc-in", "wc-out"], PARTITIONS, 1)
    exactly_once_across_kills(
        broker.bootstrap, PARTITIONS,
        start_app=lambda: WordCountApp(word_count, broker.bootstrap, tmp_path / "state").start(),
        kill_broker=broker.kill, restart_broker=broker.start)
