"""Kafka 3.9's own command-line tools against Odradek, run through the main classes that
`bin/kafka-*.sh` run: every assertion reads what the tool printed or the broker state it left
(through the tool itself or kafka-python), never just its exit code.

One broker serves the module: each test works on its own topics and groups, so state does not
interfere, and the module pays for one broker start instead of one per test."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time
import warnings
from pathlib import Path

import pytest

from tests.broker_process import FAST_GROUPS, BrokerProcess, module_broker
from tests.compat.jvm import java_command, run_tool

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated importlib call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
API_VERSIONS = "kafka.admin.BrokerApiVersionsCommand"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


broker = module_broker("tools", FAST_GROUPS)


def tool(broker: BrokerProcess, main_class: str, *args: str) -> str:
    """Run a tool with `--bootstrap-server` pointing at `broker`; its stdout."""
    return run_tool(main_class, "--bootstrap-server", broker.bootstrap, *args).stdout


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1, *extra: str) -> None:
    out = tool(broker, TOPICS, "--create", "--topic", name, "--partitions", str(partitions),
               "--replication-factor", "1", *extra)
    assert out.strip() == f"Created topic {name}."


def produce_with_timestamps(broker: BrokerProcess, topic: str, timestamps: list[int], first: int = 0) -> None:
    """Records i = (key k<i>, value v<i>, the i-th timestamp) to partition 0, acknowledged; i
    counts from `first`."""
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i, ts in enumerate(timestamps, first):
            p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0, timestamp_ms=ts).get(timeout=30)
    finally:
        p.close()


def committed(broker: BrokerProcess, group: str) -> dict[tuple[str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
    finally:
        admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}


def table(out: str, first_column: str) -> list[dict[str, str]]:
    """Rows of a fixed-width table the group tool prints, cut at its header's column starts (a
    cell may be empty, e.g. ASSIGNMENT-STRATEGY of an empty group)."""
    lines = [line for line in out.splitlines() if line.strip()]
    for i, header in enumerate(lines):
        if header.startswith(first_column):
            cols = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \(\S+\))?", header)]
            ends = [start for start, _ in cols[1:]] + [None]
            return [{name: row[start:end].strip() for (start, name), end in zip(cols, ends, strict=True)}
                    for row in lines[i + 1:] if not row.startswith(first_column)]
    raise AssertionError(f"no table headed {first_column!r} in:\n{out}")


# -- kafka-topics ------------------------------------------------------------------------------------


def test_topics_create_describe_list_alter_delete(broker: BrokerProcess) -> None:
    create_topic(broker, "tt-orders", 3, "--config", "retention.ms=12345")
    create_topic(broker, "tt-plain", 1)
    assert {"tt-orders", "tt-plain"} <= set(tool(broker, TOPICS, "--list").split())
    assert "__consumer_offsets" not in tool(broker, TOPICS, "--list", "--exclude-internal").split()
    overrides = tool(broker, TOPICS, "--describe", "--topics-with-overrides", "--topic", "tt-.*")
    assert [line.split("\t")[0] for line in overrides.splitlines()] == ["Topic: tt-orders"]

    desc = tool(broker, TOPICS, "--describe", "--topic", "tt-orders")
    head, *parts = desc.strip().splitlines()
    assert re.match(r"Topic: tt-orders\tTopicId: \S{22}\tPartitionCount: 3\tReplicationFactor: 1\t"
                    r"Configs: retention.ms=12345$", head), head
    assert [re.match(r"\tTopic: tt-orders\tPartition: (\d)\tLeader: 0\tReplicas: 0\tIsr: 0\t", p).group(1)  # type: ignore[union-attr]
            for p in parts] == ["0", "1", "2"]

    assert tool(broker, TOPICS, "--alter", "--topic", "tt-orders", "--partitions", "5") == ""
    desc = tool(broker, TOPICS, "--describe", "--topic", "tt-orders")
    assert "PartitionCount: 5" in desc and "Partition: 4\tLeader: 0" in desc
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert c.partitions_for_topic("tt-orders") == {0, 1, 2, 3, 4}
    finally:
        c.close()

    # shrinking is refused with INVALID_PARTITIONS (the message is ZooKeeper-mode Kafka's wording,
    # "Topic currently has 5 partitions, which is higher than the requested 2."; KRaft's differs)
    bad = run_tool(TOPICS, "--bootstrap-server", broker.bootstrap, "--alter", "--topic", "tt-orders",
                   "--partitions", "2", check=False)
    assert bad.returncode == 1
    assert "InvalidPartitionsException" in bad.stderr and " 5 partition" in bad.stderr
    assert "PartitionCount: 5" in tool(broker, TOPICS, "--describe", "--topic", "tt-orders")

    # a topic that exists already, and one that does not
    dup = run_tool(TOPICS, "--bootstrap-server", broker.bootstrap, "--create", "--topic", "tt-orders",
                   "--partitions", "1", check=False)
    assert dup.returncode == 1 and "Topic 'tt-orders' already exists." in dup.stdout + dup.stderr

    assert tool(broker, TOPICS, "--delete", "--topic", "tt-orders") == ""
    assert "tt-orders" not in tool(broker, TOPICS, "--list").split()
    gone = run_tool(TOPICS, "--bootstrap-server", broker.bootstrap, "--describe", "--topic", "tt-orders", check=False)
    assert gone.returncode == 1 and "does not exist as expected" in gone.stdout + gone.stderr


# -- kafka-configs -----------------------------------------------------------------------------------


def dynamic_configs(out: str) -> dict[str, str]:
    """`key=value sensitive=... synonyms=...` lines of `kafka-configs --describe`."""
    return dict(m.groups() for m in re.finditer(r"^  ([\w.]+)=(\S*) sensitive=", out, re.M))


def test_configs_topic_describe_alter(broker: BrokerProcess) -> None:
    create_topic(broker, "tc-configs", 1, "--config", "retention.ms=12345")
    args = ("--entity-type", "topics", "--entity-name", "tc-configs")
    out = tool(broker, CONFIGS, "--describe", *args)
    assert out.startswith("Dynamic configs for topic tc-configs are:\n")
    assert dynamic_configs(out) == {"retention.ms": "12345"}

    out = tool(broker, CONFIGS, "--alter", *args, "--add-config", "retention.ms=999,cleanup.policy=compact")
    assert out.strip() == "Completed updating config for topic tc-configs."
    assert dynamic_configs(tool(broker, CONFIGS, "--describe", *args)) == {
        "retention.ms": "999", "cleanup.policy": "compact"}

    tool(broker, CONFIGS, "--alter", *args, "--delete-config", "retention.ms")
    assert dynamic_configs(tool(broker, CONFIGS, "--describe", *args)) == {"cleanup.policy": "compact"}

    # --all: every topic config with its effective value, the deleted override back at the default
    everything = dynamic_configs(tool(broker, CONFIGS, "--describe", "--all", *args))
    assert everything["retention.ms"] == "604800000"
    assert everything["cleanup.policy"] == "compact"
    assert everything["segment.bytes"] == "1073741824"

    bad = run_tool(CONFIGS, "--bootstrap-server", broker.bootstrap, "--alter", *args, "--add-config",
                   "retention.ms=not-a-number", check=False)
    assert bad.returncode != 0 and "InvalidConfigurationException" in bad.stdout + bad.stderr
    assert dynamic_configs(tool(broker, CONFIGS, "--describe", *args)) == {"cleanup.policy": "compact"}


def test_configs_broker_describe_alter(broker: BrokerProcess) -> None:
    args = ("--entity-type", "brokers", "--entity-name", "0")
    out = tool(broker, CONFIGS, "--describe", *args)
    assert out.startswith("Dynamic configs for broker 0 are:")

    out = tool(broker, CONFIGS, "--describe", "--all", *args)
    assert out.startswith("All configs for broker 0 are:\n")
    every = dynamic_configs(out)
    assert every["broker.id"] == "0"
    assert every["log.dirs"] == str(broker.log_dir)
    assert every["group.initial.rebalance.delay.ms"] == "0"  # the fixture's override

    tool(broker, CONFIGS, "--alter", *args, "--add-config", "log.retention.ms=1000000")
    assert dynamic_configs(tool(broker, CONFIGS, "--describe", *args)) == {"log.retention.ms": "1000000"}
    tool(broker, CONFIGS, "--alter", *args, "--delete-config", "log.retention.ms")
    assert dynamic_configs(tool(broker, CONFIGS, "--describe", *args)) == {}


# -- console producer and consumer ----------------------------------------------------------------------


def test_console_producer_consumer_round_trip_every_codec(broker: BrokerProcess) -> None:
    """Each codec through ConsoleProducer (keys and headers parsed from the line), stored as the
    producer compressed it (the segment's batch header says so), read back by ConsoleConsumer."""
    from clients.dump_log import dump_log_file

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(f"tcc-{codec}", 1, 1) for codec in CODECS])
    finally:
        admin.close()
    for codec in CODECS:
        topic = f"tcc-{codec}"
        lines = "".join(f"h1:{codec},h2:x{i}\tk{i}\t{codec}-value-{i}-{'y' * 200}\n" for i in range(3))
        run_tool(CONSOLE_PRODUCER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
                 "--compression-codec", codec, "--sync", "--property", "parse.key=true",
                 "--property", "parse.headers=true", input=lines)
        segment = broker.log_dir / f"{topic}-0" / f"{0:020d}.log"
        batches = [line for line in dump_log_file(segment, False, False) if line.startswith("baseOffset")]
        assert batches, f"nothing stored for {topic}"
        assert all(f"compresscodec: {codec} " in b and "isvalid: true" in b for b in batches), batches

    out = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--include", "tcc-.*",
                   "--from-beginning", "--max-messages", str(3 * len(CODECS)), "--timeout-ms", "30000",
                   "--property", "print.key=true", "--property", "print.offset=true",
                   "--property", "print.headers=true", "--property", "print.partition=true").stdout
    got = sorted(out.splitlines())
    want = sorted(f"Partition:0\tOffset:{i}\th1:{codec},h2:x{i}\tk{i}\t{codec}-value-{i}-{'y' * 200}"
                  for codec in CODECS for i in range(3))
    assert got == want


