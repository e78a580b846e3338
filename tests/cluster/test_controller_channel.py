"""ControllerChannelManager.answered, over real TCP: a failover waits for the brokers to answer its
first UpdateMetadata before its state machines keep the loop busy -- until they answered, or at
most the bound when a registered broker does not answer (paused)."""

from __future__ import annotations

import asyncio
import contextlib

from broker.network_client import NetworkClient, NetworkClientConfig
from controller.channel import ControllerChannelManager
from controller.zk.data import Broker, EndPoint
from protocol.messages import UpdateMetadataRequest
from tests.cluster.recording_broker import UPDATE_METADATA, RecordingBroker


def broker(broker_id: int, port: int) -> Broker:
    return Broker(broker_id, (EndPoint("127.0.0.1", port, "PLAINTEXT", "PLAINTEXT"),))


async def test_answered_waits_for_the_responses_and_is_bounded_by_a_silent_broker() -> None:
    answering = await RecordingBroker(1).start()
    silent_conns: list[asyncio.StreamWriter] = []

    async def accept_and_say_nothing(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        silent_conns.append(w)  # a paused broker: the connection is accepted, nothing is answered

    silent = await asyncio.start_server(accept_and_say_nothing, "127.0.0.1", 0)
    silent_port = silent.sockets[0].getsockname()[1]
    client = NetworkClient(NetworkClientConfig(client_id="controller-test", request_timeout_ms=30_000))
    channel = ControllerChannelManager(7, lambda: 1, client)
    try:
        channel.startup([broker(1, answering.port), broker(2, silent_port)])
        assert await channel.answered([1, 2], 0.01)  # nothing queued: answered at once
        for b in (1, 2):
            channel.send_request(b, UpdateMetadataRequest(controller_id=7, controller_epoch=1, broker_epoch=1,
                                                          ungrouped_partition_states=[], topic_states=[],
                                                          live_brokers=[]), 7)
        assert await channel.answered([1], 10)  # broker 1 answers
        assert len(answering.of(UPDATE_METADATA)) == 1
        assert not await channel.answered([1, 2], 0.3)  # broker 2 never does: bounded
    finally:
        await channel.shutdown()
        await client.close()
        for w in silent_conns:
            w.close()
        silent.close()
        with contextlib.suppress(Exception):
            await silent.wait_closed()
        await answering.stop()
