"""Fixtures shared by the suites (tests/cluster, tests/compat, ...): a real ZooKeeper server
(Debian's package) per test, stopped by its fixture. tests/compose runs last: the Docker engine
it starts changes the host's forwarding and netfilter settings while it runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.zookeeper import ZooKeeperServer


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper of this test's own (free port, data under tmp_path), so a test may
    stop, pause or restart it without disturbing others."""
    zk = ZooKeeperServer(tmp_path / "zookeeper").start()
    try:
        yield zk
    finally:
        zk.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/compose after everything else (stable otherwise)."""
    compose = Path(__file__).parent / "compose"
    items.sort(key=lambda item: compose in Path(str(item.path)).parents)
