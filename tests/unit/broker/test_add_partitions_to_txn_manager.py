"""AddPartitionsToTxnManager's queueing and answers (Kafka's AddPartitionsToTxnManagerTest cases:
batching per coordinator node, one request in flight per node, the same transactional id queued
twice, the coordinator unknown, disconnections, an old coordinator without v4, top-level and
per-partition errors). The coordinator's side is a scripted stand-in for the NetworkClient: the
test decides each answer, so the queue's states between requests are observable; the real
client and coordinator are in tests/integration/test_txn_verification.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from broker.network_client import DisconnectError, UnsupportedApiVersionError
from protocol.errors import ErrorCode as E
from protocol.messages import AddPartitionsToTxnResponse
from protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)

TP = ("t", 0)


class ScriptedClient:
    """Records each request; each send waits for the test's answer (a response or an exception)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, Any, asyncio.Future[Any]]] = []
        self.arrived = asyncio.Event()

    def update_node(self, node_id: int, host: str, port: int) -> None:
        pass

    async def send(self, node_id: int, request: Any, *, timeout_ms: float | None = None) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.sent.append((node_id, request, fut))
        self.arrived.set()
        return await fut

    async def close(self) -> None:
        pass

    async def next_request(self) -> tuple[int, Any, asyncio.Future[Any]]:
        while len(self.sent) == 0 or self.sent[-1][2].done():
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 5)
        return self.sent[-1]


def manager(client: ScriptedClient, leader: int = 2) -> AddPartitionsToTxnManager:
    broker = SimpleNamespace(endpoint=lambda listener: ("127.0.0.1", 9000 + leader))
    cache = SimpleNamespace(
        partition=lambda topic, p: SimpleNamespace(leader=leader) if topic == "__transaction_state" else None,
        brokers={leader: broker})
    return AddPartitionsToTxnManager(cache, client, lambda tid: 0, inter_broker_listener="PLAINTEXT",  # type: ignore[arg-type]
                                     request_timeout_ms=1000, spawn=asyncio.ensure_future)


def answer(request: Any, error: int = E.NONE, by_id: dict[str, int] | None = None) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(error_code=0, results_by_transaction=[
        AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=[
            AddPartitionsToTxnTopicResult(name=topic.name, results_by_partition=[
                AddPartitionsToTxnPartitionResult(partition_index=p,
                                                  partition_error_code=(by_id or {}).get(t.transactional_id, error))
                for p in topic.partitions])
            for topic in t.topics])
        for t in request.transactions])


async def test_unknown_coordinator_is_coordinator_not_available() -> None:
    client = ScriptedClient()
    m = manager(client, leader=-1)
    assert await m.verify_transaction("a", 1, 0, [TP], False) == {TP: E.COORDINATOR_NOT_AVAILABLE}
    assert client.sent == []


async def test_one_request_in_flight_per_node_and_the_rest_batched() -> None:
    client = ScriptedClient()
    m = manager(client)
    a = asyncio.ensure_future(m.verify_transaction("a", 1, 0, [TP], False))
    node, first, fut = await client.next_request()
    assert (node, [(t.transactional_id, t.verify_only) for t in first.transactions]) == (2, [("a", True)])
    b = asyncio.ensure_future(m.verify_transaction("b", 2, 0, [TP], False))
    c = asyncio.ensure_future(m.verify_transaction("c", 3, 0, [TP, ("t", 1)], True))
    await asyncio.sleep(0)
    assert len(client.sent) == 1  # b and c wait for a's answer
    fut.set_result(answer(first))
    assert await a == {}
    _, second, fut2 = await client.next_request()
    assert [t.transactional_id for t in second.transactions] == ["b", "c"]
    fut2.set_result(answer(second, by_id={"b": E.TRANSACTION_ABORTABLE, "c": E.TRANSACTION_ABORTABLE}))
    # b's request version does not know TRANSACTION_ABORTABLE, c's does
    assert await b == {TP: E.INVALID_TXN_STATE}
    assert await c == {TP: E.TRANSACTION_ABORTABLE, ("t", 1): E.TRANSACTION_ABORTABLE}


async def test_the_same_transactional_id_queued_twice() -> None:
    client = ScriptedClient()
    m = manager(client)
    blocker = asyncio.ensure_future(m.verify_transaction("x", 9, 0, [TP], False))
    _, first, fut = await client.next_request()
    same = asyncio.ensure_future(m.verify_transaction("a", 1, 3, [TP], False))
    await asyncio.sleep(0)
    retry = asyncio.ensure_future(m.verify_transaction("a", 1, 3, [TP], False))  # same epoch: a retry
    assert await same == {TP: E.NETWORK_EXCEPTION}
    newer = asyncio.ensure_future(m.verify_transaction("a", 1, 4, [TP], False))  # fences the queued one
    assert await retry == {TP: E.INVALID_PRODUCER_EPOCH}
    assert await m.verify_transaction("a", 1, 2, [TP], False) == {TP: E.INVALID_PRODUCER_EPOCH}  # older: refused
    fut.set_result(answer(first))
    await blocker
    _, second, fut2 = await client.next_request()
    assert [(t.transactional_id, t.producer_epoch) for t in second.transactions] == [("a", 4)]
    fut2.set_result(answer(second, by_id={"a": E.PRODUCER_FENCED}))
    assert await newer == {TP: E.INVALID_PRODUCER_EPOCH}  # PRODUCER_FENCED as producers expect it


async def test_failed_requests() -> None:
    client = ScriptedClient()
    m = manager(client)
    for outcome, expected in (
        (DisconnectError("gone"), {TP: E.NETWORK_EXCEPTION}),
        (UnsupportedApiVersionError("no v4"), {}),  # an old coordinator: not verified, as Kafka
        (AddPartitionsToTxnResponse(error_code=E.CLUSTER_AUTHORIZATION_FAILED), {TP: E.INVALID_TXN_STATE}),
        (AddPartitionsToTxnResponse(error_code=E.NOT_COORDINATOR), {TP: E.NOT_COORDINATOR}),
    ):
        pending = asyncio.ensure_future(m.verify_transaction("a", 1, 0, [TP], False))
        _, _, fut = await client.next_request()
        if isinstance(outcome, Exception):
            fut.set_exception(outcome)
        else:
            fut.set_result(outcome)
        assert await pending == expected, outcome
    await m.shutdown()
    assert await m.verify_transaction("a", 1, 0, [TP], False) == {TP: E.COORDINATOR_NOT_AVAILABLE}
