"""Starting a standalone ZooKeeper from Debian's `zookeeper` package (3.8): its zoo.cfg, its
command line, and the four-letter words that say it serves. Used by `odradek cluster up` (a
local cluster for users) and by the tests (tests/zookeeper.py).

Started the way the package's `zkServer.sh start-foreground` starts it (QuorumPeerMain with a
zoo.cfg; no servers listed, so it runs standalone), minus the shell: the script reads
/etc/zookeeper/conf and writes to /var/log/zookeeper, which a local cluster must not share.
Readiness: ZooKeeperServerMain logs ContainerManager's "Using checkIntervalMs" line once the
server is RUNNING; then `srvr` must answer "Mode: standalone".
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = [
    "CLASSPATH",
    "INSTALL_HINT",
    "READY_MARKER",
    "four_letter_word",
    "serves",
    "write_config",
    "zookeeper_command",
]

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


def serves(host: str, port: int) -> bool:
    """Whether a standalone ZooKeeper answers on host:port."""
    try:
        return "Mode: standalone" in four_letter_word(host, port, "srvr", timeout=2.0)
    except OSError:
        return False


def write_config(
    work_dir: Path,
    port: int,
    *,
    tick_time_ms: int = 2000,
    min_session_timeout_ms: int | None = None,
    max_session_timeout_ms: int | None = None,
    force_sync: bool = True,
) -> Path:
    """Write `zoo.cfg` and `log4j.properties` (to stderr) into `work_dir`; data under
    `work_dir/data`. Defaults are ZooKeeper's own (2 s tick, sessions 2-20 ticks); tests pass
    test-sized values."""
    data_dir = work_dir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    settings: dict[str, object] = {
        "tickTime": tick_time_ms,
        "dataDir": data_dir,
        "clientPort": port,
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": 0,  # no per-IP limit: every local client comes from 127.0.0.1
        "admin.enableServer": "false",  # the Jetty admin server would take port 8080
        "4lw.commands.whitelist": "srvr,ruok,stat,cons,dump",
        "forceSync": "yes" if force_sync else "no",
    }
    if min_session_timeout_ms is not None:
        settings["minSessionTimeout"] = min_session_timeout_ms
    if max_session_timeout_ms is not None:
        settings["maxSessionTimeout"] = max_session_timeout_ms
    cfg = work_dir / "zoo.cfg"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    (work_dir / "log4j.properties").write_text(LOG4J)
    return cfg


def zookeeper_command(work_dir: Path, cfg: Path) -> list[str]:
    """The java command line of a standalone ZooKeeper with `cfg`; RuntimeError naming the
    install command when the package is missing."""
    missing = [str(p) for p in CLASSPATH if not p.is_file()]
    if missing:
        raise RuntimeError(f"{INSTALL_HINT} (not found: {', '.join(missing)})")
    return [
        "java", *JVM,
        f"-Dlog4j.configuration=file:{work_dir / 'log4j.properties'}",
        "-Dzookeeper.jmx.log4j.disable=true",
        "-cp", os.pathsep.join(map(str, CLASSPATH)),
        "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg),
    ]
