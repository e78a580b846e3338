"""The operator CLI end to end: `odradek topics|groups|configs|produce|consume` as subprocesses
against a real broker, reading their output as an operator (or a script) would."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker_process import REPO, BrokerProcess, free_port, module_broker
from tests.client_waits import poll_until_assigned

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated importlib call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer


broker = module_broker("cli", ["num.partitions=1", "group.initial.rebalance.delay.ms=0"])


def odradek(*args: str, bootstrap: str | None = None, input: bytes | None = None,
            timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run `odradek ARGS` the way a user does; the broker comes from $ODRADEK_BOOTSTRAP, other
    variables from `env`."""
    env = {**os.environ, "COLUMNS": "200", **(env or {})}
    env.pop("ODRADEK_BOOTSTRAP", None)
    if bootstrap is not None:
        env["ODRADEK_BOOTSTRAP"] = bootstrap
    return subprocess.run([sys.executable, "-m", "clients.cli", *args], cwd=REPO, env=env,
                          input=input if input is not None else b"", capture_output=True, timeout=timeout, check=False)


def ok(*args: str, bootstrap: str, input: bytes | None = None) -> str:
    r = odradek(*args, bootstrap=bootstrap, input=input)
    assert r.returncode == 0, (args, r.stdout.decode(), r.stderr.decode())
    return r.stdout.decode()


def failed(*args: str, bootstrap: str | None = None) -> str:
    r = odradek(*args, bootstrap=bootstrap)
    err = r.stderr.decode()
    assert r.returncode != 0, (args, r.stdout.decode(), err)
    assert "Traceback" not in err, err
    return err


