"""broker.network.KafkaConnection's response path on a fake transport: responses leave in
request order, and a response with nothing unsent before it is handed to the transport by its
own request's task, not a loop iteration later by the task's done callback (a follower's fetch
response woken by an append is the replication round's critical path, issue #20 §5)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from types import SimpleNamespace
from typing import Any

from broker.network import KafkaConnection
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

    def __init__(self) -> None:
        self.config = {"socket.request.max.bytes": 1 << 20, "queued.max.response.bytes": 1 << 20,
                       "socket.request.receive.timeout.ms": 0, "queued.max.request.bytes": -1}
        self.connections: set[Any] = set()


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

    ctx = SimpleNamespace(header=SimpleNamespace(correlation_id=corr, request_api_key=API_VERSIONS,
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

    ctx = SimpleNamespace(header=SimpleNamespace(correlation_id=corr, request_api_key=API_VERSIONS,
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


async def test_an_eager_handler_that_waits_goes_on_in_a_task_and_keeps_request_order() -> None:
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
    """The task that goes on with a handling started outside it passes the cancellation in."""
    conn, transport = eager_connection()
    seen: list[str] = []
    start_eagerly(conn, 1, asyncio.Event(), seen)
    (task,) = conn.pending
    conn.connection_lost(None)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert task.cancelled() and seen == ["1 started", "1 cancelled"] and transport.corrs == []


async def test_an_eager_handler_failing_at_once_closes_the_connection() -> None:
    conn, transport = eager_connection()
    closed: list[bool] = []
    conn.close = lambda: closed.append(True)  # type: ignore[method-assign]
    start_eagerly(conn, -1, None, [])
    assert closed == [True] and transport.corrs == [] and not conn.pending
