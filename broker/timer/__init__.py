"""Kafka's hierarchical timing wheel and its asyncio-driven SystemTimer (DESIGN §5).

Timeouts for delayed operations: O(1) cancel, O(levels) insert, and a time queue that holds
buckets, not tasks. See `timing_wheel` for the data structure and `system_timer` for how the
event loop drives it.
"""

from broker.timer.system_timer import SystemTimer, monotonic_ms
from broker.timer.timing_wheel import (
    CallbackTimerTask,
    DelayQueue,
    TaskCounter,
    TimerTask,
    TimerTaskEntry,
    TimerTaskList,
    TimingWheel,
)

__all__ = [
    "CallbackTimerTask",
    "DelayQueue",
    "SystemTimer",
    "TaskCounter",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "monotonic_ms",
]