# -- kafka-consumer-groups --------------------------------------------------------------------------------


def reset(broker: BrokerProcess, group: str, *how: str, topic: str = "tg-events") -> dict[str, str]:
    """One --reset-offsets --execute; the NEW-OFFSET row it printed."""
    out = tool(broker, GROUPS, "--reset-offsets", "--group", group, "--topic", topic, *how, "--execute")
    # Kafka prints the header and the row on one line (its format starts each row with %n)
    cells = out.split()
    assert cells[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], out
    return dict(zip(["group", "topic", "partition", "offset"], cells[4:8], strict=True))


def test_consumer_groups_list_describe_reset_delete(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = "tg-events", "tg-app"
    create_topic(broker, topic)
    now = int(time.time() * 1000)
    base = now - 10 * 3600_000  # ten records a minute apart, ten hours ago
    produce_with_timestamps(broker, topic, [base + i * 60_000 for i in range(10)])

    # a console consumer reads everything in the group and commits on close
    run_tool(CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group,
             "--from-beginning", "--max-messages", "10", "--timeout-ms", "30000")
    assert committed(broker, group) == {(topic, 0): 10}

    assert group in tool(broker, GROUPS, "--list").split()
    assert {"GROUP": group, "STATE": "Empty"} in table(tool(broker, GROUPS, "--list", "--state"), "GROUP")
    (row,) = table(tool(broker, GROUPS, "--describe", "--group", group), "GROUP")
    assert (row["TOPIC"], row["PARTITION"], row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == (
        topic, "0", "10", "10", "0")
    (state,) = table(tool(broker, GROUPS, "--describe", "--group", group, "--state"), "GROUP")
    assert state["STATE"] == "Empty" and state["#MEMBERS"] == "0"

    # a live member: --members and --state show it while it holds the partition; it has joined,
    # been assigned and fetched once it prints a record produced after its start
    member = subprocess.Popen(
        java_command(CONSOLE_CONSUMER, ["--bootstrap-server", broker.bootstrap, "--topic", topic,
                                        "--group", group, "--consumer-property", "client.id=tg-member"]),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        printed: queue.Queue[str] = queue.Queue()
        assert member.stdout is not None
        reader = threading.Thread(target=lambda: [printed.put(line) for line in member.stdout], daemon=True)
        reader.start()
        produce_with_timestamps(broker, topic, [now], first=10)
        assert printed.get(timeout=60) == "v10\n"
        out = tool(broker, GROUPS, "--describe", "--group", group, "--members", "--verbose")
        (m,) = table(out, "GROUP")
        # Kafka 3.9's Java ConsumerGroupCommand prints the partitions without the topic name: "(0)"
        assert (m["CLIENT-ID"], m["#PARTITIONS"], m["ASSIGNMENT"]) == ("tg-member", "1", "(0)"), out
        assert m["HOST"] == "/127.0.0.1"
        (state,) = table(tool(broker, GROUPS, "--describe", "--group", group, "--state"), "GROUP")
        assert (state["STATE"], state["#MEMBERS"], state["ASSIGNMENT-STRATEGY"]) == ("Stable", "1", "range")
        # offsets of an active group cannot be reset
        busy = run_tool(GROUPS, "--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", group,
                        "--topic", topic, "--to-earliest", "--execute", check=False)
        assert "Assignments can only be reset if the group 'tg-app' is inactive, but the current state is Stable." \
            in busy.stdout + busy.stderr
    finally:
        member.terminate()
        member.wait(30)
        reader.join(5)
        member.stdout.close()
    assert committed(broker, group) == {(topic, 0): 11}  # committed on close

    assert reset(broker, group, "--to-earliest")["offset"] == "0"
    assert reset(broker, group, "--to-latest")["offset"] == "11"
    assert reset(broker, group, "--to-offset", "3")["offset"] == "3"
    assert reset(broker, group, "--shift-by", "2")["offset"] == "5"
    assert reset(broker, group, "--shift-by", "-100")["offset"] == "0"  # clamped to the log start
    assert reset(broker, group, "--to-offset", "6")["offset"] == "6"
    assert reset(broker, group, "--to-current")["offset"] == "6"
    # the first record at or after 4.5 minutes past the first one is the sixth (offset 5)
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((base + 270_000) // 1000)) + ".000+00:00"
    assert reset(broker, group, "--to-datetime", when)["offset"] == "5"
    # --by-duration is counted back from the tool's own clock, read seconds after this one (a JVM
    # starting on a loaded machine): aim one second past the eighth record (offset 7, 7 minutes after
    # the first), so the first record at or after the tool's moment is offset 8 for any delay under
    # a minute, however long the test took to get here
    back = int(time.time() - (base + 420_000) / 1000) - 1
    duration = f"PT{back // 3600}H{back % 3600 // 60}M{back % 60}S"
    assert reset(broker, group, "--by-duration", duration)["offset"] == "8"
    assert committed(broker, group) == {(topic, 0): 8}

    plan = tmp_path / "plan.csv"
    plan.write_text(tool(broker, GROUPS, "--reset-offsets", "--group", group, "--topic", f"{topic}:0",
                         "--to-offset", "2", "--export", "--dry-run"))
    assert plan.read_text().strip() == f"{topic},0,2"  # one group: Kafka leaves the group column out
    assert committed(broker, group) == {(topic, 0): 8}  # a dry run changes nothing
    out = tool(broker, GROUPS, "--reset-offsets", "--group", group, "--from-file", str(plan), "--execute")
    assert out.split()[4:8] == [group, topic, "0", "2"]
    assert committed(broker, group) == {(topic, 0): 2}

    out = tool(broker, GROUPS, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out
    assert group not in tool(broker, GROUPS, "--list").split()
    assert committed(broker, group) == {}

    # a reset creates an unknown group's offsets; deleting its last offsets ends it, as in Kafka
    other = "tg-other"
    assert reset(broker, other, "--to-offset", "4")["offset"] == "4"
    assert committed(broker, other) == {(topic, 0): 4}
    out = tool(broker, GROUPS, "--delete-offsets", "--group", other, "--topic", topic)
    assert f"Request succeed for deleting offsets with topic {topic} group {other}" in out
    assert re.search(rf"TOPIC +PARTITION +STATUS +{topic} +0 +Successful", out), out  # one line, as reset's
    assert committed(broker, other) == {}
    assert other not in tool(broker, GROUPS, "--list").split()


# -- perf tools ---------------------------------------------------------------------------------------------


def test_producer_and_consumer_performance(broker: BrokerProcess) -> None:
    topic, n = "tp-perf", 3000
    create_topic(broker, topic, 2)
    out = run_tool(PRODUCER_PERF, "--topic", topic, "--num-records", str(n), "--record-size", "200",
                   "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
                   "acks=all", "compression.type=lz4", "linger.ms=5").stdout
    assert re.search(rf"^{n} records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency", out, re.M), out
    ends = tool(broker, GET_OFFSETS, "--topic", topic, "--time", "-1")
    assert sum(int(line.rsplit(":", 1)[1]) for line in ends.split()) == n

    out = tool(broker, CONSUMER_PERF, "--topic", topic, "--messages", str(n), "--timeout", "30000",
               "--group", "tp-perf-group")
    header, row = [line for line in out.splitlines() if line.strip()][-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")], strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == n
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(n * 200 / 1024 / 1024, rel=0.01)


# -- kafka-get-offsets, kafka-delete-records ---------------------------------------------------------------


def test_get_offsets_and_delete_records(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "td-records"
    create_topic(broker, topic)
    base = int(time.time() * 1000) - 3600_000
    stamps = [base + i * 1000 for i in range(20)]
    stamps[12] = base + 100_000  # the largest timestamp, in the middle of the log
    produce_with_timestamps(broker, topic, stamps)

    def offsets(*args: str) -> str:
        return tool(broker, GET_OFFSETS, "--topic", topic, *args).strip()

    assert offsets() == f"{topic}:0:20"  # latest by default
    assert offsets("--time", "-1") == f"{topic}:0:20"
    assert offsets("--time", "-2") == f"{topic}:0:0"
    assert offsets("--time", "-3") == f"{topic}:0:12"  # max timestamp
    assert offsets("--time", str(base + 5500)) == f"{topic}:0:6"  # first at or after
    assert offsets("--time", str(base + 200_000)) == ""  # none that late: nothing printed, as Kafka
    assert tool(broker, GET_OFFSETS, "--topic-partitions", "td-rec.*:0,nope:1").strip() == f"{topic}:0:20"

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 7}]}))
    out = tool(broker, DELETE_RECORDS, "--offset-json-file", str(spec))
    assert f"partition: {topic}-0\tlow_watermark: 7" in out
    assert offsets("--time", "-2") == f"{topic}:0:7"
    # past the end: Kafka's OFFSET_OUT_OF_RANGE, reported per partition
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 99}]}))
    out = tool(broker, DELETE_RECORDS, "--offset-json-file", str(spec))
    assert f"partition: {topic}-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException" in out
    assert offsets("--time", "-2") == f"{topic}:0:7"


