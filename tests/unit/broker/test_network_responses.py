"""broker.network.KafkaConnection's response path on a fake transport: responses leave in
request order, and a response with nothing unsent before it is handed to the transport by its
own request's task, not a loop iteration later by the task's done callback; an eager handling
(Produce, Fetch) needs no task at all and is answered inside the purgatory call that completes
what it waits for (a follower's fetch response woken by an append is the replication round's
critical path, issue #20 §5)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from types import SimpleNamespace
from typing import Any

from broker.network import MAX_IN_FLIGHT, KafkaConnection
from broker.purgatory import DelayedFuture, DelayedOperationPurgatory
from broker.quota.quotas import ClientQuotas
from protocol.messages import ApiVersionsResponse

API_VERSIONS = 18


class FakeTransport:
    def __init__(self) -> None:
        self.tasks: list[Any] = []  # every request's task
        self.written: list[tuple[int, bool]] = []  # (correlation id, its task done at the write)

    def writelines(self, chunks: list[Any]) -> None:
        frame = b"".join(bytes(c) for c in chunks)
        corr = struct.unpack_from(">i", frame, 4)[0]
        task = next(t for t in self.tasks if t.corr == corr)
        self.written.append((corr, task.done()))

    def get_extra_info(self, name: str) -> Any:
        return None

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


class FakeServer:
    zk_mode = False
    request_metrics = None  # metrics.port off
    sasl = None  # no SASL listeners

    def __init__(self) -> None:
        self.config = {"socket.request.max.bytes": 1 << 20, "queued.max.response.bytes": 1 << 20,
                       "socket.request.receive.timeout.ms": 0, "queued.max.request.bytes": -1}
        self.connections: set[Any] = set()
        self.quotas = ClientQuotas(11, 1, 11, 1)  # none set: nothing recorded or throttled


def connection() -> KafkaConnection:
    server = FakeServer()
    conn = KafkaConnection(server, SimpleNamespace(name="PLAINTEXT"))  # type: ignore[arg-type]
    conn.connection_made(FakeTransport())  # type: ignore[arg-type]
    return conn


def start(conn: KafkaConnection, corr: int, answer: asyncio.Event) -> asyncio.Task[Any]:
    """What _dispatch does for a request, with a handler answering once `answer` is set."""

    async def handle(ctx: Any, request: Any) -> ApiVersionsResponse:
        await answer.wait()
        return ApiVersionsResponse(error_code=0, api_keys=[])

    ctx = SimpleNamespace(started=0.0, throttle_ms=0, header=SimpleNamespace(correlation_id=corr, request_api_key=API_VERSIONS,
                                                 request_api_version=3))
    task = asyncio.ensure_future(conn._process(ctx, handle, None))  # type: ignore[arg-type]
    task.corr = corr  # type: ignore[attr-defined]
    conn.transport.tasks.append(task)  # type: ignore[union-attr]
    conn.pending.append(task)
    task.add_done_callback(conn._on_done)
    return task


async def test_a_response_at_the_head_goes_out_from_its_own_task_and_order_is_kept() -> None:
    conn = connection()
    transport = conn.transport
    assert isinstance(transport, FakeTransport)
    first, second, third = asyncio.Event(), asyncio.Event(), asyncio.Event()
    tasks = [start(conn, 1, first), start(conn, 2, second), start(conn, 3, third)]
    second.set()  # finished before the first: it waits for it
    await asyncio.sleep(0.01)
    assert transport.written == []
    first.set()  # written by its own task (not yet done), then the second by the done callback
    await asyncio.sleep(0.01)
    assert transport.written == [(1, False), (2, True)]
    third.set()  # nothing before it unsent any more: its own task writes it
    await asyncio.gather(*tasks)
    await asyncio.sleep(0)
    assert transport.written == [(1, False), (2, True), (3, False)]
    assert conn.unsent == 0 and not conn.outgoing and not conn.pending


class CorrelationTransport(FakeTransport):
    """The correlation ids of the frames written, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.corrs: list[int] = []

    def writelines(self, chunks: list[Any]) -> None:
        frame = b"".join(bytes(c) for c in chunks)
        pos = 0
        while pos < len(frame):
            size, corr = struct.unpack_from(">ii", frame, pos)
            self.corrs.append(corr)
            pos += 4 + size


def eager_connection() -> tuple[KafkaConnection, CorrelationTransport]:
    conn = KafkaConnection(FakeServer(), SimpleNamespace(name="PLAINTEXT"))  # type: ignore[arg-type]
    transport = CorrelationTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def start_eagerly(conn: KafkaConnection, corr: int, answer: asyncio.Event | None, seen: list[str]) -> None:
    """What _dispatch does for an eager handler: answers at once, or once `answer` is set."""

    async def handle(ctx: Any, request: Any) -> ApiVersionsResponse:
        seen.append(f"{corr} started")
        try:
            if answer is not None:
                await answer.wait()
        except asyncio.CancelledError:
            seen.append(f"{corr} cancelled")
            raise
        if corr < 0:
            raise RuntimeError("handler bug")
        return ApiVersionsResponse(error_code=0, api_keys=[])

    ctx = SimpleNamespace(started=0.0, throttle_ms=0, header=SimpleNamespace(correlation_id=corr, request_api_key=API_VERSIONS,
                                                 request_api_version=3))
    conn._start_eagerly(conn._process(ctx, handle, None))  # type: ignore[arg-type]


