"""docs/cli.md is runnable: its `console` examples, in document order, run against one fresh
broker (default configuration) as a user would type them, each exits 0, and every output line
the page shows is printed (whitespace-insensitive; topic ids and perf figures, which differ per
run, are compared by shape)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.broker_process import REPO, BrokerProcess, module_broker

DOC = REPO / "docs" / "cli.md"
# Examples not run here, each with the reason (and where it is tested instead).
NOT_RUN = {
    "odradek pipeline clickstream": "needs PySpark and Java; tests/spark runs the pipeline",
}
COMMAND_TIMEOUT_S = 120


def examples(text: str) -> list[tuple[str, list[str]]]:
    """(command, output lines shown after it) for every `$ ` line of every console block."""
    found: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```console\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            if line.startswith("$ "):
                found.append((line[2:], []))
            elif found:
                found[-1][1].append(line)
    return found


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


broker = module_broker("cli-docs")


def test_the_examples_parse_and_only_the_listed_ones_are_not_run() -> None:
    commands = [c for c, _ in examples(DOC.read_text())]
    assert len(commands) > 25
    skipped = {key for c in commands for key in NOT_RUN if key in c}
    assert skipped == set(NOT_RUN), "NOT_RUN names an example the page no longer has"


def test_cli_md_examples_run_in_sequence_on_a_fresh_broker(broker: BrokerProcess,
                                                           tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200", "ODRADEK_BOOTSTRAP": broker.bootstrap,
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    ran = 0
    for command, shown in examples(DOC.read_text()):
        if command.startswith("export ODRADEK_BOOTSTRAP=") or any(k in command for k in NOT_RUN):
            continue
        line = command.replace("localhost:9092", broker.bootstrap)
        r = subprocess.run(["bash", "-c", f"set -o pipefail; {line}"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        assert r.returncode == 0, (command, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr, (command, r.stderr)
        expected = [normalized(s, command) for s in shown if s.strip()]
        out = [normalized(s, command) for s in r.stdout.splitlines()]
        err = [normalized(s, command) for s in r.stderr.splitlines()]
        assert not missing_lines(expected, out, err), (command, missing_lines(expected, out, err),
                                                       r.stdout, r.stderr)
        ran += 1
    assert ran > 25
