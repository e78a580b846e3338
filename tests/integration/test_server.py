"""The `odradek serve` process: configuration errors, warnings, idle connections, SIGTERM."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from tests.broker_process import REPO, BrokerProcess


def test_invalid_config_value_refused_naming_the_key(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "clients.cli", "serve", "--log-dirs", str(tmp_path), "--override", "num.partitions=abc"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode != 0
    assert "num.partitions" in proc.stderr and "abc" in proc.stderr


def test_properties_file_unknown_key_warned_and_idle_connection_closed(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("connections.max.idle.ms=300\nlog.segmnet.bytes=1024\nnum.network.threads=8\n")
    b = BrokerProcess(tmp_path / "data", overrides=[f"@{props}"])
    b.start()
    try:
        assert "Unknown configuration 'log.segmnet.bytes'" in b.log_text()
        assert "num.network.threads" not in b.log_text()
        with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
            assert s.recv(1) == b""  # the broker closes it once idle for 300 ms
        # the line may reach our reader thread just after the client saw the close
        b.wait_for_line("closing idle connection", timeout=10)
    finally:
        assert b.stop() == 0
    assert "shut down cleanly" in b.log_text()
