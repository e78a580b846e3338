"""Produce-then-consume round trips with real clients, shared by the security tests (TLS, SASL,
SCRAM) that differ only in the clients' connection settings."""

from __future__ import annotations

import asyncio
from typing import Any


def aiokafka_round_trip(common: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    """Produce `values` with acks=all and consume them back from the beginning (bounded: 30 s)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(**common, acks="all")
        await p.start()
        try:
            for v in values:
                await p.send_and_wait(topic, v)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, **common, auto_offset_reset="earliest")
        await c.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for m in c:
                    got.append(m.value)
                    if len(got) == len(values):
                        break
        finally:
            await c.stop()
        return got

    return asyncio.run(run())
