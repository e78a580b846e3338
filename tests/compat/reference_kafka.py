"""A real Apache Kafka 3.9 broker (KRaft, one node as broker and controller) from the jars in
build/java/kafka, for differential tests and side-by-side benchmarks.

Started the way `kafka-storage.sh format` + `kafka-server-start.sh` start it: StorageTool formats a
fresh log dir with a random cluster id, then `kafka.Kafka` runs with a small heap. Readiness is the
broker's own log line ("Transition from STARTING to STARTED"), not a sleep. Settings that make a
single node usable (replication factors of 1, no initial rebalance delay) are the defaults here, as
in Kafka's quickstart `config/kraft/server.properties`; callers add overrides."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.broker_process import LoggedProcess, free_port
from tests.compat.jvm import java_command, run_tool

BROKER_JVM = ("-Xmx512m", "-Xms512m", "-XX:+UseG1GC", "-Djava.awt.headless=true")
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}


class ReferenceKafka(LoggedProcess):
    """One Kafka 3.9 KRaft node on free loopback ports, data under `work_dir`."""

    what = "reference Kafka"

    def __init__(self, work_dir: Path, overrides: Mapping[str, str] | None = None,
                 port: int | None = None, jvm_args: Sequence[str] = BROKER_JVM) -> None:
        super().__init__()
        self.work_dir = Path(work_dir)
        self.jvm_args = tuple(jvm_args)
        self.log_dir = self.work_dir / "kafka-data"
        self.port = port or free_port()
        self.controller_port = free_port()
        self.overrides = {**SINGLE_NODE, **(overrides or {})}

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> Path:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            **self.overrides,
        }
        path = self.work_dir / "server.properties"
        self.work_dir.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def start(self, timeout: float = 90.0) -> ReferenceKafka:
        config = self._properties()
        if not (self.log_dir / "meta.properties").exists():
            cluster_id = run_tool("kafka.tools.StorageTool", "random-uuid").stdout.strip()
            run_tool("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config))
        self._spawn(java_command("kafka.Kafka", [str(config)], jvm_args=self.jvm_args),
                    "[BrokerServer id=1] Transition from STARTING to STARTED", timeout)
        return self

    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: Kafka's controlled shutdown of a single node."""
        return super().stop(timeout)
