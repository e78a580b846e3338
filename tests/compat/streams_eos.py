"""Kafka Streams 3.9's exactly_once_v2 word count (tests/compat/java/streams-src/WordCountEos.java:
a folder of its own, because it compiles only against Kafka Streams' jars and
tests/compat/test_java_client.py compiles every program in java/src) for the single-node and the
cluster tests: the program as a process, its bounded known input, and the
check of its output by a read_committed consumer.

The input is LINES lines of WORDS_PER_LINE words drawn (seeded) from VOCABULARY words, so the count
of every word is known in advance (`expected_counts`). The output topic holds (word, count as an
8-byte big-endian long) records; the latest committed one per word must equal its count in the
input: a line processed twice after a crash whose transaction was not aborted shows as a count
above it, a line lost as one below.
"""

from __future__ import annotations

import collections
import itertools
import os
import random
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import LoggedProcess
from tests.compat.jvm import JAVA_SRC, compile_java, java_command, streams_classpath

LINES = 5_000
WORDS_PER_LINE = 5
VOCABULARY = [f"word{i:02d}" for i in range(60)]
APP_JVM = ("-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def lines(n: int = LINES, seed: int = 22) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCABULARY) for _ in range(WORDS_PER_LINE)) for _ in range(n)]


def expected_counts(text: Sequence[str]) -> dict[str, int]:
    return dict(collections.Counter(w for line in text for w in line.split(" ")))


def compile_word_count(out_dir: Path) -> str:
    """The program's classes, compiled against Kafka Streams and Kafka's clients."""
    return compile_java([JAVA_SRC / "streams-src" / "WordCountEos.java"], out_dir, classpath=streams_classpath())


class WordCountApp(LoggedProcess):
    """One instance of the Streams program (a JVM). `start` returns once Streams reports RUNNING;
    `stop` is SIGTERM (KafkaStreams.close), `kill` SIGKILL."""

    what = "Kafka Streams word count"

    def __init__(self, classes: str, bootstrap: str, state_dir: Path, *, app_id: str = "wc", input: str = "wc-in",
                 output: str = "wc-out", replication_factor: int = -1, instance_id: str = "wc-instance-1",
                 guarantee: str = "exactly_once_v2") -> None:
        """`guarantee` is processing.guarantee: at_least_once makes the kill -9 of the app count
        lines twice (the check of `until_counted` then fails: how it was shown to detect it)."""
        super().__init__()
        self.classpath = f"{classes}{os.pathsep}{streams_classpath()}"
        self.args = [bootstrap, app_id, input, output, str(state_dir), str(replication_factor), instance_id, guarantee]

    def start(self, timeout: float = 120.0) -> WordCountApp:
        self.lines.clear()
        self._spawn(java_command("WordCountEos", self.args, classpath=self.classpath, jvm_args=APP_JVM),
                    "-> RUNNING", timeout)
        return self

    def errors(self) -> list[str]:
        """The stream threads' uncaught exceptions printed so far."""
        return [line for line in self.lines if line.startswith("streams-error")]


def create_topics(bootstrap: str, names: Sequence[str], partitions: int, replication_factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, replication_factor) for n in names], request_timeout=30)
    for f in futures.values():
        f.result(60)


class Feeder:
    """Feeds lines to the input topic from a thread at `per_second` lines a second (idempotent
    producer, acks=all, keyless: spread over the partitions), so the kills of the test land while
    lines are arriving and being counted. Retries across leader changes and a broker's absence;
    `join` fails if any line is not acknowledged."""

    def __init__(self, bootstrap: str, topic: str, text: Sequence[str], per_second: int = 150,
                 timeout: float = 120.0) -> None:
        self.topic, self.text, self.per_second, self.timeout = topic, text, per_second, timeout
        self.failed: list[str] = []
        self.fed = 0  # lines handed to the producer so far
        self.unacknowledged = -1  # lines flush() left, once the thread fed them all
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": int(timeout * 1000)})
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Feeder:
        self.thread.start()
        return self

    def _run(self) -> None:
        began = time.monotonic()
        for i, line in enumerate(self.text):
            if self.stopped.wait(max(0.0, began + i / self.per_second - time.monotonic())):
                return
            self.producer.produce(self.topic, line.encode(),
                                  on_delivery=lambda err, _m: self.failed.append(str(err)) if err else None)
            self.producer.poll(0)
            self.fed = i + 1
        self.unacknowledged = self.producer.flush(self.timeout)

    def join(self) -> None:
        self.thread.join(self.timeout + len(self.text) / self.per_second)
        assert not self.thread.is_alive(), "the feeder did not finish"
        assert self.unacknowledged == 0, f"{self.unacknowledged} lines left unacknowledged"
        assert not self.failed, self.failed[:5]

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(self.timeout)


