"""README.md, docs/cli.md and docs/operations.md are runnable (issue #21 §5): every command block
(```sh, ```console, ```python) carries a marker on the line before it saying how it runs, and runs
here, page by page in document order, against real brokers the test starts:

    <!-- run: single -->          against one fresh single-node broker of this page
                                  (localhost:9092 and ./data become its address and log dir)
    <!-- run: cluster -->         against `odradek cluster up` in a temporary --dir on free ports
                                  (localhost:9092..9094 become its brokers), all of it stopped after
    <!-- run: serve -->           each line starts a broker: it must log `broker started`, then
                                  stop cleanly on SIGTERM (addresses and data dirs made temporary)
    <!-- run: skip REASON -->     not run; the reason says why and where it is tested instead

A `console` block runs command by command (`$ ` lines) and every output line the page shows must be
printed (whitespace-insensitive; topic ids and perf figures are compared by shape); an `sh` block
runs as one script under `set -euo pipefail`; a `python` block with this interpreter. Commands run
the worktree's code (PYTHONPATH), not whatever `odradek` the virtualenv was installed from."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.broker_process import REPO, BrokerProcess, consecutive_free_ports, free_port

PAGES = ("README.md", "docs/cli.md", "docs/operations.md")
RUNNABLE = {"sh", "console", "python"}
MARKER = re.compile(r"^<!-- run: (single|cluster|serve|skip)(?: (.*?))? -->$")
COMMAND_TIMEOUT_S = 120
BROKER_READY = "event='broker started'"


@dataclass
class Block:
    page: str
    line: int  # of the opening fence
    lang: str
    how: str
    reason: str
    text: str


def blocks(page: str) -> list[Block]:
    """Every fenced block of a runnable language, with its marker (how = "" when it has none)."""
    lines = (REPO / page).read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence[1] in RUNNABLE:
            marker = MARKER.match(lines[i - 1]) if i else None
            found.append(Block(page, i + 1, fence[1], marker[1] if marker else "",
                               (marker[2] or "") if marker else "", "\n".join(lines[i + 1:end])))
        i = end + 1
    return found


def test_every_command_block_says_how_it_runs() -> None:
    unmarked = [f"{b.page}:{b.line}" for p in PAGES for b in blocks(p) if not b.how]
    assert not unmarked, f"command blocks without a <!-- run: ... --> marker: {unmarked}"
    unexplained = [f"{b.page}:{b.line}" for p in PAGES for b in blocks(p) if b.how == "skip" and not b.reason]
    assert not unexplained, f"skipped without a reason: {unexplained}"


def logical_lines(text: str) -> list[str]:
    """Lines with `\\` continuations joined and ` # comments` removed."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = re.sub(r"\s+# .*$", "", pending + raw)
        pending = ""
        if line.strip():
            out.append(line)
    return out


def normalized(line: str, command: str) -> str:
    line = re.sub(r"TopicId: \S+", "TopicId: <id>", line)
    if " perf " in f" {command} ":
        line = re.sub(r"\d+(\.\d+)?", "<n>", line)
    return " ".join(line.split())


def missing_lines(expected: list[str], stdout: list[str], stderr: list[str]) -> list[str]:
    """Shown lines not printed: those on stdout must come in the order shown (a table's rows);
    a line may also be on stderr (status lines such as `Produced 2 records to events.`)."""
    missing, it = [], iter(stdout)
    for e in expected:
        if e in stdout:
            if not any(e == a for a in it):
                missing.append(f"out of order: {e}")
        elif e not in stderr:
            missing.append(e)
    return missing


def console_examples(text: str) -> list[tuple[str, list[str]]]:
    """(command, output lines shown after it) for every `$ ` line of a console block."""
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found:
            found[-1][1].append(line)
    return found


