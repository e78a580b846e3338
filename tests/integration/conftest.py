from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker_process import FAST_GROUPS, BrokerProcess


def _running(tmp_path: Path, overrides: list[str]) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=overrides).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from _running(tmp_path, ["num.partitions=1"])


@pytest.fixture
def gbroker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker for consumer-group tests (FAST_GROUPS)."""
    yield from _running(tmp_path, FAST_GROUPS)


@pytest.fixture
def admin(gbroker: BrokerProcess) -> Iterator[Any]:
    """kafka-python's admin client on `gbroker` (test_admin.py has its own on `broker`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaAdminClient
    a = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
    yield a
    a.close()
