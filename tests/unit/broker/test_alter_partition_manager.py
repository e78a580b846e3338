"""AlterPartitionManager retries an ISR change until the controller answers or the proposal is
superseded (issue #20: a change not answered was dropped, leaving the leader unsure whether the
controller had applied it). No controller known, a controller that cannot be reached: retried;
a final answer: returned at once."""

from __future__ import annotations

from typing import Any

import pytest

import broker.alter_partition_manager as apm
from broker.alter_partition_manager import AlterPartitionManager, IsrChange
from broker.partition import alter_partition_retriable
from protocol.errors import ErrorCode


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apm, "RETRY_BACKOFF_MIN_S", 0.001)
    monkeypatch.setattr(apm, "RETRY_BACKOFF_MAX_S", 0.004)


def superseded_after(n: int, sent: list[Any]) -> Any:
    """Superseded once `n` requests have been tried (a LeaderAndIsr replaced the proposal)."""
    return lambda: len(sent) >= n


async def test_no_controller_is_retried_until_superseded() -> None:
    sent: list[Any] = []

    def controller() -> None:
        sent.append(1)  # asked once per attempt
        return None

    manager = AlterPartitionManager(1, lambda: 5, controller, request_timeout_ms=1000)
    try:
        assert await manager.submit(("t", 0), 1, [1, 2], 3, superseded_after(4, sent), alter_partition_retriable) is None
        assert len(sent) == 4
    finally:
        await manager.close()


async def test_an_unreachable_controller_is_retried_with_the_current_broker_epoch() -> None:
    epochs: list[int] = []

    def broker_epoch() -> int:
        epochs.append(len(epochs) + 5)  # re-registration gives a new epoch: each retry reads it
        return epochs[-1]

    manager = AlterPartitionManager(1, broker_epoch, lambda: (9, "127.0.0.1", 1), request_timeout_ms=1000)
    try:
        assert await manager.submit(("t", 0), 1, [1, 2], 3, superseded_after(3, epochs),
                                    alter_partition_retriable) is None
        assert epochs == [5, 6, 7]
    finally:
        await manager.close()


async def test_the_answer_after_retries_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[IsrChange | int] = [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER,
                                      ErrorCode.UNKNOWN_SERVER_ERROR, IsrChange(1, [1, 2], 4)]
    manager = AlterPartitionManager(1, lambda: 5, lambda: None, request_timeout_ms=1000)

    async def send_once(*args: Any) -> IsrChange | int:
        return answers.pop(0)

    monkeypatch.setattr(manager, "send_once", send_once)
    try:
        assert await manager.submit(("t", 0), 1, [1, 2], 3, lambda: False,
                                    alter_partition_retriable) == IsrChange(1, [1, 2], 4)
        assert not answers
    finally:
        await manager.close()


async def test_a_final_error_is_returned_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[IsrChange | int] = [ErrorCode.FENCED_LEADER_EPOCH, IsrChange(1, [1, 2], 4)]
    manager = AlterPartitionManager(1, lambda: 5, lambda: None, request_timeout_ms=1000)

    async def send_once(*args: Any) -> IsrChange | int:
        return answers.pop(0)

    monkeypatch.setattr(manager, "send_once", send_once)
    try:
        assert await manager.submit(("t", 0), 1, [1, 2], 3, lambda: False,
                                    alter_partition_retriable) == ErrorCode.FENCED_LEADER_EPOCH
        assert len(answers) == 1
    finally:
        await manager.close()