async def test_an_eager_handler_that_does_not_wait_is_answered_within_the_read_callback() -> None:
    """No task and no loop iteration between a fetch answered from the page cache and its
    response being handed to the transport (issue #20 §5)."""
    conn, transport = eager_connection()
    seen: list[str] = []
    start_eagerly(conn, 1, None, seen)
    assert seen == ["1 started"] and transport.corrs == [1]  # before any await of ours
    assert not conn.pending and not conn.outgoing and conn.unsent == 0


async def test_an_eager_handler_that_waits_goes_on_and_keeps_request_order() -> None:
    conn, transport = eager_connection()
    seen: list[str] = []
    first = asyncio.Event()
    start_eagerly(conn, 1, first, seen)  # waits: goes on in a task
    start_eagerly(conn, 2, None, seen)  # done at once, but behind the first
    assert seen == ["1 started", "2 started"] and transport.corrs == []
    first.set()
    await asyncio.wait_for(asyncio.gather(*[f for f in conn.pending]), 5)
    await asyncio.sleep(0)
    assert transport.corrs == [1, 2]
    assert not conn.pending and not conn.outgoing and conn.unsent == 0


async def test_a_waiting_eager_handler_is_cancelled_with_its_connection() -> None:
    """The cancellation reaches the handling where it waits, as a task's would."""
    conn, transport = eager_connection()
    seen: list[str] = []
    start_eagerly(conn, 1, asyncio.Event(), seen)
    (slot,) = conn.pending
    conn.connection_lost(None)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(slot, 5)
    assert slot.cancelled() and seen == ["1 started", "1 cancelled"] and transport.corrs == []


async def test_an_eager_handler_failing_at_once_closes_the_connection() -> None:
    conn, transport = eager_connection()
    closed: list[bool] = []
    conn.close = lambda: closed.append(True)  # type: ignore[method-assign]
    start_eagerly(conn, -1, None, [])
    assert closed == [True] and transport.corrs == [] and not conn.pending


class Parked(DelayedFuture[str]):
    """A parked operation (as DelayedProduce / DelayedFetch) completed by its key."""

    def __init__(self) -> None:
        super().__init__(60_000)
        self.ready = False

    def try_complete(self) -> bool:
        return self.ready and self.force_complete()

    def complete_value(self) -> str:
        return "done"


def start_parked(conn: KafkaConnection, corr: int, purgatory: DelayedOperationPurgatory[Parked], key: str,
                 seen: list[str], fail: bool = False) -> Parked:
    """What _dispatch does for an eager handler that parks in `purgatory` under `key`."""
    op = Parked()

    async def handle(ctx: Any, request: Any) -> ApiVersionsResponse:
        purgatory.try_complete_else_watch(op, [key])
        try:
            seen.append(f"{corr} {await op.future}")
        except asyncio.CancelledError:
            seen.append(f"{corr} cancelled")
            raise
        if fail:
            raise RuntimeError("handler bug after the wait")
        return ApiVersionsResponse(error_code=0, api_keys=[])

    ctx = SimpleNamespace(started=0.0, throttle_ms=0, header=SimpleNamespace(correlation_id=corr, request_api_key=API_VERSIONS,
                                                 request_api_version=3))
    conn._start_eagerly(conn._answer(ctx, handle, None))  # type: ignore[arg-type]
    return op


def complete(purgatory: DelayedOperationPurgatory[Parked], key: str, *ops: Parked) -> None:
    for op in ops:
        op.ready = True
    assert purgatory.check_and_complete(key) == len(ops)


async def test_a_parked_eager_handling_is_answered_inside_the_call_that_completes_it() -> None:
    """A follower's fetch response goes out within the append that completes its DelayedFetch,
    a produce response within the follower fetch that moves the high watermark: no task, no
    loop iteration in between (issue #20 §5), as Kafka's delayed operations answer inline."""
    conn, transport = eager_connection()
    purgatory: DelayedOperationPurgatory[Parked] = DelayedOperationPurgatory("p")
    seen: list[str] = []
    ops = [start_parked(conn, 1, purgatory, "tp", seen)]
    assert seen == [] and transport.corrs == [] and len(conn.pending) == 1
    complete(purgatory, "tp")  # nothing ready: nothing answered
    assert purgatory.watched_for_key("tp") == 1 and transport.corrs == []
    complete(purgatory, "tp", *ops)
    assert seen == ["1 done"] and transport.corrs == [1]  # before this coroutine awaited anything
    assert not conn.pending and not conn.outgoing and conn.unsent == 0


