"""Fixtures of the compat suite: an Odradek broker and a reference Apache Kafka 3.9 broker, both
real processes on free loopback ports, each stopped by its fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import FAST_GROUPS, BrokerProcess
from tests.compat.reference_kafka import ReferenceKafka


@pytest.fixture
def odradek(tmp_path: Path) -> Iterator[BrokerProcess]:
    """`odradek serve` with consumer groups that form at once (FAST_GROUPS)."""
    b = BrokerProcess(tmp_path / "odradek-data", overrides=FAST_GROUPS).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def reference_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceKafka]:
    """Apache Kafka 3.9 (KRaft, one node), shared by the tests of a module."""
    k = ReferenceKafka(tmp_path_factory.mktemp("reference-kafka")).start()
    try:
        yield k
    finally:
        k.stop()
