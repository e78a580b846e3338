"""The Java side of the compat suite: where `scripts/install-java-deps` put the jars, and how tests
run Kafka's tools, compile the suite's own Java programs and hand Spark its kafka connector.

Nothing here skips: a missing jar folder or JDK fails the test with the command that installs it."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JAVA_SRC = REPO / "tests" / "compat" / "java"
JARS = REPO / "build" / "java"
KAFKA_LIB = JARS / "kafka"
STREAMS_LIB = JARS / "streams"
LOG4J = JAVA_SRC / "log4j.properties"
INSTALL_HINT = "run `make test-deps` (scripts/install-java-deps) first"


def _require(path: Path, what: str) -> Path:
    if not (path / ".pom-sha256").is_file():
        raise RuntimeError(f"{what} not installed at {path}: {INSTALL_HINT}")
    return path


@functools.cache
def java() -> str:
    exe = shutil.which("java")
    if exe is None:
        raise RuntimeError("java is missing: scripts/install-system-deps installs openjdk-17")
    return exe


def kafka_classpath() -> str:
    """Kafka 3.9's clients, tools and broker, as one class path."""
    return str(_require(KAFKA_LIB, "Kafka 3.9 jars") / "*")


def streams_classpath() -> str:
    """Kafka Streams 3.9 and its RocksDB, to go before Kafka's class path (which has the clients)."""
    return str(_require(STREAMS_LIB, "Kafka Streams 3.9 jars") / "*")


def kafka_version() -> str:
    """The kafka-clients version in build/java/kafka, e.g. '3.9.2'."""
    (jar,) = _require(KAFKA_LIB, "Kafka 3.9 jars").glob("kafka-clients-*.jar")
    return jar.stem.removeprefix("kafka-clients-")


def spark_connector_jars() -> list[str]:
    """Spark's kafka connector for the installed PySpark, as paths for `spark.jars`."""
    import pyspark

    folder = _require(JARS / f"spark-{pyspark.__version__}", f"Spark {pyspark.__version__}'s kafka connector")
    return sorted(str(p) for p in folder.glob("*.jar"))


# Short-lived tools start faster with the C1 compiler only and the serial collector.
TOOL_JVM = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def java_command(main_class: str, args: Sequence[str] = (), *, classpath: str | None = None,
                 jvm_args: Sequence[str] = TOOL_JVM) -> list[str]:
    """A `java` command line running `main_class` on Kafka's class path (after `classpath`), with
    the suite's log4j settings: what Kafka's `bin/*.sh` scripts run, minus the shell."""
    cp = kafka_classpath() if classpath is None else f"{classpath}{os.pathsep}{kafka_classpath()}"
    return [java(), *jvm_args, f"-Dlog4j.configuration=file:{LOG4J}", "-cp", cp, main_class, *args]


def run_tool(main_class: str, *args: str, timeout: float = 120.0, input: str | None = None,
             check: bool = True, classpath: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools to completion (bounded); with `check`, a non-zero exit fails with
    the tool's output."""
    proc = subprocess.run(java_command(main_class, args, classpath=classpath), input=input,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{main_class} {' '.join(args)} exited {proc.returncode}:\n"
                             f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    return proc


def compile_java(sources: Sequence[Path], out_dir: Path, *, classpath: str | None = None) -> str:
    """javac the suite's own Java programs against Kafka's jars (after `classpath`); returns the
    class folder."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac is missing: scripts/install-system-deps installs openjdk-17-jdk-headless")
    out_dir.mkdir(parents=True, exist_ok=True)
    cp = kafka_classpath() if classpath is None else f"{classpath}{os.pathsep}{kafka_classpath()}"
    proc = subprocess.run([javac, "-nowarn", "-d", str(out_dir), "-cp", cp,
                           *map(str, sources)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"javac failed:\n{proc.stdout}\n{proc.stderr}")
    return str(out_dir)
