"""controller.zk.event_manager: one queue, processed in order, one event at a time even when the
processing awaits; clear_and_put preempts what was queued; a failing event does not stop the
queue; close stops after the running event."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import ClassVar

import pytest

from controller.zk.event_manager import (
    BrokerChange,
    ControllerEvent,
    ControllerEventManager,
    ControllerState,
    Expire,
    PartitionModifications,
    TopicChange,
)


@dataclass(eq=False)
class Step(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TopicChange
    name: str
    gate: asyncio.Event | None = None

    def __str__(self) -> str:
        return f"Step({self.name})"


class Recorder:
    def __init__(self) -> None:
        self.log: list[str] = []
        self.running = 0
        self.states: list[ControllerState] = []
        self.manager: ControllerEventManager | None = None

    async def process(self, event: ControllerEvent) -> None:
        self.running += 1
        assert self.running == 1, "two events ran at once"
        if self.manager is not None:
            self.states.append(self.manager.state)
        self.log.append(f"start {event}")
        if isinstance(event, Step) and event.gate is not None:
            await event.gate.wait()
        await asyncio.sleep(0)
        if isinstance(event, Step) and event.name == "boom":
            self.running -= 1
            raise RuntimeError("boom")
        self.log.append(f"end {event}")
        self.running -= 1

    def preempt(self, event: ControllerEvent) -> None:
        self.log.append(f"preempt {event}")


@pytest.fixture
async def manager():
    rec = Recorder()
    m = ControllerEventManager(1, rec)
    rec.manager = m
    m.start()
    yield m, rec
    await m.close()


async def test_events_run_in_order_one_at_a_time(manager):
    m, rec = manager
    gate = asyncio.Event()
    m.put(Step("a", gate))
    for name in "bcd":
        m.put(Step(name))
    await asyncio.sleep(0.01)
    assert rec.log == ["start Step(a)"]  # b waits for a
    gate.set()
    await asyncio.wait_for(m.wait_idle(), 5)
    assert [e for e in rec.log if e.startswith("end")] == [f"end Step({n})" for n in "abcd"]
    assert rec.states == [ControllerState.TopicChange] * 4
    assert m.state is ControllerState.Idle


async def test_clear_and_put_preempts_the_queued_events(manager):
    m, rec = manager
    gate = asyncio.Event()
    running = m.put(Step("running", gate))
    await running.await_processing()
    m.put(BrokerChange())
    m.put(PartitionModifications("t"))
    expire = m.clear_and_put(Expire())
    assert rec.log[-2:] == ["preempt BrokerChange", "preempt PartitionModifications(t)"]
    gate.set()
    await expire.await_processing()
    await asyncio.wait_for(m.wait_idle(), 5)
    assert [e for e in rec.log if e.startswith("start")] == ["start Step(running)", "start Expire"]


async def test_put_when_idle_runs_after_every_event_queued_until_the_queue_empties(manager):
    """The controller's own background work (the next batch of topic deletions) goes behind
    whatever events come in while the current one runs -- a new topic's TopicChange (issue
    #21) -- and the manager is not idle until it ran."""
    m, rec = manager
    gate = asyncio.Event()
    running = m.put(Step("a", gate))
    await running.await_processing()
    m.put_when_idle(Step("resume"))
    m.put(Step("b"))
    m.put(TopicChange())
    gate.set()
    await asyncio.wait_for(m.wait_idle(), 5)
    assert [e for e in rec.log if e.startswith("end")] == [
        "end Step(a)", "end Step(b)", "end TopicChange", "end Step(resume)"]
    m.put_when_idle(Step("now"))  # no event running: queued at once
    await asyncio.wait_for(m.wait_idle(), 5)
    assert rec.log[-1] == "end Step(now)"
    # preempted with the queue
    gate2 = asyncio.Event()
    await m.put(Step("c", gate2)).await_processing()
    m.put_when_idle(Step("later"))
    expire = m.clear_and_put(Expire())
    assert rec.log[-1] == "preempt Step(later)"
    gate2.set()
    await expire.await_processing()
    await asyncio.wait_for(m.wait_idle(), 5)
    assert "start Step(later)" not in rec.log


async def test_a_failing_event_is_logged_and_the_queue_goes_on(manager, caplog):
    m, rec = manager
    m.put(Step("boom"))
    m.put(TopicChange())
    await asyncio.wait_for(m.wait_idle(), 5)
    assert rec.log[-1] == "end TopicChange"
    assert any("Uncaught error processing event Step(boom)" in r.getMessage()
               for r in caplog.records if r.levelno == logging.ERROR)


async def test_close_preempts_what_is_queued_and_nothing_runs_after():
    rec = Recorder()
    m = ControllerEventManager(1, rec)
    gate = asyncio.Event()
    m.start()
    first = m.put(Step("first", gate))
    await first.await_processing()
    m.put(TopicChange())
    closing = asyncio.ensure_future(m.close())
    await asyncio.sleep(0.01)
    assert not closing.done()  # the running event finishes first
    gate.set()
    await asyncio.wait_for(closing, 5)
    assert rec.log == ["start Step(first)", "preempt TopicChange", "end Step(first)"]
