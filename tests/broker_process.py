"""A real `odradek serve` subprocess for tests: free port, own log dir, stopped by its owner.

Readiness is an event, not a sleep: the broker logs `event='broker started'` once its listeners
are open, and `start()` waits for that line (bounded)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.cluster_procs import port_free

REPO = Path(__file__).resolve().parents[1]
# Broker settings for group tests: groups form at once and short sessions are allowed.
FAST_GROUPS = ["num.partitions=1", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=200"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoggedProcess:
    """A server subprocess whose stderr lines are collected by a reader thread; `_spawn` returns
    once a line containing the readiness marker was printed (bounded), or fails with the last
    lines. Shared by `odradek serve` here and the reference Kafka broker (tests/compat)."""

    what = "process"

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._ready_marker = ""
        self._ready = False
        self._started = threading.Event()
        self._new_line = threading.Condition()
        self._reader: threading.Thread | None = None

    def _spawn(self, cmd: list[str], ready_marker: str, timeout: float, **popen: Any) -> None:
        self._ready_marker = ready_marker
        self._ready = False
        self._started.clear()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **popen)
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        # the reader also sets _started at end of output: only the marker itself means ready
        if not self._started.wait(timeout) or not self._ready or self.proc.poll() is not None:
            self.kill()
            raise RuntimeError(f"{self.what} did not start:\n" + "\n".join(self.lines[-40:]))

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            with self._new_line:
                self.lines.append(line.rstrip("\n"))
                self._new_line.notify_all()
            if self._ready_marker in line:
                self._ready = True
                self._started.set()
        self._started.set()  # process ended: unblock _spawn()

    def wait_for_line(self, text: str, timeout: float = 30.0, after: int = 0) -> str:
        """Block until a log line containing `text` has been printed (woken by each new line),
        looking only at lines from index `after` on (`len(self.lines)` taken before an action);
        returns the line, or raises TimeoutError."""
        found: list[str] = []

        def seen() -> bool:
            found[:] = [line for line in self.lines[after:] if text in line][:1]
            return bool(found)

        if not self.wait_until(seen, timeout):
            raise TimeoutError(f"no log line containing {text!r} within {timeout}s")
        return found[0]

    def wait_until(self, check: Callable[[], bool], timeout: float) -> bool:
        """Block until `check()` (about `self.lines`) holds, re-checked at each new log line;
        False when it still does not after `timeout` seconds."""
        with self._new_line:
            return self._new_line.wait_for(check, timeout)

    def log_text(self) -> str:
        return "\n".join(self.lines)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a graceful shutdown."""
        if self.proc is None or self.proc.poll() is not None:  # already ended: still close its pipe
            self._join()
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self._join()

    def kill(self) -> None:
        """SIGKILL: an unclean shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._join()

    def _join(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()


class BrokerProcess(LoggedProcess):
    what = "broker"
    ready_marker = "event='broker started'"  # log.format=json: '"event": "broker started"'

    def __init__(
        self, log_dir: Path, port: int | None = None, overrides: Iterable[str] = (), env: dict[str, str] | None = None,
        *, zookeeper_connect: str | None = None, broker_id: int | None = None,
        host: str = "127.0.0.1", prefix: Iterable[str] = (), serve_args: Iterable[str] = (),
        listeners: str | None = None,
    ) -> None:
        """`zookeeper_connect` starts a ZooKeeper-mode broker of that cluster (with `broker_id`);
        without it, a single node. `host` is the listener's address and `prefix` goes before the
        command (tests/fault/netns.py: `ip netns exec <ns>`, which execs, so `proc` is the broker)."""
        super().__init__()
        self.host = host
        self.prefix = list(prefix)
        self.log_dir = Path(log_dir)
        self.port = port or free_port()
        self.overrides = list(overrides)
        if zookeeper_connect is not None:
            self.overrides.append(f"zookeeper.connect={zookeeper_connect}")
        if broker_id is not None:
            self.overrides.append(f"broker.id={broker_id}")
        self.env = dict(env or {})  # extra environment variables of the broker process
        self.serve_args = list(serve_args)  # more `odradek serve` options (e.g. --config-env)
        # the listeners (default: one PLAINTEXT listener on host:port); port stays that of PLAINTEXT
        self.listeners = listeners or f"PLAINTEXT://{self.host}:{self.port}"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        cmd = [
            *self.prefix, sys.executable, "-m", "clients.cli", "serve",
            "--listeners", self.listeners,
            "--log-dirs", str(self.log_dir), *self.serve_args,
        ]
        for o in self.overrides:
            cmd += ["--config", o[1:]] if o.startswith("@") else ["--override", o]
        self._spawn(cmd, self.ready_marker, timeout, cwd=REPO,
                    env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        return self


def module_broker(name: str, overrides: Iterable[str] = ()) -> Any:
    """A module-scoped ``broker`` fixture: one single-node broker (its log dir under a temp dir
    named ``name``, ``overrides`` as its --override) for all of a module's tests, stopped by the
    fixture. ``broker = module_broker("cli", ["num.partitions=1"])`` in the module."""
    settings = list(overrides)

    @pytest.fixture(scope="module")
    def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
        b = BrokerProcess(tmp_path_factory.mktemp(name) / "data", overrides=settings).start()
        try:
            yield b
        finally:
            b.stop()

    return broker


def consecutive_free_ports(n: int) -> int:
    """A port p with p .. p+n-1 free (`odradek cluster up --port p` gives broker i the port p + i)."""
    for _ in range(200):
        base = random.randrange(20000, 60000)
        if all(port_free(base + i) for i in range(n)):
            return base
    raise AssertionError(f"no {n} consecutive free ports")
