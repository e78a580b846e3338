"""docker-compose.yml as users run it: `docker compose up -d --wait` at the repository root gives
ZooKeeper and three brokers that host clients (kafka-python, confluent-kafka, Kafka's Java
console tools) reach through the published ports; brokers killed, restarted and stopped through
compose lose no acknowledged record; data lives in named volumes; the spark profile's pipeline
prints its finished windows. The tests share one project and run in file order."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import warnings

import pytest
from confluent_kafka.admin import AdminClient

from tests.broker_process import free_port
from tests.compat.jvm import run_tool
from tests.compose.conftest import BROKERS
from tests.compose.docker import ComposeProject, run
from tests.compose.load import (
    AckedProducer,
    check_nothing_lost,
    create_topic,
    partition_state,
    wait_full_isr,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's importlib.resources use
    from kafka import KafkaConsumer, KafkaProducer

CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


def test_compose_file_is_valid_and_names_what_users_get(docker_engine):
    """`docker compose config` accepts the file with its defaults (public base images, host ports
    9092-9094) and the spark profile."""
    out = run(["docker", "compose", "--profile", "spark", "config", "--format", "json"]).stdout
    config = json.loads(out)
    services = config["services"]
    assert set(services) == {"zookeeper", *BROKERS, "pipeline"}
    for i, name in enumerate(BROKERS, 1):
        broker = services[name]
        env = broker["environment"]
        port = 9091 + i
        assert env["KAFKA_BROKER_ID"] == str(i)
        assert env["KAFKA_ADVERTISED_LISTENERS"] == f"INTERNAL://{name}:9092,EXTERNAL://localhost:{port}"
        assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        assert [(p["host_ip"], p["published"], p["target"]) for p in broker["ports"]] == [("127.0.0.1", str(port), port)]
        assert broker["image"] == "odradek:latest"
        assert broker["depends_on"]["zookeeper"]["condition"] == "service_healthy"
        assert broker["init"] is True
    assert services["broker-1"]["build"]["args"]["BASE"] == "python:3.11-slim"  # one build, three brokers
    assert services["pipeline"]["profiles"] == ["spark"]


def test_all_healthy_and_the_brokers_form_one_cluster(cluster: ComposeProject):
    for service in ["zookeeper", *BROKERS]:
        assert cluster.state(service)["Health"]["Status"] == "healthy", service
    deadline = time.monotonic() + 30
    while True:  # the image's probe, now: broker 2 knows all three (their registrations propagate)
        health = cluster.compose("exec", "-T", "broker-2", "python3", "-m", "broker.healthcheck", check=False).stdout
        if health.startswith("healthy: brokers [1, 2, 3], controller") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert health.startswith("healthy: brokers [1, 2, 3], controller"), health
    user = run(["docker", "exec", cluster.container("broker-1"), "id", "-un"]).stdout.strip()
    assert user == "odradek"  # not root


def test_host_clients_produce_and_consume_rf3(cluster: ComposeProject):
    create_topic(cluster.bootstrap, "host-clients")
    leaders = {leader for leader, _ in partition_state(cluster.bootstrap, "host-clients").values()}
    assert leaders == {1, 2, 3}  # every broker leads one: every published port is used

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    try:
        for i in range(30):
            producer.send("host-clients", f"python-{i}".encode(), partition=i % 3).get(timeout=30)
    finally:
        producer.close()
    lines = "".join(f"java-{i}\n" for i in range(30))
    run_tool(CONSOLE_PRODUCER, "--bootstrap-server", cluster.bootstrap, "--topic", "host-clients",
             "--producer-property", "acks=all", "--sync", input=lines)
    with AckedProducerOnce(cluster.bootstrap, "host-clients") as rdkafka:
        rdkafka.wait_acked(30)

    consumer = KafkaConsumer("host-clients", bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                             group_id="compose-python")
    got: set[str] = set()
    try:  # bounded: joining the group first creates __consumer_offsets (RF 3)
        deadline = time.monotonic() + 90
        while len(got) < 90 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.update(r.value.decode() for r in records)
    finally:
        consumer.close()
    out = run_tool(CONSOLE_CONSUMER, "--bootstrap-server", cluster.bootstrap, "--topic", "host-clients",
                   "--group", "compose-java", "--from-beginning", "--max-messages", "90",
                   "--timeout-ms", "30000").stdout
    want = {f"{who}-{i}" for who in ("python", "java") for i in range(30)}
    assert want <= got and len(got) == 90
    assert want <= set(out.split()) and len(out.split()) == 90


def until(check, what: str, timeout: float) -> None:
    """Bounded poll of another program's state (the brokers' metadata)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.5)