def rows(text: str, first: str) -> list[list[str]]:
    """Data rows of a table whose header row starts with `first`."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    start = next(i for i, cells in enumerate(lines) if cells and cells[0] == first)
    return [cells for cells in lines[start + 1:] if cells and cells[0] != first]


def test_topic_lifecycle(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert ok("topics", "create", "orders", "--partitions", "3", "--replication-factor", "1",
              "--config", "retention.ms=86400000", bootstrap=b) == "Created topic orders.\n"
    assert "orders" in ok("topics", "list", bootstrap=b).split()

    described = ok("topics", "describe", "orders", bootstrap=b).splitlines()
    assert described[0].startswith("Topic: orders\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=86400000" in described[0]
    assert described[1:] == [
        f"\tTopic: orders\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)]

    ok("topics", "alter", "orders", "--partitions", "5", "-c", "segment.bytes=1048576",
       "--delete-config", "retention.ms", bootstrap=b)
    described = ok("topics", "describe", "orders", bootstrap=b).splitlines()
    assert "PartitionCount: 5" in described[0]
    assert described[0].endswith("Configs: segment.bytes=1048576")
    assert len(described) == 6

    assert "PARTITIONS" in failed("topics", "alter", "orders", "--partitions", "2", bootstrap=b)
    assert "TOPIC_ALREADY_EXISTS" in failed("topics", "create", "orders", bootstrap=b)
    assert ok("topics", "create", "orders", "--if-not-exists", bootstrap=b) == ""

    assert ok("topics", "delete", "orders", bootstrap=b) == "Deleted topic orders.\n"
    assert "orders" not in ok("topics", "list", bootstrap=b).split()
    assert "topic 'orders' does not exist" in failed("topics", "describe", "orders", bootstrap=b)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in failed("topics", "delete", "orders", bootstrap=b)
    assert ok("topics", "delete", "orders", "--if-exists", bootstrap=b) == ""


def test_bad_topic_names_are_refused(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    assert "INVALID_TOPIC" in failed("topics", "create", "no spaces", bootstrap=b)
    assert "illegal" in failed("produce", "no spaces", bootstrap=b)
    assert "topic 'never-made' does not exist" in failed("consume", "never-made", "-n", "1",
                                                         bootstrap=b)


def test_produce_consume_round_trip(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    ok("topics", "create", "lines", "-p", "2", bootstrap=b)
    lines = [f"k{i % 4}:value {i} with spaces:and colons" for i in range(200)]
    before = int(dt.datetime.now().timestamp() * 1000)
    r = odradek("produce", "lines", "-K", ":", "-H", "source=cli", "-H", "run=1", "-z", "zstd",
                bootstrap=b, input=("\n".join(lines) + "\n").encode())
    assert r.returncode == 0, r.stderr
    assert r.stderr.decode().strip() == "Produced 200 records to lines."

    out = ok("consume", "lines", "--from-beginning", "-n", "200", "--print-timestamp",
             "--print-partition", "--print-offset", "--print-headers", "--print-key",
             bootstrap=b)
    got = [line.split("\t") for line in out.splitlines()]
    assert len(got) == 200
    seen = set()
    for ts, part, off, headers, key, value in got:
        assert ts.startswith("CreateTime:") and int(ts.split(":")[1]) >= before
        assert part in ("Partition:0", "Partition:1") and off.startswith("Offset:")
        assert headers == "source:cli,run:1"
        seen.add(f"{key}:{value}")
        seen.add((part, off))
    assert {s for s in seen if isinstance(s, str)} == set(lines)
    assert len({s for s in seen if isinstance(s, tuple)}) == 200  # every (partition, offset) once

    # one partition from an offset; the same key always lands in the same partition
    part0 = [line for line in got if line[1] == "Partition:0"]
    out = ok("consume", "lines", "-p", "0", "--offset", "5", "-n", "3", "--print-offset",
             "--print-key", bootstrap=b)
    assert out.splitlines() == ["\t".join(line[2:3] + line[4:]) for line in part0[5:8]]

    # from a time after everything: nothing to read, ends on the idle timeout
    r = odradek("consume", "lines", "--from-timestamp", "2999-01-01T00:00:00Z",
                "--idle-timeout-ms", "500", bootstrap=b)
    assert r.returncode == 0 and r.stdout == b""
    assert r.stderr.decode().strip() == "Processed a total of 0 messages"


def test_produce_from_file_without_keys(broker: BrokerProcess, tmp_path: Path) -> None:
    b = broker.bootstrap
    src = tmp_path / "in.txt"
    src.write_bytes(b"plain\r\nbinary \xff\xfe ok\nno newline at end")
    ok("produce", "raw", "--file", str(src), "--acks", "1", bootstrap=b)
    out = odradek("consume", "raw", "--from-beginning", "-n", "3", "--print-key", bootstrap=b)
    assert out.stdout == b"null\tplain\nnull\tbinary \xff\xfe ok\nnull\tno newline at end\n"


def _produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(per_partition):
        for part in range(partitions):
            p.send(topic, f"{part}-{i}".encode(), partition=part)
    p.flush()
    p.close()


def _offsets(text: str) -> dict[int, tuple[str, str, str]]:
    """partition -> (current, log end, lag) from `groups describe`."""
    return {int(r[2]): (r[3], r[4], r[5]) for r in rows(text, "GROUP")}


def test_group_lag_and_reset_offsets(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    ok("topics", "create", "events", "-p", "2", bootstrap=b)
    _produce(b, "events", 10, 2)

    # a partial consume as a group member commits 8 of the 20 records
    ok("consume", "events", "--group", "billing", "--from-beginning", "-n", "8", bootstrap=b)
    assert "billing" in ok("groups", "list", bootstrap=b).split()
    described = ok("groups", "describe", "billing", bootstrap=b)
    assert "Consumer group 'billing' has no active members." in described
    offsets = _offsets(described)
    assert set(offsets) == {0, 1}
    assert sum(int(c) for c, _, _ in offsets.values()) == 8
    assert all(end == "10" for _, end, _ in offsets.values())
    assert sum(int(lag) for _, _, lag in offsets.values()) == 12

    # dry run (the default) shows the plan and changes nothing
    plan = ok("groups", "reset-offsets", "billing", "--topic", "events", "--to-earliest", bootstrap=b)
    assert rows(plan, "GROUP") == [["billing", "events", "0", "0"], ["billing", "events", "1", "0"]]
    assert _offsets(ok("groups", "describe", "billing", bootstrap=b)) == offsets

    ok("groups", "reset-offsets", "billing", "--topic", "events", "--to-earliest", "--execute",
       bootstrap=b)
    assert _offsets(ok("groups", "describe", "billing", bootstrap=b)) == {
        0: ("0", "10", "10"), 1: ("0", "10", "10")}

    ok("groups", "reset-offsets", "billing", "--topic", "events:1", "--shift-by", "7", "--execute",
       bootstrap=b)
    ok("groups", "reset-offsets", "billing", "--all-topics", "--shift-by", "-2", "--execute",
       bootstrap=b)
    assert _offsets(ok("groups", "describe", "billing", bootstrap=b)) == {
        0: ("0", "10", "10"), 1: ("5", "10", "5")}  # shift clamps at the log start

    ok("groups", "reset-offsets", "billing", "--topic", "events:0", "--to-offset", "99",
       "--execute", bootstrap=b)
    ok("groups", "reset-offsets", "billing", "--topic", "events:1", "--to-datetime",
       "2000-01-01T00:00:00+00:00", "--execute", bootstrap=b)
    assert _offsets(ok("groups", "describe", "billing", bootstrap=b)) == {
        0: ("10", "10", "0"), 1: ("0", "10", "10")}

    # the records read after a reset are the ones the reset points at
    out = ok("consume", "events", "--group", "billing", "-n", "10", "--print-partition",
             bootstrap=b)
    assert sorted(out.splitlines()) == sorted(f"Partition:1\t1-{i}" for i in range(10))

    assert "exactly one of" in failed("groups", "reset-offsets", "billing", "--topic", "events",
                                      "--to-earliest", "--to-offset", "3", bootstrap=b)
    assert "topic 'nope' does not exist" in failed("groups", "reset-offsets", "billing", "--topic",
                                                   "nope", "--to-earliest", bootstrap=b)


# record timestamps per partition, in seconds after BASE: partition 1 is out of order (the
# answer is the first offset at or after the time, not the first greater timestamp); nothing in
# partition 2 is as late as the reset time, so it goes to its log end as Kafka's tool does
STAMPS = {0: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 1: [1, 9, 3, 4, 6, 2, 7, 8], 2: [0, 1, 2, 3]}
AT = 5  # seconds after BASE: between the records of partitions 0 and 1


def _timestamped(bootstrap: str, topic: str) -> tuple[int, str]:
    """STAMPS produced to `topic` with explicit CreateTimes; (BASE in ms, BASE + AT in the
    `--to-datetime` format, in another zone than UTC to exercise the parsing too)."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    base = now - dt.timedelta(hours=1)  # recent: well inside the topic's retention
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    for part, stamps in STAMPS.items():
        for i, s in enumerate(stamps):
            p.send(topic, f"{part}-{i}".encode(), partition=part,
                   timestamp_ms=int((base + dt.timedelta(seconds=s)).timestamp() * 1000))
    p.flush()
    p.close()
    when = (base + dt.timedelta(seconds=AT, milliseconds=-500)).astimezone(
        dt.timezone(dt.timedelta(hours=5, minutes=30)))
    return int(base.timestamp() * 1000), when.isoformat(timespec="milliseconds")