# -- kafka-log-dirs, kafka-broker-api-versions ------------------------------------------------------------


def test_log_dirs(broker: BrokerProcess) -> None:
    create_topic(broker, "tl-a", 2)
    produce_with_timestamps(broker, "tl-a", [int(time.time() * 1000)] * 5)
    out = tool(broker, LOG_DIRS, "--describe", "--topic-list", "tl-a")
    assert out.startswith("Querying brokers for log directories information\n"
                          "Received log directory information from brokers 0\n")
    report = json.loads(out.splitlines()[-1])
    (b,) = report["brokers"]
    (d,) = b["logDirs"]
    assert (b["broker"], d["logDir"], d["error"]) == (0, str(broker.log_dir), None)
    sizes = {p["partition"]: p["size"] for p in d["partitions"]}
    assert sizes == {f"tl-a-{i}": (broker.log_dir / f"tl-a-{i}" / f"{0:020d}.log").stat().st_size for i in (0, 1)}
    assert sizes["tl-a-0"] > 0 and sizes["tl-a-1"] == 0
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in d["partitions"])


def test_broker_api_versions(broker: BrokerProcess) -> None:
    """Every API the tool finds usable is one Odradek advertises, at the range Odradek registers."""
    from broker.apis.registry import advertised, load_all

    load_all()
    out = tool(broker, API_VERSIONS)
    assert out.startswith(f"{broker.bootstrap} (id: 0 rack: null) -> (\n")
    usable = {}
    for m in re.finditer(r"^\t\w+\((\d+)\): (\d+)(?: to (\d+))? \[usable: (\d+)\]", out, re.M):
        key, low, high, use = int(m[1]), int(m[2]), int(m[3] or m[2]), int(m[4])
        usable[key] = (low, high)
        assert use == high  # the client's 3.9 range covers everything we advertise
    assert usable == {key: (low, high) for key, low, high in advertised()}
    assert "\tProduce(0): 0 to 11 [usable: 11]" in out
    assert "\tAddPartitionsToTxn(24): 0 to 5 [usable: 5]" in out
    assert "\tDescribeAcls(29): 0 to 3 [usable: 3]" in out
    assert "\tDescribeUserScramCredentials(50): 0 [usable: 0]" in out  # served on a single node too
