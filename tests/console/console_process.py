"""`odradek console` as the tests run it: a subprocess on a free port, ready once it printed
the command's READY line, stopped by SIGTERM (the fixtures' job)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from clients.console.command import READY
from tests.broker_process import LoggedProcess, free_port

REPO = Path(__file__).resolve().parents[2]


class ConsoleProcess(LoggedProcess):
    what = "console"

    def __init__(self, bootstrap: str, *args: str) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.port = free_port()
        self.args = list(args)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ConsoleProcess:
        cmd = [sys.executable, "-m", "clients.cli", "console", "--bootstrap-server", self.bootstrap,
               "--port", str(self.port), "--refresh", "1", *self.args]
        self._spawn(cmd, READY, timeout, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return self
