"""The systems of the benchmarks behind one interface: Odradek and Apache Kafka 3.9 (both through
confluent-kafka, reusing `odradek perf`'s measuring functions), Redis Streams (redis-py) and NATS
JetStream (nats-py). Each method runs one workload and returns how many records and bytes it moved
in how many seconds; the caller reads the server's CPU time around it (`cpu_seconds()`).

How the Kafka workload maps onto the peers:

  partitions  N partitions of one topic = N Redis streams / N JetStream streams (one subject
              each). A producer sends each batch of records to one of them in turn, as
              librdkafka's sticky partitioner does for records without keys; a consumer reads
              all N.
  batching    Redis: pipelines of PIPELINE XADDs, one round trip each; NATS: asynchronous
              publishes with up to nats-py's 4,000 PubAcks outstanding. Odradek: librdkafka
              with linger.ms=5, batch.size=1 MiB.
  acks        One node has no followers, so acks=1 and acks=all promise the same: the record is
              in the server's log (page cache; fsync later). The peers' replies promise exactly
              that (an XADD reply comes after the AOF write(), fsync'd every second; a PubAck
              after the file store write), so for both settings every record's reply is waited
              for, pipelined as above. Waiting for each reply before sending the next record
              would measure round trips, not the server, and librdkafka does not do it either.
              The peers run both rows anyway, so a difference between them is noise.
  consume     Odradek: assign all partitions, no group (nothing committed). Redis: XREAD COUNT
              over all N streams. NATS: an ephemeral pull consumer per stream, AckPolicy.NONE,
              batches fetched round-robin.
  both        Producer and consumer at once, the consumer started first on an empty
              topic/stream; timed until the consumer has every record.
  e2e         Records carry their send time (perf_counter_ns); one producer at a fixed rate
              (Redis: one XADD per record; NATS: publish_async), one consumer (Redis: XREAD
              BLOCK; NATS: a push consumer), in one process.
"""

from __future__ import annotations

import asyncio
import random
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clients.perf_run import payload, run_consume, run_e2e, run_produce
from clients.perf_stats import LatencyRecorder, LatencyStats, sampling_for
from tests.bench.peers import NatsServer, RedisServer, cpu_seconds
from tests.broker_process import BrokerProcess

PIPELINE = 1000  # records per Redis pipeline / per sticky NATS batch
FETCH = 10_000  # records per consumer read
TS = struct.Struct(">q")


@dataclass(frozen=True)
class Run:
    records: int
    bytes: int
    seconds: float


@dataclass(frozen=True)
class Latency:
    stats: LatencyStats
    sent: int
    received: int


class System:
    name = ""

    def start(self, workdir: Path) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        raise NotImplementedError

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def prepare(self, key: str, partitions: int) -> None:
        """Create the topic/streams for key (outside the measured window)."""

    def produce(self, key: str, n: int, size: int, partitions: int, acks: str) -> Run:
        raise NotImplementedError

    def consume(self, key: str, n: int, size: int, partitions: int) -> Run:
        """Read the n records a previous produce(key, ...) wrote."""
        raise NotImplementedError

    def produce_consume(self, key: str, n: int, size: int, partitions: int, acks: str) -> Run:
        raise NotImplementedError

    def e2e(self, key: str, rate: float, n: int, size: int) -> Latency:
        raise NotImplementedError

    def drop(self, key: str, partitions: int) -> None:
        """Free what a workload wrote (its data is not needed again)."""

    def e2e_row(self, key: str, rate: float, n: int, size: int) -> dict[str, Any]:
        """One measured end-to-end run (`e2e` with the server's CPU around it), as the raw JSON
        row both side-by-side benches publish; the topic is dropped afterwards."""
        cpu0 = self.cpu_seconds()
        lat = self.e2e(key, rate, n, size)
        cpu = self.cpu_seconds() - cpu0
        st = lat.stats
        self.drop(key, 1)
        return {"system": self.name, "rate": rate, "sent": lat.sent, "received": lat.received,
                "avg_ms": st.avg_ms, "max_ms": st.max_ms, "p50_ms": st.p50, "p95_ms": st.p95,
                "p99_ms": st.p99, "p999_ms": st.p999, "broker_cpu_s": cpu}


