"""The simulated network between the brokers, the controller stand-in and the producer.

A request travels as the Python object the broker's code built (no encoding: the codecs have
their own tests), after a seeded delay. What a real network does to it, from the seed:
delays (with rare long ones), a request lost (never processed) or its response lost (processed,
the sender times out), links cut between two nodes for a while, and a node that crashed refusing
connections. One connection's requests arrive in the order they were sent and their responses
come back in that order (TCP), as with NetworkClient's one connection per node; requests of
different connections race.

The sender sees exactly what NetworkClient raises: ConnectError (refused, unreachable),
RequestTimeoutError (no answer within the request timeout), DisconnectError (the peer died with
the request in flight).
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from broker.network_client import (
    ConnectError,
    DisconnectError,
    NetworkClientConfig,
    RequestTimeoutError,
)

# the node whose code is running: tasks and timers inherit it (see tests/sim/cluster.py)
CURRENT_NODE: contextvars.ContextVar[Any] = contextvars.ContextVar("sim_node", default=None)


@dataclass
class NetworkFaults:
    """Per message: the chance it is lost (request or response), and the delay distribution."""

    loss: float = 0.01
    min_delay_ms: float = 0.1
    mean_delay_ms: float = 1.0
    slow: float = 0.02  # chance of a long delay (a stalled connection)
    slow_delay_ms: float = 400.0


Handler = Callable[[Any, int | None], Awaitable[Any]]


class SimNetwork:
    def __init__(self, loop: asyncio.AbstractEventLoop, rng: random.Random, faults: NetworkFaults,
                 trace: Callable[[str], None]) -> None:
        self.loop = loop
        self.rng = rng
        self.faults = faults
        self.trace = trace
        self.handlers: dict[int, Handler] = {}  # node id -> how it serves a request (absent: down)
        self.contexts: dict[int, contextvars.Context] = {}  # node id -> the context its work runs in
        self.cut: set[frozenset[int]] = set()  # pairs of nodes that cannot reach each other
        self._next_arrival: dict[tuple[int, int], float] = {}  # (connection, dest) -> FIFO floor
        self._next_return: dict[tuple[int, int], float] = {}
        self._in_flight: dict[int, set[asyncio.Future[Any]]] = {}  # dest -> calls awaiting it
        self.on_handler_error: Callable[[int, Any, BaseException], None] | None = None

    # -- topology -------------------------------------------------------------------------------

    def up(self, node: int, handler: Handler, context: contextvars.Context) -> None:
        self.handlers[node] = handler
        self.contexts[node] = context

    def down(self, node: int) -> None:
        """The node crashed: its connections reset, so calls awaiting it fail (DisconnectError)."""
        self.handlers.pop(node, None)
        self.contexts.pop(node, None)
        for fut in self._in_flight.pop(node, set()):
            if not fut.done():
                fut.set_exception(DisconnectError(f"node {node} closed the connection"))

    def reachable(self, a: int, b: int) -> bool:
        return frozenset((a, b)) not in self.cut

    def _delay(self) -> float:
        f = self.faults
        if self.rng.random() < f.slow:
            return self.rng.uniform(f.slow_delay_ms / 4, f.slow_delay_ms) / 1000
        return (f.min_delay_ms + self.rng.expovariate(1 / f.mean_delay_ms)) / 1000

    # -- a call ---------------------------------------------------------------------------------

    async def call(self, src: int, dst: int, connection: int, request: Any, version: int | None,
                   timeout_ms: float) -> Any:
        loop = self.loop
        if dst not in self.handlers or not self.reachable(src, dst):
            await asyncio.sleep(self._delay())  # refused (down) or unreachable: fails quickly
            raise ConnectError(f"cannot connect from {src} to {dst}")
        fut: asyncio.Future[Any] = loop.create_future()
        self._in_flight.setdefault(dst, set()).add(fut)
        key = (connection, dst)
        arrive = max(loop.time() + self._delay(), self._next_arrival.get(key, 0.0))
        self._next_arrival[key] = arrive
        lost = self.rng.random() < self.faults.loss
        if not lost:
            loop.call_at(arrive, self._deliver, src, dst, key, request, version, fut)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_ms / 1000)
        except TimeoutError:
            raise RequestTimeoutError(f"request to {dst} timed out after {timeout_ms} ms") from None
        finally:
            self._in_flight.get(dst, set()).discard(fut)

    def _deliver(self, src: int, dst: int, key: tuple[int, int], request: Any, version: int | None,
                 fut: asyncio.Future[Any]) -> None:
        handler, context = self.handlers.get(dst), self.contexts.get(dst)
        if handler is None or context is None or not self.reachable(src, dst) or fut.done():
            return  # the sender times out (or was told of the crash)
        self.loop.create_task(self._serve(handler, src, dst, key, request, version, fut), context=context.copy())

    async def _serve(self, handler: Handler, src: int, dst: int, key: tuple[int, int], request: Any,
                     version: int | None, fut: asyncio.Future[Any]) -> None:
        try:
            response = await handler(request, version)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a request handler that raises is a bug: the run ends on it
            if self.on_handler_error is not None:
                self.on_handler_error(dst, request, e)
            raise
        if fut.done() or self.rng.random() < self.faults.loss or not self.reachable(src, dst):
            return  # the response is lost: the sender times out
        back = max(self.loop.time() + self._delay(), self._next_return.get(key, 0.0))
        self._next_return[key] = back

        def answer() -> None:
            if not fut.done() and dst in self.handlers:
                fut.set_result(response)

        self.loop.call_at(back, answer)


class SimClient:
    """NetworkClient's interface over the simulated network, for one node's one connection
    per peer (ReplicaManager's `client_factory`)."""

    _ids = 0

    def __init__(self, network: SimNetwork, src: int, config: NetworkClientConfig) -> None:
        SimClient._ids += 1
        self.connection = SimClient._ids
        self.network = network
        self.src = src
        self.config = config

    def update_node(self, node_id: int, host: str, port: int) -> None:
        pass

    def remove_node(self, node_id: int) -> None:
        pass

    async def send(self, node_id: int, request: Any, *, version: int | None = None,
                   timeout_ms: float | None = None) -> Any:
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        return await self.network.call(self.src, node_id, self.connection, request, version, timeout)

    async def close(self) -> None:
        pass
