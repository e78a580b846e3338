"""Produce-then-consume round trips with real clients, shared by the security tests (TLS, SASL,
SCRAM) that differ only in the clients' connection settings."""

from __future__ import annotations

import asyncio
import time
import warnings
from typing import Any

from confluent_kafka import Consumer, Producer

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer


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


def kafka_python_round_trip(common: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    """Produce `values` with acks=all, one acknowledged send at a time, and consume them back from
    the beginning (bounded: 20 s without a record)."""
    p = KafkaProducer(**common, acks="all")
    try:
        for v in values:
            p.send(topic, v).get(timeout=30)
    finally:
        p.close()
    c = KafkaConsumer(topic, **common, auto_offset_reset="earliest", consumer_timeout_ms=20000)
    try:
        return [m.value for m, _ in zip(c, values, strict=False)]
    finally:
        c.close()


def rdkafka_round_trip(conf: dict[str, str], topic: str, values: list[bytes],
                       consumer: dict[str, Any] | None = None) -> list[bytes]:
    """Produce `values` (linger 5 ms, flushed) and consume them back in a group from the earliest
    offset (bounded: 60 s); `consumer` adds consumer-only settings (fetch sizes)."""
    p = Producer(conf | {"linger.ms": 5})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0
    return rdkafka_read(conf, topic, len(values), consumer)


def rdkafka_read(conf: dict[str, str], topic: str, n: int, consumer: dict[str, Any] | None = None) -> list[bytes]:
    """The first `n` records of `topic`, read in a group from the earliest offset (bounded: 60 s)."""
    c = Consumer(conf | {"group.id": f"g-{topic}", "auto.offset.reset": "earliest"} | (consumer or {}))
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got
