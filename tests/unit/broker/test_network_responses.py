"""broker.network.KafkaConnection's response path on a fake transport: responses leave in
request order, and a response with nothing unsent before it is handed to the transport by its
own request's task, not a loop iteration later by the task's done callback (a follower's fetch
response woken by an append is the replication round's critical path, issue #20 §5)."""

from __future__ import annotations

import asyncio
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