class AckedProducerOnce:
    """An AckedProducer for a bounded burst: started on enter, stopped on exit."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = AckedProducer(bootstrap, topic, rate=500, limit=30)

    def __enter__(self) -> AckedProducer:
        return self.producer.start()

    def __exit__(self, *exc: object) -> None:
        self.producer.stop()


def test_killed_leader_acks_all_goes_on_and_it_rejoins(cluster: ComposeProject):
    """`docker compose kill broker-2` (SIGKILL) while an idempotent acks=all producer writes to an
    RF 3, min.insync.replicas=2 topic: the writes go on through the others; `docker compose
    start broker-2` brings it back into every ISR; nothing acknowledged is lost."""
    topic = "kill-broker-2"
    create_topic(cluster.bootstrap, topic)
    assert any(leader == 2 for leader, _ in partition_state(cluster.bootstrap, topic).values())
    producer = AckedProducer(cluster.bootstrap, topic).start()
    try:
        producer.wait_acked(200)
        cluster.compose("kill", "broker-2")
        # its partitions move once ZooKeeper expires its session (zookeeper.session.timeout.ms)
        until(lambda: all(leader not in (-1, 2) for leader, _ in partition_state(cluster.bootstrap, topic).values()),
              "broker 2's leaderships moved", 90)
        assert cluster.state("broker-2")["Status"] == "exited"  # killed, and not restarted
        producer.wait_acked(500)  # on through brokers 1 and 3
        cluster.compose("start", "broker-2")
        cluster.wait_healthy(["broker-2"])
        wait_full_isr(cluster.bootstrap, topic)
        producer.wait_acked(200)
    finally:
        producer.stop()
    assert check_nothing_lost(cluster.bootstrap, producer) >= 900


def test_rolling_restart_under_load_loses_nothing(cluster: ComposeProject):
    """`docker compose restart broker-N` for each broker in turn, full ISRs before the next, under
    acks=all load."""
    topic = "rolling-restart"
    create_topic(cluster.bootstrap, topic)
    producer = AckedProducer(cluster.bootstrap, topic).start()
    try:
        producer.wait_acked(200)
        for broker in BROKERS:
            cluster.compose("restart", broker, timeout=180)
            cluster.wait_healthy([broker])
            wait_full_isr(cluster.bootstrap, topic)
            producer.wait_acked(200)
    finally:
        producer.stop()
    assert check_nothing_lost(cluster.bootstrap, producer) >= 800
    for broker in BROKERS:  # each restart's SIGTERM was a controlled shutdown
        assert "Controlled shutdown request returned successfully" in cluster.logs(broker), broker


def test_stop_is_a_controlled_shutdown_exiting_0(cluster: ComposeProject):
    """One broker, then the whole cluster: `docker compose stop` sends SIGTERM, each broker shuts
    down through the controller (leaderships moved while another replica lives) and exits 0."""
    cluster.compose("stop", "broker-3", timeout=120)
    state = cluster.state("broker-3")
    assert (state["Status"], state["ExitCode"]) == ("exited", 0)
    log = cluster.logs("broker-3")
    assert "signal received: shutting down" in log
    assert "Controlled shutdown request returned successfully" in log
    cluster.compose("start", "broker-3")
    cluster.wait_healthy(["broker-3"])

    cluster.compose("stop", timeout=300)  # every broker at once, then ZooKeeper
    for broker in BROKERS:
        state = cluster.state(broker)
        assert (state["Status"], state["ExitCode"]) == ("exited", 0), (broker, state)
        assert cluster.logs(broker).count("Starting controlled shutdown") >= 1, broker
    cluster.compose("start", timeout=300)
    cluster.wait_healthy(["zookeeper", *BROKERS])


REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
WITH_BROKER_4 = ("-f", "docker-compose.yml", "-f", "docker/broker-4.override.yml")


def test_broker_4_joins_and_takes_replicas_by_reassignment(cluster: ComposeProject, tmp_path):
    """Scaling out as docs/operations.md says: broker 4 from docker/broker-4.override.yml, then
    Kafka's kafka-reassign-partitions moves one replica of each partition to it; the data moves
    along and broker 4 joins every ISR."""
    topic = "scale-out"
    create_topic(cluster.bootstrap, topic)
    with AckedProducerOnce(cluster.bootstrap, topic) as producer:
        producer.wait_acked(30)
    cluster.extra_env["ODRADEK_PORT_4"] = str(free_port())
    try:
        cluster.compose(*WITH_BROKER_4, "up", "-d", "--wait", "broker-4", timeout=300)
        before = partition_state(cluster.bootstrap, topic)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        replicas = {p: list(pm.replicas) for p, pm in admin.list_topics(topic, timeout=20).topics[topic].partitions.items()}
        plan = {"version": 1, "partitions": [
            {"topic": topic, "partition": p, "replicas": [*r[:-1], 4]} for p, r in sorted(replicas.items())]}
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(json.dumps(plan))
        run_tool(REASSIGN, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan_file),
                 "--execute", timeout=90)
        deadline = time.monotonic() + 120
        while True:
            out = run_tool(REASSIGN, "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file",
                           str(plan_file), "--verify", timeout=90).stdout
            if out.count("is completed") == len(replicas):
                break
            assert time.monotonic() < deadline, out
        wait_full_isr(cluster.bootstrap, topic)
        after = partition_state(cluster.bootstrap, topic)
        assert all(4 in isr for _, isr in after.values()), (before, after)
        assert check_nothing_lost(cluster.bootstrap, producer) == 30
    finally:
        cluster.compose(*WITH_BROKER_4, "rm", "--stop", "--force", "--volumes", "broker-4", timeout=180, check=False)
        run(["docker", "volume", "rm", "-f", f"{cluster.name}_broker-4-data"], check=False)


def test_data_survives_down_and_up_but_not_down_v(cluster: ComposeProject):
    topic = "durable"
    create_topic(cluster.bootstrap, topic)
    with AckedProducerOnce(cluster.bootstrap, topic) as producer:
        producer.wait_acked(30)
    cluster.compose("down", "--timeout", "60", timeout=300)
    cluster.compose("up", "-d", "--wait", timeout=300)
    assert check_nothing_lost(cluster.bootstrap, producer) == 30  # named volumes kept the logs

    cluster.compose("down", "-v", "--timeout", "60", timeout=300)
    volumes = run(["docker", "volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={cluster.name}"])
    assert volumes.stdout.strip() == ""
    cluster.compose("up", "-d", "--wait", timeout=300)
    topics = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=30).topics
    assert topic not in topics  # a new cluster: the volumes went with down -v


@pytest.mark.slow
def test_spark_profile_pipeline_prints_finished_windows(cluster: ComposeProject):
    """`docker compose --profile spark run pipeline`: the clickstream job in PySpark against the
    three brokers over the compose network, printing each window as the watermark closes it."""
    cluster.extra_env.update({"ODRADEK_PIPELINE_EVENTS": "900", "ODRADEK_PIPELINE_RATE": "30"})  # 30 s
    result = cluster.compose("--profile", "spark", "run", "--rm", "pipeline", timeout=600)
    out = result.stdout
    windows = [line for line in out.splitlines() if re.match(r"\d\d:\d\d:\d\d-\d\d:\d\d:\d\d  /", line)]
    assert windows, f"no finished windows printed:\n{out[-3000:]}\n{result.stderr[-3000:]}"
    counted = [line for line in out.splitlines() if line.endswith("clicks counted in finished windows")]
    assert counted and int(counted[-1].split()[0]) > 0, out[-3000:]
    assert len(partition_state(cluster.bootstrap, "clicks")) == 3


def test_compose_v1_brings_up_the_same_cluster(images):
    """Debian's docker-compose 1.29 (v1) reads the same file: up, three healthy brokers that
    replicate and serve host clients, down -v."""
    v1 = shutil.which("docker-compose")
    assert v1, "Debian's docker-compose (v1) is missing: run `make test-deps` (scripts/install-system-deps)"
    project = ComposeProject(f"odradek-v1-{os.getpid()}")
    try:
        run([v1, "-p", project.name, "up", "-d"], env=project.env, timeout=300)
        project.wait_healthy(["zookeeper", *BROKERS])
        create_topic(project.bootstrap, "v1")  # RF 3: the brokers found one another
        with AckedProducerOnce(project.bootstrap, "v1") as producer:
            producer.wait_acked(30)
        assert check_nothing_lost(project.bootstrap, producer) == 30
    finally:
        run([v1, "-p", project.name, "down", "-v", "--timeout", "60"], env=project.env, timeout=300, check=False)