class Page:
    """The brokers one page's blocks run against, started on first use, stopped by close()."""

    def __init__(self, page: str, root: Path, stack: ExitStack) -> None:
        self.page, self.root, self.stack = page, root, stack
        self.cwd = root / "cwd"
        self.cwd.mkdir(parents=True)
        self.env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO),
                    "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
        # never the default localhost:9092 (another broker of this machine): a page that relies on
        # it without exporting ODRADEK_BOOTSTRAP fails here
        self.env["ODRADEK_BOOTSTRAP"] = f"127.0.0.1:{free_port()}"
        self.broker: BrokerProcess | None = None
        self.cluster_port = 0
        self.cluster_dir = root / "odradek-cluster"

    def run(self, block: Block) -> None:
        where = f"{block.page}:{block.line}"
        if block.how == "serve":
            for line in logical_lines(block.text):
                self._serve(line, where)
            return
        subst = self._single if block.how == "single" else self._cluster
        if block.lang == "console":
            for command, shown in console_examples(block.text):
                r = self._bash(subst(command), where)
                expected = [normalized(s, command) for s in shown if s.strip()]
                out = [normalized(s, command) for s in r.stdout.splitlines()]
                err = [normalized(s, command) for s in r.stderr.splitlines()]
                assert not missing_lines(expected, out, err), (where, command, missing_lines(expected, out, err),
                                                               r.stdout, r.stderr)
        elif block.lang == "python":
            r = subprocess.run([sys.executable, "-c", subst(block.text)], cwd=self.cwd, env=self.env,
                               capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
            assert r.returncode == 0, (where, r.stdout, r.stderr)
        else:
            self._bash("\n".join(subst(line) for line in logical_lines(block.text)), where)

    def _bash(self, script: str, where: str) -> subprocess.CompletedProcess[str]:
        for name, value in re.findall(r"^export (\w+)=(\S+)$", script, flags=re.M):
            self.env[name] = value  # as in the reader's shell: later blocks and commands see it
        r = subprocess.run(["bash", "-c", f"set -euo pipefail\n{script}"], cwd=self.cwd, env=self.env,
                           capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        assert r.returncode == 0, (where, script, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr, (where, script, r.stderr)
        return r

    def _common(self, text: str) -> str:
        return text.replace(".venv/bin/", f"{REPO}/.venv/bin/")

    def _single(self, text: str) -> str:
        if self.broker is None:
            self.broker = BrokerProcess(self.root / "data").start()
            self.stack.callback(self.broker.stop)
        text = re.sub(r"(?<![\w/])data/", f"{self.broker.log_dir}/", self._common(text))
        return text.replace("localhost:9092", self.broker.bootstrap)

    def _cluster(self, text: str) -> str:
        if not self.cluster_port:
            self.cluster_port = consecutive_free_ports(3)
            self.stack.callback(self._cluster_down)
        text = re.sub(r"(?:localhost|127\.0\.0\.1):(909[2-4])",
                      lambda m: f"127.0.0.1:{self.cluster_port + int(m[1]) - 9092}", self._common(text))
        extra = {"up": f" --port {self.cluster_port} --zookeeper-port {free_port()}"}

        def options(m: re.Match[str]) -> str:
            return f"{m[0]} --dir {self.cluster_dir}{extra.get(m[1], '')}"

        return re.sub(r"odradek cluster (up|status|down|zk-dump)", options, text)

    def _cluster_down(self) -> None:
        """Whatever the page left running (it should have run `cluster down` itself)."""
        if (self.cluster_dir / "cluster.json").exists():
            subprocess.run([sys.executable, "-m", "clients.cli", "cluster", "down", "--dir", str(self.cluster_dir)],
                           cwd=REPO, env=self.env, capture_output=True, timeout=120, check=False)

    def _serve(self, line: str, where: str) -> None:
        port = free_port()
        data = self.root / f"serve-{port}"
        line = re.sub(r"PLAINTEXT://(?:localhost|0\.0\.0\.0):9092", f"PLAINTEXT://127.0.0.1:{port}", self._common(line))
        line = line.replace("/var/lib/odradek", str(data))
        if "--listeners" not in line:
            line += f" --override listeners=PLAINTEXT://127.0.0.1:{port} --override log.dirs={data}"
        log = self.root / f"serve-{port}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=REPO, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while BROKER_READY not in log.read_text(errors="replace"):
                assert proc.poll() is None and time.monotonic() < deadline, (where, line, log.read_text())
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise
        assert code == 0, (where, line, log.read_text()[-2000:])


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_command_blocks_run_in_sequence(page: str, tmp_path: Path, stack: ExitStack) -> None:
    runner = Page(page, tmp_path, stack)
    ran = [b for b in blocks(page) if b.how != "skip"]
    assert ran, f"{page} has no runnable block"
    for block in ran:
        runner.run(block)
