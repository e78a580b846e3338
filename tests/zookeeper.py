"""A real standalone ZooKeeper server for tests: Debian's `zookeeper` package (3.8), one JVM per
server, its own data dir and a free loopback client port, stopped by its owner.

Started the way the package's `zkServer.sh start-foreground` starts it (QuorumPeerMain with a
zoo.cfg; no servers listed, so it runs standalone), minus the shell: the script reads
/etc/zookeeper/conf and writes to /var/log/zookeeper, which tests must not share.

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

import os
import signal
import socket
from pathlib import Path

from tests.broker_process import LoggedProcess, free_port

JAVA_DIR = Path("/usr/share/java")
# zookeeper.jar's manifest Class-Path names its own dependencies; the slf4j binding and log4j 1.2
# are the package's Depends (libslf4j-java, liblog4j1.2-java) but not on that Class-Path.
CLASSPATH = [JAVA_DIR / "zookeeper.jar", JAVA_DIR / "slf4j-log4j12.jar", JAVA_DIR / "log4j-1.2.jar"]
INSTALL_HINT = "Debian's zookeeper package is missing: run `bash scripts/install-system-deps`"
JVM = ("-Xmx128m", "-Xms32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
READY_MARKER = "Using checkIntervalMs="
LOG4J = """\
log4j.rootLogger=INFO, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n
"""


def four_letter_word(host: str, port: int, word: str, timeout: float = 5.0) -> str:
    """Send a ZooKeeper four-letter command (`srvr`, `ruok`, ...) and return the whole answer (the
    server closes the connection after it)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


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
        self.data_dir.mkdir(parents=True, exist_ok=True)
        settings = {
            "tickTime": self.tick_time_ms,
            "dataDir": self.data_dir,
            "clientPort": self.port,
            "clientPortAddress": "127.0.0.1",
            "minSessionTimeout": self.min_session_timeout_ms,
            "maxSessionTimeout": self.max_session_timeout_ms,
            "maxClientCnxns": 0,  # no per-IP limit: every test client comes from 127.0.0.1
            "admin.enableServer": "false",  # the Jetty admin server would take port 8080
            "4lw.commands.whitelist": "srvr,ruok,stat,cons,dump",
            "forceSync": "no",
        }
        cfg = self.work_dir / "zoo.cfg"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        (self.work_dir / "log4j.properties").write_text(LOG4J)
        return cfg

    def command(self, cfg: Path) -> list[str]:
        missing = [str(p) for p in CLASSPATH if not p.is_file()]
        if missing:
            raise RuntimeError(f"{INSTALL_HINT} (not found: {', '.join(missing)})")
        return [
            "java", *JVM,
            f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp", os.pathsep.join(map(str, CLASSPATH)),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg),
        ]

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