async def test_an_inline_answer_waits_for_the_responses_before_it() -> None:
    conn, transport = eager_connection()
    purgatory: DelayedOperationPurgatory[Parked] = DelayedOperationPurgatory("p")
    seen: list[str] = []
    first = asyncio.Event()
    start_eagerly(conn, 1, first, seen)  # waits on a plain future (resumed by its callback)
    op2 = start_parked(conn, 2, purgatory, "tp", seen)
    complete(purgatory, "tp", op2)
    assert seen == ["1 started", "2 done"] and transport.corrs == []  # finished, behind the first
    first.set()
    await asyncio.wait_for(asyncio.gather(*list(conn.pending)), 5)
    await asyncio.sleep(0)
    assert transport.corrs == [1, 2] and not conn.pending and conn.unsent == 0


async def test_a_driven_handling_cancelled_with_its_connection_drops_its_parked_operation() -> None:
    conn, transport = eager_connection()
    purgatory: DelayedOperationPurgatory[Parked] = DelayedOperationPurgatory("p")
    seen: list[str] = []
    op = start_parked(conn, 1, purgatory, "tp", seen)
    (slot,) = conn.pending
    conn.connection_lost(None)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(slot, 5)
    await asyncio.sleep(0)  # the operation's own done callback
    assert slot.cancelled() and seen == ["1 cancelled"] and transport.corrs == []
    assert op.is_completed and purgatory.delayed == 0  # not left to time out
    op.ready = True
    assert purgatory.check_and_complete("tp") == 0 and seen == ["1 cancelled"]


async def test_a_handling_failing_after_an_inline_resume_closes_its_connection_only() -> None:
    """The completing call (another request's handling) goes on unharmed."""
    conn, transport = eager_connection()
    closed: list[bool] = []
    conn.close = lambda: closed.append(True)  # type: ignore[method-assign]
    purgatory: DelayedOperationPurgatory[Parked] = DelayedOperationPurgatory("p")
    seen: list[str] = []
    op = start_parked(conn, 1, purgatory, "tp", seen, fail=True)
    complete(purgatory, "tp", op)  # does not raise
    assert seen == ["1 done"] and closed == [True] and transport.corrs == []


async def test_held_back_requests_are_not_dispatched_inside_an_inline_answer() -> None:
    """Frames read while the connection was muted (MAX_IN_FLIGHT requests pending) are
    dispatched a loop iteration after the inline answer that unmutes it, not inside it: that
    would run this client's next request in the middle of another request's state change (the
    follower fetch moving the high watermark)."""
    conn, transport = eager_connection()
    purgatory: DelayedOperationPurgatory[Parked] = DelayedOperationPurgatory("p")
    seen: list[str] = []
    ops = [start_parked(conn, corr, purgatory, "tp", seen) for corr in range(MAX_IN_FLIGHT)]
    conn._update_reading()
    assert conn.read_paused
    parsed: list[int] = []
    conn._parse = lambda: parsed.append(len(conn.buffer))  # type: ignore[method-assign]
    conn.buffer += struct.pack(">i", 8) + bytes(8)  # a request held back while muted
    complete(purgatory, "tp", *ops)
    assert transport.corrs == list(range(MAX_IN_FLIGHT)) and not conn.read_paused
    assert parsed == []  # not inside check_and_complete
    await asyncio.sleep(0)
    assert parsed == [12]


async def test_throttle_time_starts_when_the_throttled_response_is_sent() -> None:
    """KIP-219: a throttled request mutes its connection at once, but the throttle time runs
    from when its response is handed to the transport, not from when it was computed: a
    response held back by a paused transport starts no timer until it goes out."""
    conn = connection()
    transport = conn.transport
    assert isinstance(transport, FakeTransport)

    async def handle(ctx: Any, request: Any) -> ApiVersionsResponse:
        ctx.throttle_ms = 1000  # what RequestContext.record_quota leaves for the response
        conn.throttle()
        return ApiVersionsResponse(error_code=0, api_keys=[])

    ctx = SimpleNamespace(started=0.0, throttle_ms=0, header=SimpleNamespace(
        correlation_id=7, request_api_key=API_VERSIONS, request_api_version=3))
    conn.pause_writing()  # the client does not read: the response cannot be sent yet
    task = asyncio.ensure_future(conn._process(ctx, handle, None))  # type: ignore[arg-type]
    task.corr = 7  # type: ignore[attr-defined]
    transport.tasks.append(task)
    conn.pending.append(task)
    task.add_done_callback(conn._on_done)
    await task
    await asyncio.sleep(0.05)
    assert transport.written == [] and conn.read_paused and conn.throttle_timer is None
    sent_at = asyncio.get_running_loop().time()
    conn.resume_writing()
    assert transport.written == [(7, True)]
    assert conn.throttle_timer is not None and conn.read_paused
    assert sent_at + 0.99 <= conn.throttle_timer.when() <= sent_at + 1.05
    conn.throttle_timer.cancel()
