"""`--watch` end to end: `odradek groups describe --watch` and `odradek cluster status --watch`
against real brokers, on a pseudo-terminal (redrawn in place with rich's Live until Ctrl-C, exit
code 0, the cursor shown again) and piped (one timestamped snapshot after another)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import REPO, BrokerProcess, consecutive_free_ports, free_port
from tests.subprocesses import reaped
from tests.terminal import HIDE_CURSOR, SHOW_CURSOR, TerminalProcess

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated importlib call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer

STAMP = re.compile(r"^--- \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 ---$", re.M)


def _env(bootstrap: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ODRADEK_BOOTSTRAP", None)
    if bootstrap is not None:
        env["ODRADEK_BOOTSTRAP"] = bootstrap
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "clients.cli", *args]


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(n):
        p.send(topic, f"r{i}".encode(), partition=0)
    p.flush()
    p.close()


def _consume_and_commit(bootstrap: str, topic: str, group: str, n: int) -> None:
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=20_000)
    got = 0
    for _ in c:
        got += 1
        if got == n:
            break
    c.commit()
    c.close()
    assert got == n


def _lag_row(group: str, topic: str, current: int, end: int) -> re.Pattern[str]:
    """The offsets row of `groups describe` for partition 0 (whitespace between columns)."""
    return re.compile(rf"{group}\s+{topic}\s+0\s+{current}\s+{end}\s+{end - current}\s")


@pytest.fixture
def lagging_group(broker: BrokerProcess) -> tuple[str, str]:
    """Group `watchers` committed at offset 5 of topic `watched` (5 records): lag 0."""
    _produce(broker.bootstrap, "watched", 5)
    _consume_and_commit(broker.bootstrap, "watched", "watchers", 5)
    return "watchers", "watched"


def test_groups_describe_watch_redraws_lag_on_a_terminal(broker: BrokerProcess,
                                                         lagging_group: tuple[str, str]) -> None:
    group, topic = lagging_group
    term = TerminalProcess(_cli("groups", "describe", group, "--watch", "--interval", "0.5"), REPO,
                           _env(broker.bootstrap))
    try:
        term.wait_for(lambda s: bool(_lag_row(group, topic, 5, 5).search(s)), 30)
        assert term.raw.count(HIDE_CURSOR) == 1, "Live hides the cursor while it draws"
        mark = len(term.raw)
        _produce(broker.bootstrap, topic, 7)
        # the same screen, redrawn: the lag of the 7 new records appears without a new command
        term.wait_for(lambda s: bool(_lag_row(group, topic, 5, 12).search(s)), 30, since=mark)
        assert term.proc.poll() is None
        assert term.interrupt() == 0
        raw = term.raw
        assert raw.rfind(SHOW_CURSOR) > raw.rfind(HIDE_CURSOR), "the terminal is restored (cursor shown)"
        assert "Traceback" not in term.text() and "Aborted" not in term.text()
        assert not STAMP.search(term.text()), "a terminal gets redraws, not timestamped snapshots"
    finally:
        term.close()


def test_groups_describe_watch_piped_prints_timestamped_snapshots(broker: BrokerProcess,
                                                                  lagging_group: tuple[str, str]) -> None:
    group, topic = lagging_group
    out_path = broker.log_dir.parent / "watch.out"
    with out_path.open("wb") as out:
        proc = subprocess.Popen(_cli("groups", "describe", group, "--watch", "--interval", "0.3"), cwd=REPO,
                                env=_env(broker.bootstrap), stdout=out, stderr=subprocess.PIPE)
    with reaped(proc):
        def snapshots() -> list[str]:
            return [s for s in STAMP.split(out_path.read_text())[1:] if "LOG-END-OFFSET" in s]

        _wait(lambda: len(snapshots()) >= 2, proc)
        assert all(_lag_row(group, topic, 5, 5).search(s) for s in snapshots())
        _produce(broker.bootstrap, topic, 3)
        _wait(lambda: bool(_lag_row(group, topic, 5, 8).search(snapshots()[-1])), proc)
        text = out_path.read_text()
        assert "\x1b" not in text, "no escape codes when stdout is not a terminal"
        assert text.startswith("--- ")
        proc.send_signal(2)  # SIGINT, as Ctrl-C in the shell that pipes it
        assert proc.wait(20) == 0, proc.stderr.read().decode() if proc.stderr else ""


def _wait(cond: object, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not cond():  # type: ignore[operator]
        assert proc.poll() is None, f"exited {proc.returncode}: {proc.stderr.read().decode() if proc.stderr else ''}"
        assert time.monotonic() < deadline, "not seen in time"
        time.sleep(0.05)


@pytest.fixture
def one_broker_cluster(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """`odradek cluster up --brokers 1` (a ZooKeeper and a broker of its own); `down` after."""
    d = tmp_path / "c"
    port = consecutive_free_ports(1)
    up = subprocess.run(_cli("cluster", "up", "--dir", str(d), "--brokers", "1", "--zookeeper-port",
                             str(free_port()), "--port", str(port), "--timeout", "60"),
                        cwd=REPO, capture_output=True, text=True, timeout=120)
    try:
        assert up.returncode == 0, up.stderr
        yield d, json.loads((d / "cluster.json").read_text())["bootstrap"]
    finally:
        subprocess.run(_cli("cluster", "down", "--dir", str(d)), cwd=REPO, capture_output=True, timeout=120)


def test_cluster_status_watch_shows_a_new_topic(one_broker_cluster: tuple[Path, str]) -> None:
    d, bootstrap = one_broker_cluster
    term = TerminalProcess(_cli("cluster", "status", "--dir", str(d), "--watch", "--interval", "0.5"), REPO, _env())
    try:
        first = term.wait_for(lambda s: "log dirs:" in s, 30)
        before = int(re.findall(r"partitions: (\d+);", first)[-1])
        mark = len(term.raw)
        created = subprocess.run(_cli("topics", "create", "appears", "-p", "3", "-r", "1", "-b", bootstrap),
                                 cwd=REPO, capture_output=True, text=True, timeout=60)
        assert created.returncode == 0, created.stderr
        term.wait_for(lambda s: f"partitions: {before + 3};" in s, 30, since=mark)
        assert term.interrupt() == 0
        assert term.raw.rfind(SHOW_CURSOR) > term.raw.rfind(HIDE_CURSOR)
        assert "Traceback" not in term.text()
    finally:
        term.close()
