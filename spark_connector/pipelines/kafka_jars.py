"""Where a pipeline run with `--source kafka` finds Spark's own kafka connector.

Spark's `kafka` data source is Java and ships outside PySpark: the jars of
`org.apache.spark:spark-sql-kafka-0-10_2.13:<Spark version>` and its dependencies (kafka-clients,
the token provider, commons-pool2) must be on the JVM's class path when the SparkSession starts.
In order:

1. an explicit `--kafka-jars`: a folder of jars, or jar files separated by commas;
2. this repository's `build/java/spark-<PySpark version>/`, filled by `make java-deps`
   (scripts/install-java-deps, the same jars the test suite uses);
3. the user gave Spark the connector already: PYSPARK_SUBMIT_ARGS names `spark-sql-kafka`, e.g.
   `--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<version> pyspark-shell` (Spark then
   fetches it from Maven Central itself).

Otherwise the run stops with a message that names all three, rather than failing later inside
Spark with "Failed to find data source: kafka".
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONNECTOR = "spark-sql-kafka-0-10"


class KafkaJarsNotFound(Exception):
    """The connector is in none of the places above; the message says how to provide it."""


def maven_coordinate(spark_version: str) -> str:
    return f"org.apache.spark:{CONNECTOR}_2.13:{spark_version}"


def packages_hint(spark_version: str) -> str:
    return (f"PYSPARK_SUBMIT_ARGS='--packages {maven_coordinate(spark_version)} pyspark-shell' "
            "(Spark fetches it from Maven Central)")


def _jars_in(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.glob("*.jar"))


def _has_connector(jars: list[str]) -> bool:
    return any(Path(j).name.startswith(CONNECTOR) for j in jars)


def kafka_connector_jars(explicit: str | None, spark_version: str, repo: Path = REPO) -> list[str]:
    """The jar paths for `spark.jars`; an empty list when PYSPARK_SUBMIT_ARGS already brings the
    connector. Raises KafkaJarsNotFound when the connector is nowhere."""
    if explicit:
        given = Path(explicit)
        jars = (_jars_in(given) if given.is_dir()
                else [str(Path(j.strip()).resolve()) for j in explicit.split(",") if j.strip()])
        missing = [j for j in jars if not Path(j).is_file()]
        if missing:
            raise KafkaJarsNotFound(f"--kafka-jars: no such jar file: {', '.join(missing)}")
        if not _has_connector(jars):
            raise KafkaJarsNotFound(f"--kafka-jars {explicit}: no {CONNECTOR}_2.13-*.jar in it "
                                    f"(Spark's kafka connector, {maven_coordinate(spark_version)})")
        return jars
    built = _jars_in(repo / "build" / "java" / f"spark-{spark_version}")
    if _has_connector(built):
        return built
    if CONNECTOR in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return []
    raise KafkaJarsNotFound(
        f"Spark's kafka connector ({maven_coordinate(spark_version)}) not found. Give it with "
        f"--kafka-jars FOLDER (its jar and dependencies), run `make java-deps` in the Odradek "
        f"repository (build/java/spark-{spark_version}/), or set {packages_hint(spark_version)}.")
