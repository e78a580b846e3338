"""Fixtures shared by the suites (tests/cluster, tests/compat, ...): a real ZooKeeper server
(Debian's package) per test and `start_broker` for brokers a test starts one by one, each stopped
by its fixture. tests/compose runs last: the Docker engine
it starts changes the host's forwarding and netfilter settings while it runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.broker_process import BrokerProcess
from tests.zookeeper import ZooKeeperServer

# Speed is measured by the benchmarks, never asserted by a test: hypothesis's per-example deadline
# (200 ms by default) is a timed assertion, and it failed property tests that were only slow on a
# loaded machine (spark_connector's test_offsets). Explicit @settings keep their other values.
settings.register_profile("odradek", deadline=None)
settings.load_profile("odradek")


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper of this test's own (free port, data under tmp_path), so a test may
    stop, pause or restart it without disturbing others."""
    zk = ZooKeeperServer(tmp_path / "zookeeper").start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """start(broker_id, zookeeper_connect, *overrides, log_dir=None, port=None) -> a started
    BrokerProcess (blocking: run it in a thread from async tests). Its log dir defaults to
    tmp_path/broker-<id>, so a broker started again with the same id keeps its data; every broker
    started is stopped at teardown."""
    started: list[BrokerProcess] = []

    def start(broker_id: int | None, connect: str | None, *overrides: str, log_dir: Path | None = None,
              port: int | None = None) -> BrokerProcess:
        b = BrokerProcess(log_dir or tmp_path / f"broker-{broker_id}", port=port, overrides=overrides,
                          zookeeper_connect=connect, broker_id=broker_id)
        started.append(b)
        return b.start()

    yield start
    for b in started:
        b.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/compose after everything else (stable otherwise)."""
    compose = Path(__file__).parent / "compose"
    items.sort(key=lambda item: compose in Path(str(item.path)).parents)
