"""The measurements behind `odradek perf`, as plain functions the benchmark harness reuses.

    run_produce(bootstrap, topic, num_records, record_size, ...)  -> ProduceResult
    run_consume(bootstrap, topic, messages, group=None, ...)      -> ConsumeResult
    run_e2e(bootstrap, topic, rate, num_records, ...)             -> E2EResult

All three drive confluent-kafka (librdkafka), so the tool is not the bottleneck of what it
measures, and speak the wire protocol only (they work against Apache Kafka as well). A missing
topic is treated as Kafka's own tools treat it: `run_produce` asks for it in a Metadata request
that lets the broker auto-create it (kafka-producer-perf-test's producer does that), `run_e2e`
creates it with one partition and replication factor 1 through CreateTopics (as Kafka's
EndToEndLatency does, saying so), `run_consume` refuses it. An unknown topic the broker will not
create, an unreachable broker or a bad client property raises PerfError with a one-line message,
which the CLI prints as `Error: ...`.

Latencies:
  - produce: librdkafka's own send-to-acknowledgement time of each record (`Message.latency()`),
    as kafka-producer-perf-test measures it (send() call to callback).
  - e2e: each record carries its send time (perf_counter_ns) and the run's id; a consumer thread
    in the same process subtracts it from the time the record arrives. Before the timed run a
    probe record is sent and awaited, so connection set-up is not counted.
"""

from __future__ import annotations

import os
import random
import string
import struct
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from clients.common import BOOTSTRAP_ENV
from clients.perf_stats import (
    ConsumeResult,
    E2EResult,
    LatencyRecorder,
    ProduceResult,
    sampling_for,
)

Progress = Callable[[int], None]  # called with the number of records done so far


class PerfError(Exception):
    """A measurement could not run; the message is meant for an operator."""


def payload(size: int, seed: int = 0) -> bytes:
    """Random upper-case letters, like kafka-producer-perf-test's payload: compressible the way
    text is, unlike os.urandom."""
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_uppercase, k=size)).encode()


def _config(bootstrap: str, extra: Mapping[str, Any] | None, errors: list[str]) -> dict[str, Any]:
    def on_error(err: Any) -> None:
        errors.append(err.str())

    # librdkafka logs every failed connection attempt on stderr: keep the terminal to our own
    # one-line errors (a property given with -X log_level=7 wins)
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 0, "error_cb": on_error}
    conf.update(extra or {})
    return conf


def _client(cls: Any, conf: dict[str, Any]) -> Any:
    from confluent_kafka import KafkaException

    try:
        return cls(conf)
    except (KafkaException, ValueError, TypeError) as e:
        raise PerfError(f"bad client configuration: {_text(e)}") from None


def _text(e: BaseException) -> str:
    from confluent_kafka import KafkaException

    if isinstance(e, KafkaException) and e.args:
        err = e.args[0]
        return err.str() if hasattr(err, "str") else str(err)
    return str(e).splitlines()[0] if str(e) else type(e).__name__


# What a missing topic makes partitions_of do (see the module docstring).
REFUSE, AUTO_CREATE, CREATE = "refuse", "auto-create", "create"
# Kafka's EndToEndLatency creates a missing topic with these.
E2E_TOPIC_PARTITIONS = 1
E2E_TOPIC_REPLICATION_FACTOR = 1


def _metadata(client: Any, bootstrap: str, timeout_s: float, errors: list[str] | None,
              topic: str | None = None) -> Any:
    from confluent_kafka import KafkaException

    try:
        return client.list_topics(topic, timeout=timeout_s)
    except KafkaException as e:
        seen = f" ({errors[-1]})" if errors else ""
        raise PerfError(
            f"cannot reach a broker at {bootstrap} (is it running? set --bootstrap-server or "
            f"${BOOTSTRAP_ENV}){seen}: {_text(e)}") from None