def committed_counts(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[str, list[int]]:
    """Every count the output topic holds per word, in offset order, read with read_committed from
    the beginning to the last stable offset of each partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": "read_committed"})
    counts: dict[str, list[int]] = collections.defaultdict(list)
    try:
        c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
        pending = set(range(partitions))
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() >= deadline:
                raise AssertionError(f"{topic}: partitions {sorted(pending)} not read to their end: "
                                     + _positions(c, topic, sorted(pending)))
            for m in c.consume(1000, timeout=1.0):
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    pending.discard(m.partition())
                    continue
                counts[m.key().decode()].append(struct.unpack(">q", m.value())[0])
    finally:
        c.close()
    return counts


def _positions(c: Consumer, topic: str, partitions: list[int]) -> str:
    """Where a stuck read_committed consumer is against the partitions' ends, for the failure."""
    out = []
    for p, pos in zip(partitions, c.position([TopicPartition(topic, p) for p in partitions]), strict=True):
        try:
            low, lso = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)
            out.append(f"{p}: position {pos.offset}, log start {low}, last stable offset {lso}")
        except KafkaException as e:
            out.append(f"{p}: position {pos.offset}, watermarks not known ({e})")
    return "; ".join(out)


def until_counted(bootstrap: str, topic: str, partitions: int, expected: dict[str, int], app: WordCountApp,
                  timeout: float = 180.0) -> dict[str, list[int]]:
    """Poll the committed output until the latest count of every word is its count in the input;
    fails at once when a count goes above it (counted twice), and after `timeout` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        counts = committed_counts(bootstrap, topic, partitions)
        latest = {w: seq[-1] for w, seq in counts.items()}
        over = {w: (n, expected.get(w, 0)) for w, n in latest.items() if n > expected.get(w, 0)}
        assert not over, f"counted twice (latest, expected): {over}"
        if latest == expected:
            return counts
        assert app.proc is not None and app.proc.poll() is None, "the Streams app ended:\n" + app.log_text()[-4000:]
        missing = sum(expected.values()) - sum(latest.values())
        assert time.monotonic() < deadline, f"{missing} words not counted within {timeout}s:\n" + app.log_text()[-4000:]
        time.sleep(0.5)


def low_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The log start offsets of the partitions (Streams moves its repartition topic's on by
    DeleteRecords once a commit has made them consumed)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"low-{topic}"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, i), timeout=30)[0] for i in range(partitions)]
    finally:
        c.close()


def until_lines_counted(bootstrap: str, topic: str, partitions: int, n: int, timeout: float = 120.0) -> None:
    """Wait until the committed output counts at least `n` lines' words: the app is that far."""
    deadline = time.monotonic() + timeout
    while sum(seq[-1] for seq in committed_counts(bootstrap, topic, partitions).values()) < n * WORDS_PER_LINE:
        assert time.monotonic() < deadline, f"{n} lines not counted in {topic} within {timeout}s"
        time.sleep(0.2)


def exactly_once_across_kills(bootstrap: str, partitions: int, start_app: Callable[[], WordCountApp],
                              kill_broker: Callable[[], object], restart_broker: Callable[[], object]) -> None:
    """The scenario of both tests: LINES lines fed at a steady rate; once 1,000 are counted a
    broker is killed (kill -9) and restarted; once 2,500 are, the Streams program is killed
    (kill -9) and started again on its state dir. Then every word's latest committed count must be
    its count in the input, and each word's counts only grow."""
    text = lines()
    apps = [start_app()]
    feeder = Feeder(bootstrap, "wc-in", text).start()
    try:
        until_lines_counted(bootstrap, "wc-out", partitions, 1000)
        kill_broker()
        restart_broker()
        until_lines_counted(bootstrap, "wc-out", partitions, 2500)
        # mid-way: lines still arrive, so the program has a transaction open (its records in the
        # output, changelog and repartition topics) that its successor's initTransactions aborts
        assert feeder.fed < len(text), "every line was fed before the program's kill"
        apps[0].kill()
        apps.append(start_app())
        feeder.join()
        counts = until_counted(bootstrap, "wc-out", partitions, expected_counts(text), apps[-1])
        assert_counts_grow(counts)
        # no stream thread died, in the killed program (through the broker's kill) or its successor
        assert [app.errors() for app in apps] == [[], []], [app.errors() for app in apps]
        assert any(low > 0 for low in low_watermarks(bootstrap, "wc-words-repartition", partitions)), \
            "Streams deleted no record of its repartition topic"
    finally:
        feeder.stop()
        for app in apps:
            app.stop()


def assert_counts_grow(counts: dict[str, list[int]]) -> None:
    """Every word's committed counts only grow, in offset order (one partition per word): a
    replayed, re-counted update would repeat or step back."""
    for word, seq in counts.items():
        assert all(a < b for a, b in itertools.pairwise(seq)), (word, seq)
