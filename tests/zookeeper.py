"""A real standalone ZooKeeper server for tests: Debian's `zookeeper` package (3.8), one JVM per
server, its own data dir and a free loopback client port, stopped by its owner. The config and
command line are clients/zookeeper_server.py's (shared with `odradek cluster up`).

Readiness is an event, not a sleep: ZooKeeperServerMain logs ContainerManager's "Using
checkIntervalMs" line right after `cnxnFactory.startup(zkServer)` returned, i.e. once the server is
RUNNING; `start()` waits for that line (bounded) and then checks with the `srvr` four-letter word
that it answers as a standalone server.

Timing settings are test-sized: a 200 ms tick (sessions expire in tick-sized buckets, so a short
`zookeeper.session.timeout.ms` is honoured promptly), minSessionTimeout 400 ms so tests may ask for
short sessions, maxSessionTimeout 60 s so Kafka's default 18 s is not negotiated down.
`forceSync=no`: no fsync per transaction on a disk shared with other tests (a crash of the test
machine loses nothing a test needs)."""

from __future__ import annotations

import signal
from pathlib import Path

from clients.zookeeper_server import READY_MARKER, four_letter_word, write_config, zookeeper_command
from tests.broker_process import LoggedProcess, free_port


class ZooKeeperServer(LoggedProcess):
    """One standalone ZooKeeper 3.8 on 127.0.0.1:`port`, data under `work_dir`.

    `connect_string(chroot)` gives what `zookeeper.connect` takes. `stop()` is SIGTERM then SIGKILL
    after its timeout; `kill()` is SIGKILL; `pause()`/`resume()` (SIGSTOP/SIGCONT) freeze the server
    so that clients see their connection go silent; `start()` again after a stop reuses the data
    dir, so znodes (and sessions not yet expired) survive a restart."""

    what = "ZooKeeper"

    def __init__(self, work_dir: Path, port: int | None = None, tick_time_ms: int = 200,
                 min_session_timeout_ms: int = 400, max_session_timeout_ms: int = 60_000) -> None:
        super().__init__()
        self.work_dir = Path(work_dir)
        self.data_dir = self.work_dir / "data"
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """`host:port[/chroot]`, the form of Kafka's `zookeeper.connect`."""
        return self.address + chroot

    def _write_config(self) -> Path:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        return write_config(
            self.work_dir, self.port, tick_time_ms=self.tick_time_ms,
            min_session_timeout_ms=self.min_session_timeout_ms,
            max_session_timeout_ms=self.max_session_timeout_ms, force_sync=False,
        )

    def command(self, cfg: Path) -> list[str]:
        return zookeeper_command(self.work_dir, cfg)

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        self._spawn(self.command(self._write_config()), READY_MARKER, timeout, cwd=self.work_dir)
        answer = four_letter_word("127.0.0.1", self.port, "srvr")
        if "Mode: standalone" not in answer:
            self.kill()
            raise RuntimeError(f"ZooKeeper on {self.address} logged ready but `srvr` said:\n{answer}")
        return self

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after `timeout` (LoggedProcess.stop raises if that was needed). A
        paused server is resumed first, or it would not act on the SIGTERM."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        return super().stop(timeout)

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
