"""One broker and one SparkSession for the whole Spark test run: a JVM start costs seconds and a
2-core CI machine cannot afford one per test. Each test uses its own topics and checkpoints.

The session carries Spark's own `kafka` connector (`spark.jars`, from build/java, installed by
`make test-deps`) beside the `odradek` Python data source: jars can only be given when the JVM
starts, so the tests of both connectors share it (a missing jar folder fails with the command
that installs it)."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker_process import BrokerProcess
from tests.compat.test_java_transactions import SINGLE_BROKER_TXN

with warnings.catch_warnings():
    # kafka-python 3.0.12 calls the deprecated importlib.resources.read_text at import time;
    # importing it once here keeps that out of the tests (later imports hit sys.modules).
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.admin  # noqa: F401

# Tasks and the driver-side planner run in Python workers that Spark starts: they must use this
# interpreter (the venv with kafka-python and the repo on its path), and everything stays on
# loopback so no test depends on the machine's network setup.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data",
                      overrides=["num.partitions=1", *SINGLE_BROKER_TXN]).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from spark_connector import register
    from tests.compat.jvm import spark_connector_jars

    session = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.jars", ",".join(spark_connector_jars()))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def bootstrap(spark_broker: BrokerProcess) -> str:
    return spark_broker.bootstrap


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A directory for checkpoints and Parquet output of one test."""
    return tmp_path
