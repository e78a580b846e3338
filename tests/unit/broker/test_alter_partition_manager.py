"""AlterPartitionManager's in-flight bookkeeping: a proposal that cannot be sent (no controller
known, e.g. between a controller's death and its successor's UpdateMetadata) must not leave the
partition marked in flight, or its leader would never change its ISR again."""

from __future__ import annotations

from broker.alter_partition_manager import AlterPartitionManager
from protocol.errors import ErrorCode


async def test_no_controller_answers_not_controller_and_frees_the_partition() -> None:
    manager = AlterPartitionManager(1, lambda: 5, lambda: None, request_timeout_ms=1000)
    try:
        manager.in_flight.add(("t", 0))  # as ReplicaManager._alter_isr marks it before the task runs
        assert await manager.submit(("t", 0), 1, [1, 2], 3) == ErrorCode.NOT_CONTROLLER
        assert ("t", 0) not in manager.in_flight
    finally:
        await manager.close()


async def test_an_unreachable_controller_frees_the_partition() -> None:
    manager = AlterPartitionManager(1, lambda: 5, lambda: (9, "127.0.0.1", 1), request_timeout_ms=1000)
    try:
        assert await manager.submit(("t", 0), 1, [1, 2], 3) == ErrorCode.REQUEST_TIMED_OUT
        assert ("t", 0) not in manager.in_flight
    finally:
        await manager.close()
