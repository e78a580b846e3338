"""Fixtures of tests/cluster/ beyond the suite-wide ones of tests/conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.cluster.controller_env import ControllerEnv
from tests.zookeeper import ZooKeeperServer


@pytest.fixture
async def env(zookeeper: ZooKeeperServer) -> AsyncIterator[ControllerEnv]:
    """The controller tests' ControllerEnv on this test's ZooKeeper (controllers and recording
    brokers it starts are closed at teardown)."""
    e = ControllerEnv(zookeeper)
    yield e
    await e.close()
