"""`odradek perf produce|consume|e2e` end to end: subprocesses against a real broker, their final
lines parsed the way a script written for Kafka's perf tools would parse them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from clients.perf_stats import (
    CONSUME_HEADER,
    MB,
    parse_consume_line,
    parse_e2e_line,
    parse_produce_line,
)
from tests.broker_process import REPO, BrokerProcess, free_port, module_broker

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


broker = module_broker("perf", ["num.partitions=1", "group.initial.rebalance.delay.ms=0"])


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        fut.result(30)


def perf(*args: str, bootstrap: str | None = None, timeout: float = 90,
         ) -> subprocess.CompletedProcess[str]:
    """`odradek perf ARGS` as a user runs it; the broker comes from $ODRADEK_BOOTSTRAP."""
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("ODRADEK_BOOTSTRAP", None)
    if bootstrap is not None:
        env["ODRADEK_BOOTSTRAP"] = bootstrap
    return subprocess.run([sys.executable, "-m", "clients.cli", "perf", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def ok(*args: str, bootstrap: str) -> list[str]:
    r = perf(*args, bootstrap=bootstrap)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return r.stdout.splitlines()


def failed(*args: str, bootstrap: str | None = None) -> subprocess.CompletedProcess[str]:
    r = perf(*args, bootstrap=bootstrap)
    assert r.returncode != 0, (args, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("Error: "), r.stderr
    return r


def test_produce_then_consume_count_every_record_and_byte(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    create_topic(b, "perf-rt", 3)
    out = ok("produce", "perf-rt", "--num-records", "3000", "--record-size", "200", "--acks", "1",
             bootstrap=b)
    assert len(out) == 1  # stdout is the summary line only; the progress bar is stderr's
    p = parse_produce_line(out[0])
    assert p["records"] == 3000
    assert p["mbps"] == pytest.approx(p["rps"] * 200 / MB, rel=0.01, abs=0.01)
    assert 0 <= p["p50"] <= p["p95"] <= p["p99"] <= p["p999"] <= p["max"]
    assert p["avg"] <= p["max"]

    out = ok("consume", "perf-rt", "--messages", "3000", bootstrap=b)
    assert out[0] == CONSUME_HEADER
    c = parse_consume_line(out[1])
    assert c["data.consumed.in.nMsg"] == 3000
    assert c["data.consumed.in.MB"] == pytest.approx(3000 * 200 / MB, abs=1e-4)
    assert c["start.time"] <= c["end.time"]

    # asking for more than there is: the figures still print, the exit code says it fell short
    r = failed("consume", "perf-rt", "-n", "3001", "--timeout", "1", "--hide-header", bootstrap=b)
    assert parse_consume_line(r.stdout.splitlines()[0])["data.consumed.in.nMsg"] == 3000
    assert "consumed 3000 of 3001 records" in r.stderr


def test_produce_never_exceeds_the_target_throughput(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "perf-throttled", 1)
    out = ok("produce", "perf-throttled", "-n", "300", "-s", "10", "--throughput", "1000",
             "--compression", "lz4", bootstrap=broker.bootstrap)
    p = parse_produce_line(out[-1])
    assert p["records"] == 300
    # record i is sent no earlier than i/1000 s after the first: at most 300 in 0.299 s
    assert p["rps"] <= 1000 * 300 / 299 + 1


def test_consume_as_a_group_commits_what_it_read(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    create_topic(b, "perf-group", 2)
    ok("produce", "perf-group", "-n", "500", "-s", "50", bootstrap=b)
    out = ok("consume", "perf-group", "-n", "500", "--group", "perf-readers", bootstrap=b)
    assert parse_consume_line(out[1])["data.consumed.in.nMsg"] == 500

    c = Consumer({"bootstrap.servers": b, "group.id": "perf-readers", "log_level": 3})
    try:
        parts = [TopicPartition("perf-group", p) for p in range(2)]
        committed = {tp.partition: tp.offset for tp in c.committed(parts, timeout=10)}
        ends = {tp.partition: c.get_watermark_offsets(tp, timeout=10)[1] for tp in parts}
    finally:
        c.close()
    assert sum(ends.values()) == 500
    for p, end in ends.items():  # every record read is committed; an empty partition has nothing
        assert committed[p] == end if end else committed[p] < 0, (committed, ends)


def test_e2e_prints_a_histogram_and_writes_a_png(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "perf-e2e", 1)
    plot = tmp_path / "plots" / "e2e.png"
    out = ok("e2e", "perf-e2e", "--rate", "500", "--duration", "1", "--record-size", "64",
             "--plot", str(plot), bootstrap=broker.bootstrap)
    summary = next(line for line in out if "end-to-end latency" in line)
    e = parse_e2e_line(summary)
    assert (e["sent"], e["received"], e["rate"]) == (500, 500, 500)
    assert 0 < e["p50"] <= e["p95"] <= e["p99"] <= e["p999"] <= e["max"]
    assert out[0] == "latency histogram (ms, 500 samples):"
    rows = out[1:out.index(summary)]
    assert sum(int(row.split("ms")[1].split()[0]) for row in rows) == 500
    assert out[-1] == f"wrote {plot}"
    data = plot.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000


@pytest.mark.parametrize("command", [
    ["produce", "t", "-n", "10"],
    ["consume", "t", "-n", "10"],
    ["e2e", "t", "-d", "1"],
])
def test_unreachable_broker_is_one_clear_line(command: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    r = failed(*command, "--timeout", "1", bootstrap=address)
    assert f"cannot reach a broker at {address}" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_consume_of_an_unknown_topic_is_a_clear_error(broker: BrokerProcess) -> None:
    r = failed("consume", "no-such-topic", "-n", "10", bootstrap=broker.bootstrap)
    assert "topic 'no-such-topic' does not exist" in r.stderr


def topic_partitions(bootstrap: str, name: str) -> int | None:
    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(timeout=30)
    meta = md.topics.get(name)
    return None if meta is None else len(meta.partitions)


def test_produce_lets_the_broker_auto_create_a_missing_topic(broker: BrokerProcess) -> None:
    """kafka-producer-perf-test's producer asks for the topic in its Metadata requests, so a
    broker with auto.create.topics.enable (the default) creates it with num.partitions."""
    assert topic_partitions(broker.bootstrap, "perf-auto-produce") is None
    out = ok("produce", "perf-auto-produce", "-n", "20", "-s", "10", bootstrap=broker.bootstrap)
    assert parse_produce_line(out[0])["records"] == 20
    assert topic_partitions(broker.bootstrap, "perf-auto-produce") == 1


def test_e2e_creates_a_missing_topic_as_kafkas_end_to_end_latency(broker: BrokerProcess) -> None:
    assert topic_partitions(broker.bootstrap, "perf-auto-e2e") is None
    r = perf("e2e", "perf-auto-e2e", "--rate", "200", "--duration", "0.5", "-s", "32",
             bootstrap=broker.bootstrap)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert ('Topic "perf-auto-e2e" does not exist. Will create topic with 1 partition(s) and '
            "replication factor = 1") in r.stderr
    assert parse_e2e_line(r.stdout.splitlines()[-1])["received"] == 100
    assert topic_partitions(broker.bootstrap, "perf-auto-e2e") == 1


def test_produce_to_a_missing_topic_on_a_broker_that_does_not_auto_create(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", overrides=["auto.create.topics.enable=false"]).start()
    try:
        r = perf("produce", "perf-not-created", "-n", "5", "--timeout", "2",
                 bootstrap=b.bootstrap)
        assert r.returncode != 0 and r.stderr.startswith("Error: "), (r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        assert ("topic 'perf-not-created' does not exist and the broker did not create it"
                in r.stderr), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    finally:
        b.stop()


def test_bad_client_property_and_bootstrap_flag_beats_env(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "perf-props", 1)
    r = failed("produce", "perf-props", "-n", "1", "-X", "no.such.property=1",
               bootstrap=broker.bootstrap)
    assert 'No such configuration property: "no.such.property"' in r.stderr
    # --bootstrap-server wins over $ODRADEK_BOOTSTRAP (which points nowhere here)
    out = ok("produce", "perf-props", "-n", "5", "--bootstrap-server", broker.bootstrap,
             bootstrap=f"127.0.0.1:{free_port()}")
    assert parse_produce_line(out[0])["records"] == 5


@pytest.mark.parametrize("command", ["produce", "consume", "e2e"])
def test_help_has_examples(command: str) -> None:
    r = perf(command, "--help")
    assert r.returncode == 0
    assert "Examples:" in r.stdout
    assert f"  odradek perf {command} " in r.stdout  # \b keeps example lines unwrapped
    assert "ODRADEK_BOOTSTRAP" in r.stdout


PROGRESS = re.compile(r"^producing to perf-progress: (\d+)/300 records \((\d+)%\), (\d+\.\d) s elapsed$")


def test_produce_progress_lines_when_stderr_is_not_a_terminal(broker: BrokerProcess) -> None:
    """Not on a terminal, a run shows its progress as a line every --progress-interval seconds on
    standard error (issue #24 §3): 300 records at 100 records/s take 3 s, so with 0.5 s at least
    4 lines come, their counts and times growing from the first (about 50 records acknowledged by
    0.5 s); stdout is still the summary line alone."""
    create_topic(broker.bootstrap, "perf-progress", 1)
    r = perf("produce", "perf-progress", "-n", "300", "--throughput", "100", "--acks", "1",
             "--progress-interval", "0.5", bootstrap=broker.bootstrap)
    assert r.returncode == 0, r.stderr
    assert parse_produce_line(r.stdout.strip())["records"] == 300
    lines = [PROGRESS.match(line) for line in r.stderr.splitlines()]
    assert lines and all(lines), r.stderr
    assert len(lines) >= 4, r.stderr
    done = [int(m.group(1)) for m in lines if m]
    elapsed = [float(m.group(3)) for m in lines if m]
    assert done == sorted(done) and 0 < done[-1] <= 300, done
    assert done[0] > 0, f"a throttled run's progress moves while it waits, not every 256 records: {done}"
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0.4, elapsed
    assert "\x1b" not in r.stderr, "no progress bar when stderr is not a terminal"


def test_produce_draws_a_progress_bar_on_a_terminal(broker: BrokerProcess) -> None:
    """On a terminal the progress is rich's bar (records done of the total), not the lines."""
    from tests.terminal import TerminalProcess

    create_topic(broker.bootstrap, "perf-bar", 1)
    env = {**os.environ, "ODRADEK_BOOTSTRAP": broker.bootstrap}
    term = TerminalProcess([sys.executable, "-m", "clients.cli", "perf", "produce", "perf-bar", "-n", "200",
                            "--throughput", "100", "--acks", "1", "--progress-interval", "0.5"], REPO, env)
    try:
        term.wait_for(lambda s: bool(re.search(r"producing to perf-bar.*\b\d+/200\b", s)), 30)
        assert term.proc.wait(30) == 0
        text = term.text()
        assert "records sent" in text and "━" in text, text
        assert not re.search(r"records \(\d+%\), \d+\.\d s elapsed", text), "lines are for non-terminals"
    finally:
        term.close()
