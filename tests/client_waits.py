"""Bounded waits on kafka-python consumers: a consumer that never gets its partitions must fail
the test with what it knows, not spin until CI's time limit."""

from __future__ import annotations

import time
from typing import Any


def poll_until_assigned(consumer: Any, count: int = 1, timeout_s: float = 30.0) -> set[Any]:
    """poll() until ``consumer`` holds at least ``count`` partitions; its assignment."""
    deadline = time.monotonic() + timeout_s
    while len(consumer.assignment()) < count:
        if time.monotonic() > deadline:
            raise AssertionError(
                f"consumer got {sorted(consumer.assignment())} of {count} partitions in {timeout_s} s "
                f"(api_version {consumer.config.get('api_version')}, group {consumer.config.get('group_id')}, "
                f"subscription {consumer.subscription()})"
            )
        consumer.poll(timeout_ms=100)
    return consumer.assignment()
