"""Transactional scenarios through the two pure-Python clients, aiokafka 0.14 and kafka-python
3.0, for tests/integration/test_python_transactions.py (one broker) and
tests/cluster/test_python_transactions.py (three): commit and abort, a producer fenced by a
second one with the same transactional.id, the clients' own read_committed consumers (every
committed record once, no aborted one), and aiokafka's consume-transform-produce loop with
send_offsets_to_transaction. Each scenario returns what it observed; the tests assert on it.
Every client is closed by its scenario; every wait is bounded."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError as AioKafkaError

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import KafkaError as KafkaPythonError

WAIT_S = 60.0


@dataclass
class Outcome:
    committed: list[str] = field(default_factory=list)  # what the scenario committed
    aborted: list[str] = field(default_factory=list)  # what it aborted (or was fenced with)
    fenced_error: str | None = None  # the exception the fenced producer's commit raised


# -- aiokafka ---------------------------------------------------------------------------------------


async def aiokafka_commit_abort_fence(bootstrap: str, topic: str, tid: str) -> Outcome:
    """Commit, abort, commit over both partitions; then a second producer with the same id
    fences the first mid-transaction (its commit fails) and commits its own."""
    out = Outcome()
    first = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, enable_idempotence=True,
                             request_timeout_ms=30000)
    second = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, enable_idempotence=True,
                              request_timeout_ms=30000)
    await first.start()
    try:
        async with first.transaction():
            for i in range(4):
                await first.send_and_wait(topic, f"c1-{i}".encode(), partition=i % 2)
        out.committed += [f"c1-{i}" for i in range(4)]
        await first.begin_transaction()
        for i in range(3):
            await first.send_and_wait(topic, f"a1-{i}".encode(), partition=i % 2)
        await first.abort_transaction()
        out.aborted += [f"a1-{i}" for i in range(3)]
        async with first.transaction():
            await first.send_and_wait(topic, b"c2-0", partition=1)
        out.committed.append("c2-0")
        # fenced: the open transaction of `first` is aborted when `second` initialises
        await first.begin_transaction()
        await first.send_and_wait(topic, b"f-0", partition=0)
        out.aborted.append("f-0")
        await asyncio.wait_for(second.start(), WAIT_S)
        try:
            await first.commit_transaction()
        except AioKafkaError as e:
            out.fenced_error = type(e).__name__
        async with second.transaction():
            await second.send_and_wait(topic, b"s-0", partition=0)
        out.committed.append("s-0")
    finally:
        await asyncio.gather(first.stop(), second.stop(), return_exceptions=True)
    return out


async def aiokafka_read_committed(bootstrap: str, topic: str, partitions: int, expected: int) -> list[str]:
    """Every value a read_committed aiokafka consumer reads from the start of the partitions
    until its positions reach the last stable offsets (the end, once nothing is open) and it
    read `expected` values, bounded."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                got += [r.value.decode() for r in records]
            if len(got) >= expected:
                ends = await consumer.end_offsets(tps)  # read_committed: the LSOs
                positions = {tp: await consumer.position(tp) for tp in tps}
                if all(positions[tp] >= ends[tp] for tp in tps):
                    return got
        return got
    finally:
        await consumer.stop()


async def aiokafka_consume_transform_produce(bootstrap: str, source: str, sink: str, group: str, tid: str,
                                            count: int) -> tuple[list[str], dict[int, int]]:
    """Seed `source` (one partition) with `count` values, then copy them upper-cased to `sink`
    in transactions of at most 7 records with the consumed offsets sent to the transaction; the
    second transaction is aborted and its records consumed again from the committed offsets.
    Returns the sink's read_committed values and the group's committed offsets."""
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await plain.start()
    try:
        for i in range(count):
            await plain.send(source, f"m{i}".encode(), partition=0)
        await plain.flush()
    finally:
        await plain.stop()
    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", isolation_level="read_committed",
                                max_poll_records=7)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, request_timeout_ms=30000)
    await asyncio.gather(consumer.start(), producer.start())
    transactions = 0
    try:
        done = 0
        deadline = time.monotonic() + WAIT_S
        while done < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500, max_records=7)
            records = [r for rs in batches.values() for r in rs]
            if not records:
                continue
            transactions += 1
            await producer.begin_transaction()
            for r in records:
                await producer.send(sink, r.value.upper(), partition=0)
            offsets = {tp: rs[-1].offset + 1 for tp, rs in batches.items() if rs}
            await producer.send_offsets_to_transaction(offsets, group)
            if transactions == 2:
                await producer.abort_transaction()
                for tp in offsets:  # consume the aborted records again
                    committed = await consumer.committed(tp)
                    consumer.seek(tp, committed if committed is not None else 0)
                continue
            await producer.commit_transaction()
            done += len(records)
        # the last commit's offsets become committed when its marker reaches the group's
        # partition, after EndTxn was answered (as in Kafka): wait for that, bounded
        while True:
            committed_offsets = {tp.partition: await consumer.committed(tp) for tp in consumer.assignment()}
            if sum(o or 0 for o in committed_offsets.values()) >= count or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
    finally:
        await asyncio.gather(consumer.stop(), producer.stop(), return_exceptions=True)
    return await aiokafka_read_committed(bootstrap, sink, 1, count), committed_offsets


# -- kafka-python -----------------------------------------------------------------------------------


def kafka_python_commit_abort_fence(bootstrap: str, topic: str, tid: str) -> Outcome:
    """As the aiokafka scenario, with kafka-python's KafkaProducer (blocking calls)."""
    out = Outcome()
    settings = dict(bootstrap_servers=bootstrap, transactional_id=tid, request_timeout_ms=30000,
                    max_block_ms=int(WAIT_S * 1000))
    first = KafkaProducer(**settings)
    second = None
    try:
        first.init_transactions()
        first.begin_transaction()
        for i in range(4):
            first.send(topic, f"k1-{i}".encode(), partition=i % 2)
        first.commit_transaction()
        out.committed += [f"k1-{i}" for i in range(4)]
        first.begin_transaction()
        for i in range(3):
            first.send(topic, f"ka-{i}".encode(), partition=i % 2).get(timeout=WAIT_S)
        first.abort_transaction()
        out.aborted += [f"ka-{i}" for i in range(3)]
        first.begin_transaction()
        first.send(topic, b"k2-0", partition=1)
        first.commit_transaction()
        out.committed.append("k2-0")
        first.begin_transaction()
        first.send(topic, b"kf-0", partition=0).get(timeout=WAIT_S)
        out.aborted.append("kf-0")
        second = KafkaProducer(**settings)
        second.init_transactions()
        try:
            first.commit_transaction()
        except KafkaPythonError as e:
            out.fenced_error = type(e).__name__
        second.begin_transaction()
        second.send(topic, b"ks-0", partition=0)
        second.commit_transaction()
        out.committed.append("ks-0")
    finally:
        first.close(timeout=5)
        if second is not None:
            second.close(timeout=5)
    return out


def kafka_python_read_committed(bootstrap: str, topic: str, partitions: Sequence[int], expected: int) -> list[str]:
    """A read_committed kafka-python consumer from the start until it has read `expected`
    values and reached the end (the last stable offsets), bounded."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tps = [KTopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.value.decode() for r in records]
            if len(got) >= expected:
                ends = consumer.end_offsets(tps)
                if all(consumer.position(tp) >= ends[tp] for tp in tps):
                    return got
        return got
    finally:
        consumer.close()
