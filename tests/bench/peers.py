"""The benchmark's peers as subprocesses: redis-server (Redis Streams) and nats-server (JetStream).

Each server gets a free loopback port and its own directory (a temp dir the caller owns), runs in
the foreground with its log on a pipe, and counts as started when it logs its ready line (an
event, not a sleep; bounded by a timeout). `stop()` is SIGTERM then wait (SIGKILL after a
timeout) and is safe to call twice; use the servers as context managers so they are stopped on
every path, errors included.

Durability, to match a Kafka broker's (append to the page cache, fsync in the background):
  - Redis: AOF on (`appendonly yes`, `appendfsync everysec`); RDB snapshots and automatic AOF
    rewrites off, so that no fork lands at a random point of a measurement.
  - NATS: JetStream with file storage in the server's store dir (`-js -sd DIR`); streams are
    created with `storage=file`, one replica.

The process's CPU time is read from /proc to the nanosecond (per-thread schedstat, lifted to the
utime + stime tick count where exited threads or reaped children make that larger), so
`cpu_seconds()` covers every thread of the server (Redis's bio threads, Go's goroutines).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from types import TracebackType

from tests.broker_process import free_port

TICKS = os.sysconf("SC_CLK_TCK")


def _tick_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime from /proc/<pid>/stat: every thread, live or exited, and
    reaped children (Redis's AOF rewrite fork), but only in clock ticks (10 ms)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICKS


def _schedstat_seconds(pid: int) -> float:
    """On-CPU nanoseconds of the live threads from /proc/<pid>/task/*/schedstat."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended while we looked
    return total / 1e9


def cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by process `pid`, to the nanosecond where possible.

    A workload of a quarter second costs the broker a few ticks, so tick counts alone would put
    ±50 % on its CPU per record. schedstat has ns resolution but forgets threads that have
    exited; the result is the precise figure lifted by whatever the tick count knows beyond it
    (exited threads, children), so differences of two readings stay right in both cases.
    """
    ticks = _tick_seconds(pid)
    try:
        precise = _schedstat_seconds(pid)
    except OSError:
        return ticks
    return max(precise, ticks - 1 / TICKS)


class ServerProcess:
    """A foreground server subprocess whose readiness is a line in its output."""

    name = "server"
    ready_text = ""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} is not running"
        return self.proc.pid

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def start(self, timeout: float = 20.0) -> ServerProcess:
        cmd = self.command()
        if shutil.which(cmd[0]) is None:
            raise RuntimeError(f"{cmd[0]} not found: install it (scripts/install-system-deps)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(cmd, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError(f"{self.name} did not start:\n" + "\n".join(self.lines[-30:]))
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if self.ready_text in line:
                self._ready.set()
        self._ready.set()  # the process ended: unblock start()

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class RedisServer(ServerProcess):
    name = "redis-server"
    ready_text = "Ready to accept connections"

    def command(self) -> list[str]:
        return [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.workdir), "--daemonize", "no", "--logfile", "",
            "--appendonly", "yes", "--appendfsync", "everysec",
            "--save", "", "--auto-aof-rewrite-percentage", "0",
            "--protected-mode", "no",
        ]


class NatsServer(ServerProcess):
    name = "nats-server"
    ready_text = "Server is ready"

    def command(self) -> list[str]:
        return ["nats-server", "-js", "-sd", str(self.workdir / "jetstream"),
                "-a", "127.0.0.1", "-p", str(self.port)]

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"
