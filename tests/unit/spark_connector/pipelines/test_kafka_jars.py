"""Where `--source kafka` finds Spark's kafka connector: explicit folder or list, the
repository's build/java, PYSPARK_SUBMIT_ARGS, or a message that names all three."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_connector.pipelines.kafka_jars import KafkaJarsNotFound, kafka_connector_jars

JARS = ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar", "commons-pool2-2.13.1.jar")


def _folder(root: Path, names: tuple[str, ...] = JARS) -> Path:
    root.mkdir(parents=True)
    for n in names:
        (root / n).write_bytes(b"PK")
    return root


@pytest.fixture(autouse=True)
def _no_submit_args(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)


def test_explicit_folder_and_list(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "jars")
    assert kafka_connector_jars(str(folder), "4.2.0", tmp_path) == sorted(
        str(folder / n) for n in JARS)
    listed = f"{folder / JARS[0]}, {folder / JARS[1]}"
    assert kafka_connector_jars(listed, "4.2.0", tmp_path) == [str(folder / JARS[0]),
                                                               str(folder / JARS[1])]


def test_explicit_without_connector_or_missing_file(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "jars", JARS[1:])
    with pytest.raises(KafkaJarsNotFound, match=r"no spark-sql-kafka-0-10_2\.13-"):
        kafka_connector_jars(str(folder), "4.2.0", tmp_path)
    with pytest.raises(KafkaJarsNotFound, match="no such jar file"):
        kafka_connector_jars(str(tmp_path / "nope.jar"), "4.2.0", tmp_path)


def test_repository_build_folder_of_the_spark_version(tmp_path: Path) -> None:
    _folder(tmp_path / "build" / "java" / "spark-4.2.0")
    assert len(kafka_connector_jars(None, "4.2.0", tmp_path)) == 3
    with pytest.raises(KafkaJarsNotFound):
        kafka_connector_jars(None, "4.1.0", tmp_path)  # another Spark: not those jars


def test_submit_args_or_a_message_naming_every_way(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KafkaJarsNotFound) as info:
        kafka_connector_jars(None, "4.2.0", tmp_path)
    assert "--kafka-jars" in str(info.value)
    assert "make java-deps" in str(info.value)
    assert "--packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0" in str(info.value)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS",
                       "--packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 pyspark-shell")
    assert kafka_connector_jars(None, "4.2.0", tmp_path) == []