class Odradek(System):
    name = "Odradek"
    props = {"linger.ms": 5, "batch.size": 1 << 20, "enable.idempotence": False}

    def __init__(self) -> None:
        self.broker: BrokerProcess | None = None

    def start(self, workdir: Path) -> None:
        # Kafka's default checkpoint interval, and groups that form at once as in the reference
        # Kafka's single-node settings (ConsumerPerformance joins a group)
        self.broker = BrokerProcess(workdir / "odradek",
                                    overrides=["log.flush.offset.checkpoint.interval.ms=60000",
                                               "group.initial.rebalance.delay.ms=0"])
        self.broker.start()

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()

    @property
    def pid(self) -> int:
        assert self.broker is not None and self.broker.proc is not None
        return self.broker.proc.pid

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None
        return self.broker.bootstrap

    def prepare(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            fut.result(30)
        # Kafka answers CreateTopics once the controller has committed the topic; the broker's
        # metadata cache learns it a moment later (as Kafka's own TestUtils.createTopic, wait
        # until Metadata shows every partition with a leader)
        deadline = time.monotonic() + 30
        while True:
            meta = admin.list_topics(topic, timeout=10).topics.get(topic)
            if (meta is not None and meta.error is None and len(meta.partitions) == partitions
                    and all(p.leader >= 0 for p in meta.partitions.values())):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} has no leaders 30 s after CreateTopics")
            time.sleep(0.05)

    def drop(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        for fut in admin.delete_topics([topic]).values():
            fut.result(30)

    def produce(self, key: str, n: int, size: int, partitions: int, acks: str) -> Run:
        r = run_produce(self.bootstrap, key, n, size, acks=acks, props=self.props, timeout_s=30)
        if r.failed:
            raise RuntimeError(f"{r.failed} records not acknowledged: {r.first_error}")
        return Run(r.records, r.bytes, r.elapsed_s)

    def consume(self, key: str, n: int, size: int, partitions: int) -> Run:
        r = run_consume(self.bootstrap, key, n, timeout_s=30)
        if r.records != n:
            raise RuntimeError(f"consumed {r.records} of {n}")
        return Run(r.records, r.bytes, r.elapsed_s)

    def produce_consume(self, key: str, n: int, size: int, partitions: int, acks: str) -> Run:
        got: list[Any] = []
        reader = _Thread(lambda: got.append(run_consume(self.bootstrap, key, n, timeout_s=30)))
        start = time.time()
        r = run_produce(self.bootstrap, key, n, size, acks=acks, props=self.props, timeout_s=30)
        reader.result(120)
        c = got[0]
        if r.failed or c.records != n:
            raise RuntimeError(f"produced {r.records}, consumed {c.records} of {n}")
        return Run(n, r.bytes, c.end - start)

    def e2e(self, key: str, rate: float, n: int, size: int) -> Latency:
        r = run_e2e(self.bootstrap, key, rate, n, size, acks="1", timeout_s=30)
        return Latency(r.latency, r.sent, r.received)


class Kafka(Odradek):
    """Apache Kafka 3.9 (tests/compat/reference_kafka.py, one KRaft node) with the heap and
    collector `kafka-server-start.sh` gives it, driven by the same librdkafka functions as
    Odradek: every workload method is Odradek's, only the server differs."""

    name = "Kafka"
    # kafka-server-start.sh's KAFKA_HEAP_OPTS and kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS
    JVM = ("-Xmx1g", "-Xms1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
           "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
           "-Djava.awt.headless=true")

    def __init__(self) -> None:
        super().__init__()
        self.kafka: Any = None

    def start(self, workdir: Path) -> None:
        from tests.compat.reference_kafka import ReferenceKafka

        self.kafka = ReferenceKafka(workdir / "kafka", jvm_args=self.JVM)
        self.kafka.start(timeout=120)

    def stop(self) -> None:
        if self.kafka is not None:
            self.kafka.stop()

    @property
    def pid(self) -> int:
        assert self.kafka is not None
        return self.kafka.pid()

    @property
    def bootstrap(self) -> str:
        assert self.kafka is not None
        return self.kafka.bootstrap


class _Thread(threading.Thread):
    """Runs fn at once; result() joins and re-raises its exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.fn()
        except BaseException as e:
            self.error = e

    def result(self, timeout: float) -> None:
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError("worker thread did not finish")
        if self.error is not None:
            raise self.error


def pace(start: float, i: int, rate: float) -> None:
    """Sleep until record i of a run at `rate` records/s is due."""
    ahead = start + i / rate - time.perf_counter()
    if ahead > 0:
        time.sleep(ahead)


class Redis(System):
    name = "Redis"

    def __init__(self) -> None:
        self.server: RedisServer | None = None

    def start(self, workdir: Path) -> None:
        self.server = RedisServer(workdir / "redis")
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    @property
    def pid(self) -> int:
        assert self.server is not None
        return self.server.pid

    def client(self) -> Any:
        import redis

        assert self.server is not None
        return redis.Redis(host="127.0.0.1", port=self.server.port)

    @staticmethod
    def streams(key: str, partitions: int) -> list[str]:
        return [f"{key}.{i}" for i in range(partitions)]

    def _produce(self, key: str, n: int, size: int, partitions: int) -> Run:
        value = payload(size)
        streams = self.streams(key, partitions)
        with self.client() as r:
            start = time.perf_counter()
            sent = 0
            batch = 0
            while sent < n:
                k = min(PIPELINE, n - sent)
                pipe = r.pipeline(transaction=False)
                stream = streams[batch % partitions]
                for _ in range(k):
                    pipe.xadd(stream, {"v": value})
                replies = pipe.execute()
                if len(replies) != k:
                    raise RuntimeError(f"XADD pipeline: {len(replies)} replies for {k}")
                sent += k
                batch += 1
            return Run(n, n * size, time.perf_counter() - start)

    def produce(self, key: str, n: int, size: int, partitions: int, acks: str) -> Run:
        return self._produce(key, n, size, partitions)

    def _consume(self, key: str, n: int, partitions: int, block_ms: int | None) -> tuple[int, int]:
        ids = {s: "0-0" for s in self.streams(key, partitions)}
        got = nbytes = 0
        with self.client() as r:
            while got < n:
                reply = r.xread(ids, count=FETCH, block=block_ms)
                if not reply:
                    if block_ms is None:
                        raise RuntimeError(f"XREAD: stream ended at {got} of {n}")
                    continue
                for stream, entries in reply:
                    for _id, fields in entries:
                        nbytes += len(fields[b"v"])
                    got += len(entries)
                    ids[stream.decode()] = entries[-1][0]
        return got, nbytes

    def consume(self, key: str, n: int, size: int, partitions: int) -> Run:
        start = time.perf_counter()
        got, nbytes = self._consume(key, n, partitions, None)
        return Run(got, nbytes, time.perf_counter() - start)

    def produce_consume(self, key: str, n: int, size: int, partitions: int, acks: str) -> Run:
        done: list[float] = []

        def read() -> None:
            self._consume(key, n, partitions, 100)
            done.append(time.perf_counter())

        start = time.perf_counter()
        reader = _Thread(read)
        self._produce(key, n, size, partitions)
        reader.result(300)
        return Run(n, n * size, done[0] - start)

    def e2e(self, key: str, rate: float, n: int, size: int) -> Latency:
        stream = f"{key}.0"
        pad = b"x" * (size - TS.size)
        recorder = LatencyRecorder(sampling_for(n))
        probe_back = threading.Event()

        def read() -> None:
            last = "0-0"
            seen = 0
            with self.client() as r:
                while seen < n:
                    reply = r.xread({stream: last}, count=1000, block=100)
                    now = time.perf_counter_ns()
                    for _, entries in reply or ():
                        for _id, fields in entries:
                            v = fields[b"v"]
                            if v.startswith(b"probe"):
                                probe_back.set()
                            else:
                                recorder.record((now - TS.unpack_from(v)[0]) / 1e6)
                                seen += 1
                        last = entries[-1][0]

        with self.client() as w:
            reader = _Thread(read)
            w.xadd(stream, {"v": b"probe"})
            if not probe_back.wait(30):
                raise RuntimeError("Redis e2e probe did not come back")
            start = time.perf_counter()
            for i in range(n):
                pace(start, i, rate)
                w.xadd(stream, {"v": TS.pack(time.perf_counter_ns()) + pad})
            reader.result(60)
        return Latency(recorder.stats(), n, recorder.count)

    def drop(self, key: str, partitions: int) -> None:
        with self.client() as r:
            r.delete(*self.streams(key, partitions))


class Nats(System):
    name = "NATS"

    def __init__(self) -> None:
        self.server: NatsServer | None = None
        self.loop = asyncio.new_event_loop()
        self.nc: Any = None
        self.js: Any = None

    def start(self, workdir: Path) -> None:
        import nats

        self.server = NatsServer(workdir / "nats")
        self.server.start()
        self.nc = self.loop.run_until_complete(nats.connect(self.server.url))
        self.js = self.nc.jetstream()

    def stop(self) -> None:
        try:
            if self.nc is not None:
                self.loop.run_until_complete(self.nc.close())
        finally:
            self.loop.close()
            if self.server is not None:
                self.server.stop()

    @property
    def pid(self) -> int:
        assert self.server is not None
        return self.server.pid

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @staticmethod
    def names(key: str, partitions: int) -> list[tuple[str, str]]:
        """(stream, subject) per partition; stream names may not contain dots."""
        base = key.replace(".", "_").replace("-", "_")
        return [(f"{base}_{i}", f"{key}.{i}") for i in range(partitions)]

    def prepare(self, key: str, partitions: int) -> None:
        self.run(self._create(key, partitions))

    async def _create(self, key: str, partitions: int) -> None:
        from nats.js.api import StorageType

        for stream, subject in self.names(key, partitions):
            await self.js.add_stream(name=stream, subjects=[subject], storage=StorageType.FILE)

    async def _produce(self, key: str, n: int, size: int, partitions: int) -> float:
        value = payload(size)
        subjects = [s for _, s in self.names(key, partitions)]
        publish = self.js.publish_async
        start = time.perf_counter()
        futures = []
        for i in range(n):
            futures.append(await publish(subjects[(i // PIPELINE) % partitions], value))
        await self.js.publish_async_completed()
        elapsed = time.perf_counter() - start
        for f in futures:
            if f.exception() is not None:
                raise RuntimeError(f"JetStream publish failed: {f.exception()}")
        return elapsed

    def produce(self, key: str, n: int, size: int, partitions: int, acks: str) -> Run:
        return Run(n, n * size, self.run(self._produce(key, n, size, partitions)))

    async def _consume(self, key: str, n: int, partitions: int) -> tuple[int, int]:
        from nats.js.api import AckPolicy, ConsumerConfig

        subs = [await self.js.pull_subscribe(subject, stream=stream,
                                             config=ConsumerConfig(ack_policy=AckPolicy.NONE))
                for stream, subject in self.names(key, partitions)]
        got = nbytes = 0
        idle = 0
        try:
            while got < n:
                progressed = False
                for sub in subs:
                    if got >= n:
                        break
                    # an empty stream times out with nats.errors.TimeoutError, or with a bare
                    # asyncio.TimeoutError (the builtin) when the deadline runs out between
                    # nats-py's two pull requests
                    try:
                        msgs = await sub.fetch(batch=min(FETCH, n - got), timeout=0.1)
                    except TimeoutError:
                        continue
                    got += len(msgs)
                    nbytes += sum(len(m.data) for m in msgs)
                    progressed = progressed or bool(msgs)
                idle = 0 if progressed else idle + 1
                if idle > 300:  # 30 s without a record in any stream
                    raise RuntimeError(f"JetStream consume stalled at {got} of {n}")
        finally:
            for sub in subs:
                await sub.unsubscribe()
        return got, nbytes

    def consume(self, key: str, n: int, size: int, partitions: int) -> Run:
        start = time.perf_counter()
        got, nbytes = self.run(self._consume(key, n, partitions))
        return Run(got, nbytes, time.perf_counter() - start)

    def produce_consume(self, key: str, n: int, size: int, partitions: int, acks: str) -> Run:
        async def both() -> float:
            start = time.perf_counter()
            reader = asyncio.ensure_future(self._consume(key, n, partitions))
            await self._produce(key, n, size, partitions)
            await reader
            return time.perf_counter() - start

        return Run(n, n * size, self.run(both()))

    def e2e(self, key: str, rate: float, n: int, size: int) -> Latency:
        async def measure() -> Latency:
            from nats.js.api import DeliverPolicy

            (stream, subject), = self.names(key, 1)
            pad = b"x" * (size - TS.size)
            recorder = LatencyRecorder(sampling_for(n))
            probe_back = asyncio.Event()
            all_back = asyncio.Event()

            async def on_msg(msg: Any) -> None:
                now = time.perf_counter_ns()
                if msg.data.startswith(b"probe"):
                    probe_back.set()
                    return
                recorder.record((now - TS.unpack_from(msg.data)[0]) / 1e6)
                if recorder.count >= n:
                    all_back.set()

            sub = await self.js.subscribe(subject, stream=stream, cb=on_msg, ordered_consumer=True,
                                          deliver_policy=DeliverPolicy.NEW)
            try:
                await self.js.publish(subject, b"probe")
                await asyncio.wait_for(probe_back.wait(), 30)
                start = time.perf_counter()
                for i in range(n):
                    ahead = start + i / rate - time.perf_counter()
                    if ahead > 0:
                        await asyncio.sleep(ahead)
                    await self.js.publish_async(subject, TS.pack(time.perf_counter_ns()) + pad)
                await self.js.publish_async_completed()
                await asyncio.wait_for(all_back.wait(), 60)
            finally:
                await sub.unsubscribe()
            return Latency(recorder.stats(), n, recorder.count)

        return self.run(measure())

    def drop(self, key: str, partitions: int) -> None:
        async def delete() -> None:
            for stream, _ in self.names(key, partitions):
                await self.js.delete_stream(stream)

        self.run(delete())


SYSTEMS: dict[str, type[System]] = {"odradek": Odradek, "kafka": Kafka, "redis": Redis,
                                     "nats": Nats}


def jitter() -> str:
    """A short random suffix so reruns against a kept server never reuse a topic."""
    return f"{random.randrange(1 << 20):05x}"
