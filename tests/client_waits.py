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


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int, timeout_s: float = 60.0) -> None:
    """Read ``count`` records of ``topic`` from the earliest as a member of ``group``, commit
    their offsets and leave: the group is then Empty with those offsets committed."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        seen, deadline = 0, time.monotonic() + timeout_s
        while seen < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"group {group} read {seen} of {count} records of {topic} in {timeout_s} s")
            seen += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
        consumer.commit()
    finally:
        consumer.close()
