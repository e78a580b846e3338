"""The README and docs/ describe what exists. Three checks that can fail:

* every `odradek COMMAND [SUBCOMMAND]` they show is a command the CLI has;
* a sentence that mentions a feature not built yet (the brokers' own connections
  re-authenticating) says so (not / no / yet / until / ...), instead of describing it as working.
  (ZooKeeper mode, `odradek cluster`, docker-compose, TLS, the web console, Prometheus metrics,
  SASL, SCRAM, clients' re-authentication and SCRAM on a single node were on this list until they
  were built);
* docs/cli.md's command table names every command.
(tests/integration/test_docs_run.py runs the command blocks of README, cli.md and operations.md.)
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from clients.cli import main

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NOT_BUILT = re.compile(r"brokers' own connections[^.]*re-authenticate", re.I)
SAYS_SO = re.compile(r"\b(not|no|yet|until|without|once|later|will|isn't|doesn't|nothing)\b|"
                     r"ZooKeeper-mode Kafka|Kafka's", re.I)


def sentences(text: str) -> list[str]:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)  # examples are checked by the next test
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n\s*\n|\n[*|-] ", text) if s.strip()]


def test_features_not_built_yet_are_not_described_as_working() -> None:
    wrong = []
    for doc in DOCS:
        for s in sentences(doc.read_text()):
            if NOT_BUILT.search(s) and not SAYS_SO.search(s):
                wrong.append(f"{doc.relative_to(REPO)}: {' '.join(s.split())[:200]}")
    assert not wrong, "\n".join(wrong)


def test_every_odradek_command_the_docs_show_exists() -> None:
    unknown = []
    for doc in DOCS:
        # commands as typed: in code spans and blocks, after a prompt or a path
        for first, second in re.findall(r"(?:[`$/] ?|^)odradek ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?",
                                        doc.read_text(), flags=re.M):
            command = main.commands.get(first)
            if command is None:
                unknown.append(f"{doc.relative_to(REPO)}: odradek {first}")
            elif isinstance(command, click.Group) and second and second not in command.commands:
                unknown.append(f"{doc.relative_to(REPO)}: odradek {first} {second}")
    assert not unknown, unknown


def test_cli_md_command_table_lists_every_command() -> None:
    """docs/cli.md's table is where an operator looks for a command (`odradek cluster` was missing)."""
    text = (REPO / "docs" / "cli.md").read_text()
    listed = set(re.findall(r"^\| `odradek ([a-z][a-z0-9-]*)", text, flags=re.M))
    assert listed == set(main.commands), sorted(set(main.commands) ^ listed)


def test_the_keys_without_effect_are_the_kafka_keys_odradek_does_not_define() -> None:
    """docs/configuration.md lists the Kafka 3.9 broker keys Odradek accepts but does not act on:
    exactly those of broker/kafka_broker_configs.json that broker/config.py does not define,
    split by Kafka's read-only flag (a key that gains an effect must leave the list)."""
    from broker.config import CONFIGS
    from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS

    doc = (REPO / "docs" / "configuration.md").read_text()
    unused = {k: v for k, v in KAFKA_BROKER_CONFIGS.items() if k not in CONFIGS}
    for label, read_only in (("Dynamic in Kafka", False), ("Read-only in Kafka", True)):
        m = re.search(re.escape(label) + r", no effect in Odradek \((\d+)\): (.*)", doc)
        assert m, label
        listed = re.findall(r"`([^`]+)`", m.group(2))
        want = sorted(k for k, v in unused.items() if v.read_only is read_only)
        assert (int(m.group(1)), listed) == (len(want), want), label
    assert f"The {len(unused)} keys below have" in doc
