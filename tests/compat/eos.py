"""Exactly-once pipelines of Kafka's Java clients and Kafka's own EOS tools, shared by the single
node (tests/compat/test_java_eos.py) and the 3-broker cluster (tests/cluster/test_java_eos.py)
tests of issue #22 §3.

* `ConsumeTransformProduce` (tests/compat/java/src): a consume-transform-produce application with
  `sendOffsetsToTransaction(offsets, consumer.groupMetadata())`, commits and aborts, and its
  read_committed check of the output and of the group's committed offsets.
* Kafka's system test transactions_test.py (tests/kafkatest/tests/core, Kafka 3.9) in small:
  `VerifiableProducer` seeds an input topic, one `TransactionalMessageCopier` per input partition
  copies it transactionally while a `bounce` callable restarts brokers, and a read_committed
  `ConsoleConsumer` reads the output.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.compat.jvm import JAVA_SRC, compile_java, java_command, kafka_version, run_tool
from tests.compat.test_java_client import run_java

CTP = "ConsumeTransformProduce"


def compile_eos(out_dir: Any) -> str:
    """The suite's EOS application, compiled against Kafka's jars (a module fixture's body)."""
    assert kafka_version().startswith("3.9."), kafka_version()
    return compile_java([JAVA_SRC / "src" / n for n in (f"{CTP}.java", "Json.java")], out_dir)


def seed(classes: str, bootstrap: str, partitions: int, rf: int, per_partition: int) -> dict[str, int]:
    """Creates `in` and `out` and writes `in-p-i` to every partition p of `in`; its end offsets."""
    [out] = run_java(classes, CTP, "seed", bootstrap, "in", "out", str(partitions), str(rf), str(per_partition),
                     timeout=120)
    return out["input_end"]


def copy(classes: str, bootstrap: str, tid: str, per_txn: int, abort_every: int,
         halt_after: int = 0) -> dict[str, Any]:
    """One run of the application (group `ctp`); its last JSON line. A halted run exits 3."""
    args = ["copy", bootstrap, tid, "ctp", "in", "out", str(per_txn), str(abort_every), str(halt_after)]
    if not halt_after:
        return run_java(classes, CTP, *args, timeout=170)[-1]
    proc = subprocess.run(java_command(CTP, args, classpath=classes), capture_output=True, text=True, timeout=170)
    assert proc.returncode == 3, f"exit {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.splitlines()[-1])


def verify(classes: str, bootstrap: str) -> dict[str, Any]:
    """The output read with read_committed, the group's committed offsets, the input's end offsets."""
    [out] = run_java(classes, CTP, "verify", bootstrap, "ctp", "in", "out", timeout=120)
    return out


def expected_output(input_end: dict[str, int]) -> dict[str, list[str]]:
    return {p: [f"out-{p}-{i}" for i in range(n)] for p, n in input_end.items()}


def consume_transform_produce(classes: str, bootstrap: str, rf: int) -> None:
    """3 partitions of 400 records, 100 per transaction, every 4th transaction aborted: the output
    is the transformed input once, in order per partition, no aborted copy; the group's offsets
    are the input's end offsets."""
    input_end = seed(classes, bootstrap, 3, rf, 400)
    assert input_end == {"0": 400, "1": 400, "2": 400}
    done = copy(classes, bootstrap, "ctp-1", 100, 4)
    assert done["copied"] == 1200 and done["aborted"] >= 1, done
    got = verify(classes, bootstrap)
    assert got["output"] == expected_output(input_end)
    assert got["committed"] == got["input_end"] == input_end


def copier_killed_mid_transaction(classes: str, bootstrap: str, rf: int) -> None:
    """The application dies (Runtime.halt) after 3 commits, in its 4th transaction with records
    sent and offsets added; a second run with the same transactional.id and group finishes the
    copy. With offsets committed apart from their transaction, the output would miss the 4th
    transaction's records (offsets kept, records aborted) or repeat records (records kept, offsets
    lost)."""
    input_end = seed(classes, bootstrap, 3, rf, 300)
    halted = copy(classes, bootstrap, "ctp-2", 100, 0, halt_after=3)
    assert halted == {"halted": 100, "committed": 3}
    done = copy(classes, bootstrap, "ctp-2", 100, 0)
    assert done["copied"] == 900 - 300, done  # what the first run committed is not copied again
    got = verify(classes, bootstrap)
    assert got["output"] == expected_output(input_end)
    assert got["committed"] == got["input_end"] == input_end


# ---------------------------------------------------------------------------------------------
# Kafka's transactions_test.py


VP = "org.apache.kafka.tools.VerifiableProducer"
COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
CONSOLE = "org.apache.kafka.tools.consumer.ConsoleConsumer"
TOPICS = "org.apache.kafka.tools.TopicCommand"


@dataclass
class Copier:
    """One TransactionalMessageCopier process and the progress lines it prints."""

    input_partition: int
    proc: subprocess.Popen[str]
    lines: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)

    def start_reading(self) -> None:
        self.readers = [threading.Thread(target=f, daemon=True) for f in (self.read, self.read_errors)]
        for t in self.readers:
            t.start()

    def stop(self) -> None:
        """Killed if still running; its output read to the end and its pipes closed."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for t in self.readers:
            t.join(timeout=10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def read_errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errors.append(line.rstrip("\n"))

    def processed(self) -> int:
        return max((int(x.get("totalProcessed", 0)) for x in self.lines), default=0)

    def done(self) -> bool:
        return self.proc.poll() is not None


def start_copiers(bootstrap: str, n: int, transaction_size: int) -> list[Copier]:
    """One copier per input partition (copier-i, the system test's consumer group, group metadata),
    transaction timeout 40 s as the system test's (above the 30 s request timeout)."""
    copiers = []
    for i in range(n):
        cmd = java_command(COPIER, ["--broker-list", bootstrap, "--transactional-id", f"copier-{i}",
                                    "--consumer-group", "transactions-test-consumer-group",
                                    "--input-topic", "input-topic", "--input-partition", str(i),
                                    "--output-topic", "output-topic", "--max-messages", "-1",
                                    "--transaction-size", str(transaction_size), "--transaction-timeout", "40000",
                                    "--use-group-metadata"])
        c = Copier(i, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        c.start_reading()
        copiers.append(c)
    return copiers


# the system test's VerifiableProducer(enable_idempotence=True): the tool itself sets retries=0
IDEMPOTENT = "enable.idempotence=true\nretries=2147483647\nmax.in.flight.requests.per.connection=5\n"


def seed_with_verifiable_producer(bootstrap: str, records: int) -> list[str]:
    """VerifiableProducer (idempotent, acks=all) writes 0..records-1; the values it got acked."""
    with tempfile.NamedTemporaryFile("w", suffix=".properties") as config:
        config.write(IDEMPOTENT)
        config.flush()
        out = run_tool(VP, "--bootstrap-server", bootstrap, "--topic", "input-topic", "--max-messages",
                       str(records), "--throughput", "-1", "--acks", "-1", "--producer.config", config.name,
                       timeout=180).stdout
    acked = [json.loads(line) for line in out.splitlines() if '"producer_send_success"' in line]
    return [str(a["value"]) for a in acked]


def read_committed(bootstrap: str, topic: str, records: int, timeout: float = 120.0) -> dict[int, list[str]]:
    """ConsoleConsumer --isolation-level read_committed over `topic` from the beginning until
    `records` are read (or 60 s without one): partition -> values in offset order."""
    out = run_tool(CONSOLE, "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
                   "--isolation-level", "read_committed", "--max-messages", str(records),
                   "--timeout-ms", "60000", "--property", "print.partition=true",
                   "--group", f"verifying-{topic}", timeout=timeout, check=False).stdout
    got: dict[int, list[str]] = {}
    for line in out.splitlines():
        m = re.fullmatch(r"Partition:(\d+)\t(.*)", line)
        if m:
            got.setdefault(int(m.group(1)), []).append(m.group(2))
    return got


def create_topics(bootstrap: str, partitions: int, rf: int) -> None:
    """input-topic and output-topic as the system test makes them (min.insync.replicas 2 at RF 3)."""
    for topic in ("input-topic", "output-topic"):
        run_tool(TOPICS, "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions",
                 str(partitions), "--replication-factor", str(rf),
                 *(["--config", "min.insync.replicas=2"] if rf >= 3 else []), timeout=60)


def transactions_test(bootstrap: str, rf: int, bounces: Sequence[Callable[[], None]], records: int = 20_000,
                      transaction_size: int = 100, partitions: int = 2, budget: float = 180.0) -> dict[str, Any]:
    """Kafka's transactions_test.py with brokers bounced: input-topic and output-topic with
    `partitions` each, `records` seeded, one copier per input partition, each of `bounces` run in
    turn while they copy (each once the copiers made some progress), then both topics read with
    read_committed: every output partition is its input partition, every record exactly once and
    in order. Each bounce starts while both copiers are still copying (it fails otherwise: a
    bounce after the copy tests nothing). Returns what was measured."""
    started = time.monotonic()
    create_topics(bootstrap, partitions, rf)
    seeded = seed_with_verifiable_producer(bootstrap, records)
    assert len(seeded) == records
    copiers = start_copiers(bootstrap, partitions, transaction_size)
    progress_at_bounce = []
    last = [0 for _ in copiers]
    try:
        for i, bounce in enumerate(bounces):
            # each bounce once every copier committed since the last one (it got through it)
            deadline = time.monotonic() + 90
            while any(c.processed() <= n for c, n in zip(copiers, last, strict=True)):
                assert not any(c.done() for c in copiers), f"a copier ended before bounce {i}: {failed(copiers)}"
                assert time.monotonic() < deadline, f"no progress before bounce {i}: {failed(copiers)}"
                time.sleep(0.05)
            last = [c.processed() for c in copiers]
            progress_at_bounce.append(sum(last))
            bounce()
        deadline = started + budget
        while not all(c.done() for c in copiers):
            assert time.monotonic() < deadline, f"copiers not done within {budget}s: {failed(copiers)}"
            time.sleep(0.1)
        assert all(c.proc.returncode == 0 for c in copiers), failed(copiers)
    finally:
        for c in copiers:
            c.stop()
    copied = time.monotonic() - started
    inputs = read_committed(bootstrap, "input-topic", records)
    output = read_committed(bootstrap, "output-topic", records)
    assert sorted(int(x) for v in inputs.values() for x in v) == sorted(int(x) for x in seeded)
    n = sum(len(v) for v in output.values())
    assert n == records, f"{n} records read_committed from output-topic, {records} seeded"
    for p in range(partitions):  # exactly once and in order: the output partition is its input partition
        assert output.get(p, []) == inputs.get(p, []), f"output-topic-{p} is not input-topic-{p}"
    return {"copy_seconds": round(copied, 1), "per_partition": {p: len(v) for p, v in sorted(output.items())},
            "processed_at_bounces": progress_at_bounce}


def failed(copiers: Sequence[Copier]) -> str:
    return "\n".join(f"copier-{c.input_partition} rc={c.proc.poll()} processed={c.processed()}:\n"
                     + "\n".join(c.errors[-20:]) for c in copiers)
