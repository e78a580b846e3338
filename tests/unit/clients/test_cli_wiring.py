"""How `odradek`'s commands are wired, in process and without a broker: the examples in every
`--help` parse as the commands they show, and `odradek pipeline clickstream` takes its broker
from the shared option (-b, then $ODRADEK_BOOTSTRAP, then localhost:9092)."""

from __future__ import annotations

import shlex
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from clients.cli import main
from clients.common import BOOTSTRAP_ENV


def walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    yield " ".join(path), cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from walk(sub, (*path, name))


def example_lines(cmd: click.Command) -> list[str]:
    """The lines of the Examples: block of a command's help text."""
    text = cmd.help or ""
    for marker in ("Examples:\n", "Example:\n"):
        if marker in text:
            return [line.strip() for line in text.split(marker, 1)[1].split("\n\n", 1)[0]
                    .splitlines() if line.strip()]
    return []


def parse(line: str) -> click.Context:
    """Parse an example as the shell would hand it to `odradek`, up to the leaf command's
    context (options converted and checked; nothing invoked)."""
    words = shlex.split(line.split("odradek ", 1)[1].split(" < ", 1)[0])
    cmd: click.Command = main
    while isinstance(cmd, click.Group):
        name = words.pop(0)
        assert name in cmd.commands, f"{line}: no command {name!r}"
        cmd = cmd.commands[name]
    return cmd.make_context(cmd.name or "", words)


EXAMPLES = [(path, line) for path, cmd in walk(main) for line in example_lines(cmd)
            if "odradek " in line]


def test_every_command_and_group_has_examples() -> None:
    missing = [path or "odradek" for path, cmd in walk(main) if not example_lines(cmd)]
    assert missing == []


@pytest.mark.parametrize(("path", "line"), EXAMPLES, ids=[line for _, line in EXAMPLES])
def test_examples_parse(path: str, line: str, tmp_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    # the files the examples name, so that click.Path(exists=True) options accept them
    monkeypatch.chdir(tmp_path)
    segments = tmp_path / "data" / "orders-0"
    segments.mkdir(parents=True)
    for name in ("00000000000000000000.log", "00000000000000000000.index"):
        (segments / name).touch()
    (tmp_path / "data" / "cleaner-offset-checkpoint").touch()
    (tmp_path / "config").mkdir()
    (tmp_path / "admin.properties").write_text("security.protocol=SSL\n")
    for name in ("server.properties", "config/server.properties", "clicks.txt", "plan.json"):
        (tmp_path / name).touch()
    assert f"odradek {path}".rstrip() in line
    parse(line)  # raises click's UsageError / BadParameter for a stale example


# ------------------------------------------------------------------ pipeline clickstream


@pytest.fixture
def clickstream_runs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Stand-ins for PySpark (only its presence is checked) and for the pipeline's `run`, which
    records what it was called with instead of starting Spark."""
    from spark_connector.pipelines import clickstream

    calls: list[dict[str, Any]] = []

    def fake_run(bootstrap: str, output: Path, **kwargs: Any) -> int:
        calls.append({"bootstrap": bootstrap, "output": output, **kwargs})
        return 0

    monkeypatch.setitem(sys.modules, "pyspark", types.ModuleType("pyspark"))
    monkeypatch.setattr(clickstream, "run", fake_run)
    return calls


def run_cli(*args: str, env: str | None = None) -> click.testing.Result:
    return CliRunner().invoke(main, list(args), env={BOOTSTRAP_ENV: env})


@pytest.mark.parametrize(("args", "env", "expected"), [
    ((), None, "localhost:9092"),  # the shared default, not the pipeline module's 127.0.0.1
    ((), "kafka-a:9092,kafka-b:9092", "kafka-a:9092,kafka-b:9092"),
    (("-b", "cli:19092"), "env:9092", "cli:19092"),  # the option wins over the environment
    (("--bootstrap-server", "long:9093"), None, "long:9093"),
])
def test_clickstream_takes_the_shared_bootstrap_option(
        clickstream_runs: list[dict[str, Any]], args: tuple[str, ...], env: str | None,
        expected: str) -> None:
    r = run_cli("pipeline", "clickstream", *args, "--available-now", "--events", "7", env=env)
    assert r.exit_code == 0, r.output
    assert clickstream_runs == [{
        "bootstrap": expected, "output": Path("clickstream-output"), "events": 7,
        "available_now": True, "rate": 20.0, "spacing_ms": 100, "trigger_seconds": 5,
        "source": "odradek", "jars": [], "client": {}}]


def test_clickstream_takes_a_command_config(clickstream_runs: list[dict[str, Any]], tmp_path: Path) -> None:
    """Its Kafka client properties reach the pipeline's clients (run's `client`)."""
    import warnings

    with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated importlib call
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka  # noqa: F401
    cfg = tmp_path / "client.properties"
    cfg.write_text("client.id=ops\nrequest.timeout.ms=5000\n")
    r = run_cli("pipeline", "clickstream", "--command-config", str(cfg), "--available-now", "--events", "7")
    assert r.exit_code == 0, r.output
    assert clickstream_runs[0]["client"] == {"client.id": "ops", "request.timeout.ms": "5000"}


def test_clickstream_keeps_the_pipelines_own_options_and_exit_code(
        clickstream_runs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_connector.pipelines import clickstream

    monkeypatch.setattr(clickstream, "run",
                        lambda *a, **k: clickstream_runs.append({"args": a, **k}) or 3)
    r = run_cli("pipeline", "clickstream", "--rate", "50", "--trigger-seconds", "2", "--output",
                "out", "-b", "x:1")
    assert r.exit_code == 3
    assert clickstream_runs == [{"args": ("x:1", Path("out")), "events": 600,
                                 "available_now": False, "rate": 50.0, "spacing_ms": 100,
                                 "trigger_seconds": 2, "source": "odradek", "jars": [], "client": {}}]
    r = run_cli("pipeline", "clickstream", "--timeout", "5")  # no --timeout: nothing to wait on
    assert r.exit_code == 2 and "No such option '--timeout'" in r.output