def _create_topic(bootstrap: str, topic: str, timeout_s: float, props: Mapping[str, Any] | None = None) -> None:
    """CreateTopics for `topic` as Kafka's EndToEndLatency does (1 partition, replication 1),
    with the client's `props` (its security settings); a topic someone else created meanwhile
    is fine."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = _client(AdminClient, {"bootstrap.servers": bootstrap, **(props or {}), "log_level": 0})
    futures = admin.create_topics([NewTopic(topic, E2E_TOPIC_PARTITIONS,
                                            E2E_TOPIC_REPLICATION_FACTOR)],
                                  request_timeout=timeout_s)
    try:
        futures[topic].result(timeout_s)
    except KafkaException as e:
        if e.args and getattr(e.args[0], "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        raise PerfError(f"cannot create topic {topic!r}: {_text(e)}") from None


def partitions_of(client: Any, bootstrap: str, topic: str, timeout_s: float,
                  errors: list[str] | None = None, missing: str = REFUSE,
                  notice: Callable[[str], None] | None = None, props: Mapping[str, Any] | None = None) -> int:
    """The partition count of `topic` from a Metadata request for all topics (asking does not
    auto-create it); PerfError if no broker answers. A missing topic is refused (REFUSE), asked
    for by name so that a broker with auto.create.topics.enable creates it (AUTO_CREATE, the
    client must allow auto-creation: librdkafka's producers do), or created through
    CreateTopics (CREATE, announced through `notice`). Waits, bounded by `timeout_s`, until the
    new topic's partitions have leaders."""
    meta = _metadata(client, bootstrap, timeout_s, errors).topics.get(topic)
    if meta is None and missing == CREATE:
        if notice is not None:
            notice(f'Topic "{topic}" does not exist. Will create topic with '
                   f"{E2E_TOPIC_PARTITIONS} partition(s) and replication factor = "
                   f"{E2E_TOPIC_REPLICATION_FACTOR}")
        _create_topic(bootstrap, topic, timeout_s, props)
    if meta is None and missing in (AUTO_CREATE, CREATE):
        deadline = time.monotonic() + timeout_s
        while True:
            meta = _metadata(client, bootstrap, timeout_s, errors, topic).topics.get(topic)
            ready = (meta is not None and meta.error is None and meta.partitions
                     and all(p.leader >= 0 for p in meta.partitions.values()))
            if ready or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if meta is not None and meta.error is not None and missing == AUTO_CREATE:
            raise PerfError(f"topic {topic!r} does not exist and the broker did not create it "
                            f"({meta.error.str()}; is auto.create.topics.enable false? create it "
                            f"with `odradek topics create {topic}`)")
    if meta is None:
        raise PerfError(f"topic {topic!r} does not exist (create it with "
                        f"`odradek topics create {topic}`)")
    if meta.error is not None:
        raise PerfError(f"topic {topic!r}: {meta.error.str()}")
    return len(meta.partitions)


def run_produce(bootstrap: str, topic: str, num_records: int, record_size: int = 100,
                throughput: float = -1, acks: str = "all", compression: str = "none",
                props: Mapping[str, Any] | None = None, timeout_s: float = 10.0,
                progress: Progress | None = None) -> ProduceResult:
    """Send `num_records` records of `record_size` bytes as fast as acknowledgements allow, or at
    `throughput` records/s (kafka-producer-perf-test's throttle: sleep whenever ahead of the
    target; -1 means unlimited). Returns once every record is acknowledged or failed."""
    from confluent_kafka import Producer

    if num_records < 1 or record_size < 0:
        raise PerfError("need at least one record and a record size >= 0")
    errors: list[str] = []
    conf = _config(bootstrap, {
        "acks": acks, "compression.type": compression, "linger.ms": 5,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20,
        "message.timeout.ms": max(30_000, int(timeout_s * 1000)),
        **(props or {}),
    }, errors)
    producer = _client(Producer, conf)
    partitions_of(producer, bootstrap, topic, timeout_s, errors, missing=AUTO_CREATE)

    recorder = LatencyRecorder(sampling_for(num_records))
    record = recorder.record
    failed = 0
    first_error: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            if not first_error:
                first_error.append(err.str())
        else:
            record(msg.latency() * 1000.0)

    value = payload(record_size)
    produce = producer.produce
    poll = producer.poll
    perf_counter = time.perf_counter
    step = max(256, min(10_240, num_records // 100 // 256 * 256))
    start = perf_counter()
    for i in range(num_records):
        if throughput > 0:
            while (ahead := start + i / throughput - perf_counter()) > 0:
                poll(ahead)
                if progress is not None:  # a throttled run waits here: its progress moves meanwhile
                    progress(recorder.count + failed)
        while True:
            try:
                produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: serve callbacks until there is room
                poll(0.005)
        if not i & 0xFF:
            # a latency ends when its delivery callback runs (Message.latency() is produce() to
            # callback, as in kafka-producer-perf-test), so callbacks are served every 256 sends
            poll(0)
            if progress is not None and i % step == 0:
                progress(recorder.count + failed)
    deadline = perf_counter() + max(timeout_s, conf["message.timeout.ms"] / 1000.0) + 5
    while producer.flush(0.1) > 0:
        if progress is not None:
            progress(recorder.count + failed)
        if perf_counter() > deadline:
            break
    elapsed = perf_counter() - start
    unacked = len(producer)
    if progress is not None:
        progress(recorder.count + failed)
    return ProduceResult(
        records=recorder.count, bytes=recorder.count * record_size, elapsed_s=elapsed,
        latency=recorder.stats(), failed=failed + unacked,
        first_error=first_error[0] if first_error else ("timed out" if unacked else None),
    )


def consumer_config(bootstrap: str, group: str | None, from_latest: bool,
                    props: Mapping[str, Any] | None, errors: list[str]) -> dict[str, Any]:
    return _config(bootstrap, {
        "group.id": group or f"odradek-perf-{os.getpid()}-{random.randrange(1 << 30)}",
        "enable.auto.commit": group is not None,
        "auto.offset.reset": "latest" if from_latest else "earliest",
        "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20,
        "fetch.wait.max.ms": 100,
        # librdkafka stops prefetching for fetch.queue.backoff.ms once queued.min.messages are
        # buffered: the client throttling itself, not the broker being slow
        "queued.min.messages": 10_000_000, "fetch.queue.backoff.ms": 0,
        **(props or {}),
    }, errors)


def run_consume(bootstrap: str, topic: str, messages: int, group: str | None = None,
                from_latest: bool = False, props: Mapping[str, Any] | None = None,
                timeout_s: float = 10.0, progress: Progress | None = None) -> ConsumeResult:
    """Read `messages` records of `topic`: as a member of `group` (subscribe; committed offsets
    or auto.offset.reset) or, without a group, by assigning every partition from its beginning
    (or end with from_latest). Stops early when no record arrives for `timeout_s`; the result's
    `records` then falls short of `requested`."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

    if messages < 1:
        raise PerfError("need at least one message to consume")
    errors: list[str] = []
    consumer = _client(Consumer, consumer_config(bootstrap, group, from_latest, props, errors))
    try:
        partitions = partitions_of(consumer, bootstrap, topic, timeout_s, errors)
        start = time.time()
        if group is None:
            offset = OFFSET_END if from_latest else OFFSET_BEGINNING
            consumer.assign([TopicPartition(topic, p, offset) for p in range(partitions)])
        else:
            consumer.subscribe([topic])
        got = 0
        nbytes = 0
        first = end = start
        last_seen = time.monotonic()
        while got < messages:
            batch = consumer.consume(min(10_000, messages - got), timeout=0.2)
            now = time.time()
            if not batch:
                if time.monotonic() - last_seen > timeout_s:
                    break
                continue
            last_seen = time.monotonic()
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    if err.fatal() or not err.retriable():
                        raise PerfError(f"consuming {topic!r}: {err.str()}")
                    continue
                if not got:
                    first = now
                got += 1
                nbytes += len(m)
                key = m.key()
                if key:
                    nbytes += len(key)
            end = now
            if progress is not None:
                progress(got)
    finally:
        consumer.close()
    return ConsumeResult(records=got, bytes=nbytes, start=start, first=first, end=end,
                         requested=messages)


E2E_HEADER = struct.Struct(">7sBq")  # run id, kind (0 probe, 1 timed), perf_counter_ns at send
PROBE, TIMED = 0, 1


def run_e2e(bootstrap: str, topic: str, rate: float, num_records: int, record_size: int = 100,
            acks: str = "1", producer_props: Mapping[str, Any] | None = None,
            consumer_props: Mapping[str, Any] | None = None, timeout_s: float = 10.0,
            progress: Progress | None = None, max_plot_samples: int = 20_000,
            notice: Callable[[str], None] | None = None) -> E2EResult:
    """Send `num_records` records at `rate` records/s (linger.ms=0) while a consumer thread reads
    them back from the partitions' current ends; latency = arrival - send time. Records not
    back within `timeout_s` after the last send count as lost."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    if rate <= 0 or num_records < 1:
        raise PerfError("need a rate > 0 and at least one record")
    if record_size < E2E_HEADER.size:
        raise PerfError(f"end-to-end records carry a {E2E_HEADER.size}-byte timestamp header: "
                        f"record size must be >= {E2E_HEADER.size}")
    errors: list[str] = []
    producer = _client(Producer, _config(bootstrap, {
        "acks": acks, "linger.ms": 0, "message.timeout.ms": max(30_000, int(timeout_s * 1000)),
        **(producer_props or {})}, errors))
    partitions = partitions_of(producer, bootstrap, topic, timeout_s, errors, missing=CREATE,
                               notice=notice, props=producer_props)
    consumer = _client(Consumer, consumer_config(bootstrap, None, False, {
        "fetch.wait.max.ms": 5, "fetch.min.bytes": 1, **(consumer_props or {})}, errors))
    try:
        starts = []
        for p in range(partitions):
            try:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                         timeout=timeout_s)
            except KafkaException as e:
                raise PerfError(f"cannot read the end offset of {topic}-{p}: {_text(e)}") from None
            starts.append(TopicPartition(topic, p, high))
        consumer.assign(starts)

        run_id = os.urandom(7)
        padding = b"x" * (record_size - E2E_HEADER.size)
        recorder = LatencyRecorder(sampling_for(num_records))
        every = max(1, num_records // max_plot_samples)
        samples: list[tuple[float, float]] = []
        probe_back = threading.Event()
        all_back = threading.Event()
        stop = threading.Event()
        failure: list[str] = []
        t0_ns = [0]

        def consume_loop() -> None:
            unpack = E2E_HEADER.unpack_from
            hsize = E2E_HEADER.size
            try:
                while not stop.is_set():
                    # poll returns with the first record; consume(n, t) would wait for n of them
                    first = consumer.poll(0.05)
                    now = time.perf_counter_ns()
                    if first is None:
                        continue
                    batch = [first, *consumer.consume(1000, timeout=0)]
                    for m in batch:
                        if m.error() is not None:
                            continue
                        v = m.value()
                        if v is None or len(v) < hsize:
                            continue
                        rid, kind, sent_ns = unpack(v)
                        if rid != run_id:
                            continue
                        if kind == PROBE:
                            probe_back.set()
                            continue
                        ms = (now - sent_ns) / 1e6
                        if recorder.count % every == 0:
                            samples.append(((sent_ns - t0_ns[0]) / 1e9, ms))
                        recorder.record(ms)
                    if recorder.count >= num_records:
                        all_back.set()
            except Exception as e:  # surfaces in the caller, not as a thread traceback
                failure.append(_text(e))
                all_back.set()
                probe_back.set()

        reader = threading.Thread(target=consume_loop, name="e2e-consumer", daemon=True)
        reader.start()
        try:
            send_failed: list[str] = []

            def on_delivery(err: Any, msg: Any) -> None:
                if err is not None:
                    send_failed.append(err.str())

            probe = E2E_HEADER.pack(run_id, PROBE, time.perf_counter_ns()) + padding
            for p in range(partitions):  # every partition's fetch path is warm before timing
                producer.produce(topic, probe, partition=p, on_delivery=on_delivery)
            producer.flush(timeout_s)
            if not probe_back.wait(timeout_s) or send_failed or failure:
                why = (send_failed or failure or ["not received"])[0]
                raise PerfError(f"probe record did not come back within {timeout_s:g}s: {why}")

            produce, poll = producer.produce, producer.poll
            pack = E2E_HEADER.pack
            start = time.perf_counter()
            t0_ns[0] = time.perf_counter_ns()
            step = max(1, min(1000, int(rate) // 10))
            for i in range(num_records):
                due = start + i / rate
                while (ahead := due - time.perf_counter()) > 0:
                    poll(ahead)
                while True:
                    try:
                        produce(topic, pack(run_id, TIMED, time.perf_counter_ns()) + padding,
                                on_delivery=on_delivery)
                        break
                    except BufferError:
                        poll(0.001)
                poll(0)
                if progress is not None and i % step == 0:
                    progress(recorder.count)
            producer.flush(timeout_s)
            last_send = time.perf_counter()
            while not all_back.wait(0.1):
                if progress is not None:
                    progress(recorder.count)
                if time.perf_counter() - last_send > timeout_s:
                    break
            elapsed = time.perf_counter() - start
        finally:
            stop.set()
            reader.join(timeout=10)
        if failure:
            raise PerfError(f"consuming {topic!r}: {failure[0]}")
        if progress is not None:
            progress(recorder.count)
        return E2EResult(rate=rate, sent=num_records - len(send_failed),
                         received=recorder.count, elapsed_s=elapsed, latency=recorder.stats(),
                         samples=samples)
    finally:
        consumer.close()