def _first_at_or_after(seconds: float) -> dict[int, int]:
    """partition -> the first offset whose timestamp is >= BASE + seconds, else the log end."""
    return {part: next((o for o, s in enumerate(stamps) if s >= seconds), len(stamps))
            for part, stamps in STAMPS.items()}


def test_reset_offsets_to_a_datetime_in_the_middle_of_the_log(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    ok("topics", "create", "stamped", "-p", "3", bootstrap=b)
    _, when = _timestamped(b, "stamped")
    expected = _first_at_or_after(AT - 0.5)
    assert expected == {0: 5, 1: 1, 2: 4}  # the test's own arithmetic, spelled out

    ok("groups", "reset-offsets", "auditors", "--topic", "stamped", "--to-latest", "--execute",
       bootstrap=b)
    before = _offsets(ok("groups", "describe", "auditors", bootstrap=b))
    assert before == {p: (str(len(s)), str(len(s)), "0") for p, s in STAMPS.items()}

    r = odradek("groups", "reset-offsets", "auditors", "--topic", "stamped", "--to-datetime", when,
                bootstrap=b)
    assert r.returncode == 0, r.stderr.decode()
    assert rows(r.stdout.decode(), "GROUP") == [
        ["auditors", "stamped", str(p), str(o)] for p, o in expected.items()]
    warnings_ = [line for line in r.stderr.decode().splitlines() if line.startswith("Warn:")]
    assert warnings_ == [f"Warn: no record in stamped-2 at or after {when}: using its log end "
                         "offset 4."]
    assert _offsets(ok("groups", "describe", "auditors", bootstrap=b)) == before  # a dry run

    ok("groups", "reset-offsets", "auditors", "--topic", "stamped", "--to-datetime", when,
       "--execute", bootstrap=b)
    assert _offsets(ok("groups", "describe", "auditors", bootstrap=b)) == {
        p: (str(o), str(len(STAMPS[p])), str(len(STAMPS[p]) - o)) for p, o in expected.items()}

    # a naive date-time is local time (as in Kafka): the same instant, written locally
    local = dt.datetime.fromisoformat(when).astimezone().replace(tzinfo=None)
    ok("groups", "reset-offsets", "auditors", "--topic", "stamped", "--to-earliest", "--execute",
       bootstrap=b)
    ok("groups", "reset-offsets", "auditors", "--topic", "stamped:1", "--to-datetime",
       local.isoformat(timespec="milliseconds"), "--execute", bootstrap=b)
    assert _offsets(ok("groups", "describe", "auditors", bootstrap=b))[1][0] == str(expected[1])


def test_consume_from_a_timestamp_in_the_middle_of_the_log(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    ok("topics", "create", "stamped-reads", "-p", "3", bootstrap=b)
    base_ms, when = _timestamped(b, "stamped-reads")

    def read_from(at: str) -> set[tuple[str, str, str]]:
        out = ok("consume", "stamped-reads", "--from-timestamp", at, "--idle-timeout-ms", "2000",
                 "--print-timestamp", "--print-partition", "--print-offset", bootstrap=b)
        return {tuple(line.split("\t")[:3]) for line in out.splitlines()}

    def expected(seconds: float) -> set[tuple[str, str, str]]:
        first = _first_at_or_after(seconds)
        return {(f"CreateTime:{base_ms + s * 1000}", f"Partition:{p}", f"Offset:{o}")
                for p, stamps in STAMPS.items() for o, s in enumerate(stamps) if o >= first[p]}

    got = read_from(when)
    assert got == expected(AT - 0.5)
    assert len(got) == 5 + 7 + 0
    # milliseconds since the epoch, exactly on a record's timestamp: that record is included
    assert read_from(str(base_ms + 3000)) == expected(3)


def test_active_group_members_state_and_delete(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    ok("topics", "create", "live", "-p", "3", bootstrap=b)
    consumer = KafkaConsumer("live", bootstrap_servers=b, group_id="watchers",
                             client_id="watcher-1", session_timeout_ms=6000)
    try:
        poll_until_assigned(consumer)
        members = rows(ok("groups", "describe", "watchers", "--members", bootstrap=b), "GROUP")
        assert len(members) == 1
        assert members[0][0] == "watchers" and members[0][3:] == ["/127.0.0.1", "watcher-1", "3"]
        state = rows(ok("groups", "describe", "watchers", "--state", bootstrap=b), "GROUP")
        assert state == [["watchers", f"{b}", "(0)", "range", "Stable", "1"]]
        offsets = rows(ok("groups", "describe", "watchers", bootstrap=b), "GROUP")
        assert [r[2] for r in offsets] == ["0", "1", "2"]  # assigned, nothing committed yet
        assert all(r[3] == "-" and r[6].startswith("watcher-1") for r in offsets)
        assert [r[0] for r in rows(ok("groups", "list", "--state", "Stable", bootstrap=b),
                                   "GROUP")] == ["watchers"]

        err = failed("groups", "reset-offsets", "watchers", "--all-topics", "--to-latest",
                     "--execute", bootstrap=b)
        assert "inactive" in err and "Stable" in err
        assert "NON_EMPTY_GROUP" in failed("groups", "delete", "watchers", bootstrap=b)
    finally:
        consumer.close()
    assert ok("groups", "delete", "watchers", bootstrap=b) == (
        "Deletion of requested consumer groups ('watchers') was successful.\n")
    assert "does not exist" in failed("groups", "describe", "watchers", bootstrap=b)


def test_configs_describe_and_alter(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    ok("topics", "create", "cfg", bootstrap=b)
    ok("configs", "alter", "--topic", "cfg", "--add-config",
       "retention.ms=60000,cleanup.policy=compact", bootstrap=b)
    described = ok("configs", "describe", "--topic", "cfg", bootstrap=b)
    assert described.startswith("Dynamic configs for topic cfg are:\n")
    assert rows(described, "NAME") == [
        ["cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG", "false", "false"],
        ["retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG", "false", "false"]]
    ok("configs", "alter", "--topic", "cfg", "--delete-config", "cleanup.policy", bootstrap=b)
    everything = rows(ok("configs", "describe", "--topic", "cfg", "--all", bootstrap=b), "NAME")
    by_name = {r[0]: r for r in everything}
    assert by_name["cleanup.policy"][1:3] == ["delete", "DEFAULT_CONFIG"]
    assert by_name["retention.ms"][1:3] == ["60000", "DYNAMIC_TOPIC_CONFIG"]
    assert "max.message.bytes" in by_name

    ok("configs", "alter", "--broker", "0", "--add-config", "log.retention.ms=600000", bootstrap=b)
    assert ["log.retention.ms", "600000", "DYNAMIC_BROKER_CONFIG", "false", "false"] in rows(
        ok("configs", "describe", "--broker", "0", bootstrap=b), "NAME")

    err = failed("configs", "alter", "--topic", "cfg", "--add-config", "no.such.key=1", bootstrap=b)
    assert "no.such.key" in err
    assert "topic 'gone' does not exist" in failed("configs", "describe", "--topic", "gone",
                                                   bootstrap=b)
    assert "exactly one of --topic or --broker" in failed("configs", "describe", bootstrap=b)


@pytest.mark.parametrize("args", [
    ("topics", "list"), ("groups", "list"), ("configs", "describe", "--broker", "0"),
    ("consume", "t", "-n", "1"),
])
def test_unreachable_broker_is_a_clear_error(args: tuple[str, ...]) -> None:
    dead = f"127.0.0.1:{free_port()}"
    err = failed(*args, "--timeout", "1", bootstrap=dead)
    assert f"Error: cannot reach a broker at {dead}" in err


def test_produce_to_unreachable_broker_fails(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    r = odradek("produce", "t", "-b", dead, "--timeout", "1", input=b"x\n")
    assert r.returncode == 1 and f"cannot reach a broker at {dead}" in r.stderr.decode()


# every command and group of `odradek` ("" is the top level); a test below checks this list
# against the command tree, so a new command must be added here and so gets its help tested
COMMANDS = [
    "", "serve", "dump-log",
    "topics", "topics list", "topics describe", "topics create", "topics alter", "topics delete",
    "topics reassign",
    "groups", "groups list", "groups describe", "groups delete", "groups delete-offsets",
    "groups reset-offsets",
    "configs", "configs describe", "configs alter",
    "produce", "consume",
    "perf", "perf produce", "perf consume", "perf e2e",
    "pipeline", "pipeline clickstream",
    "cluster", "cluster up", "cluster status", "cluster down", "cluster zk-dump",
    "cluster start", "cluster stop", "cluster restart", "cluster kill", "cluster add-broker",
    "transactions", "transactions list", "transactions describe",
    "acls", "acls list", "acls add", "acls remove",
    "console",
]
# leaf commands without --bootstrap-server: they reach no broker, or (cluster) find the local
# cluster's brokers and ZooKeeper from its --dir
LOCAL_ONLY = {"serve", "dump-log", "cluster up", "cluster status", "cluster down", "cluster zk-dump",
              "cluster start", "cluster stop", "cluster restart", "cluster kill", "cluster add-broker"}


def test_every_command_is_in_the_help_list() -> None:
    import click

    from clients.cli import main

    def walk(cmd: click.Command, path: tuple[str, ...]) -> Iterator[str]:
        yield " ".join(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, (*path, name))

    assert sorted(walk(main, ())) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c or "odradek")
def test_help_has_examples(command: str) -> None:
    r = odradek(*command.split(), "--help")
    assert r.returncode == 0, r.stderr.decode()
    text = r.stdout.decode()
    _, sep, examples = text.partition("Examples:\n")
    if not sep:
        _, sep, examples = text.partition("Example:\n")
    assert sep, text
    block = examples.split("\n\n", 1)[0].splitlines()
    # each example line runs this very command (the checks that they parse are in
    # tests/unit/clients/test_cli_wiring.py)
    assert block and all(f"odradek {command}".rstrip() in line for line in block
                         if not line.strip().startswith("export ")), block
    is_group = "\nCommands:\n" in text
    if command and not is_group and command not in LOCAL_ONLY:
        assert "-b, --bootstrap-server" in text
        assert "env var:" in text and "ODRADEK_BOOTSTRAP" in text
        assert "default: localhost:9092" in text
        # Kafka's client properties for every client it builds
        assert "--command-config FILE" in text and "ODRADEK_COMMAND_CONFIG" in text


def test_produce_of_nothing_to_a_missing_topic_says_it_was_created(broker: BrokerProcess) -> None:
    """`Produced 0 records` and exit 0 for a topic that did not exist misled (issue #21 §6): the
    topic is asked for before any input is read, as kafka-console-producer's first send does."""
    r = odradek("produce", "made-by-produce", bootstrap=broker.bootstrap, input=b"")
    assert r.returncode == 0, r.stderr.decode()
    assert "Created topic made-by-produce" in r.stderr.decode()
    assert "made-by-produce" in ok("topics", "list", bootstrap=broker.bootstrap).split()
    again = odradek("produce", "made-by-produce", bootstrap=broker.bootstrap, input=b"")
    assert "Created topic" not in again.stderr.decode() and "Produced 0 records" in again.stderr.decode()


def test_produce_to_a_missing_topic_without_auto_create_is_refused(start_broker: Any) -> None:
    b = start_broker(None, None, "auto.create.topics.enable=false")
    err = odradek("produce", "absent", "--timeout", "2", bootstrap=b.bootstrap, input=b"x\n").stderr.decode()
    assert "Error: topic 'absent' does not exist and the broker did not create it" in err, err
    assert "absent" not in ok("topics", "list", bootstrap=b.bootstrap).split()


@pytest.mark.parametrize("item", ["log.retention.ms", "=1"])
def test_override_without_key_and_value_is_a_usage_error(item: str) -> None:
    r = odradek("serve", "--override", item)
    assert r.returncode == 2 and "expected KEY=VALUE" in r.stderr.decode(), r.stderr.decode()
