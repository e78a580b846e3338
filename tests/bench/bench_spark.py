"""Spark batch read through the `odradek` data source: rows/s for 1,000,000 records.

A real broker, confluent-kafka to load the topic fast (100-byte values, 2 partitions), then
`spark.read.format("odradek")...load().count()`-style full reads in a `local[2]` session: once
with one task per partition, once split with `minPartitions=4`. Each read materialises every
row in Python workers (a `count()` alone could be answered without the values), so the figure is
what a job that looks at the data gets. The first read warms the JVM and the Python workers and
is not timed.

    python -m tests.bench.bench_spark [--records 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.bench_broker import create, produce  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402

PARTITIONS = 2


def timed_read(spark, bootstrap: str, topic: str, **options: str) -> tuple[int, float]:
    reader = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load().selectExpr("length(value) AS n", "offset")
    start = time.perf_counter()
    rows = df.groupBy().agg({"n": "sum", "offset": "count"}).collect()[0]
    elapsed = time.perf_counter() - start
    return int(rows["count(offset)"]), elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from spark_connector import register

    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", overrides=["num.partitions=1"]).start()
        spark = None
        try:
            create(broker.bootstrap, "spark-bench", PARTITIONS)
            produce(broker.bootstrap, "spark-bench", args.records, 100)
            spark = (SparkSession.builder.master("local[2]").appName("odradek-bench")
                     .config("spark.ui.enabled", "false")
                     .config("spark.ui.showConsoleProgress", "false")
                     .config("spark.sql.shuffle.partitions", "2")
                     .config("spark.driver.bindAddress", "127.0.0.1")
                     .config("spark.driver.host", "127.0.0.1")
                     .config("spark.python.worker.reuse", "true")
                     .getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            register(spark)
            timed_read(spark, broker.bootstrap, "spark-bench")  # warm-up
            results = []
            for label, opts in (("one task per partition", {}),
                                ("minPartitions=4", {"minPartitions": "4"})):
                n, secs = timed_read(spark, broker.bootstrap, "spark-bench", **opts)
                if n != args.records:
                    raise RuntimeError(f"read {n} rows, produced {args.records}")
                results.append((label, n, secs))
        finally:
            if spark is not None:
                spark.stop()
            broker.stop()
    print(f"{args.records:,} records of 100 bytes in {PARTITIONS} partitions, `local[2]`, "
          "broker on the same machine; every row materialised in the Python workers.")
    print()
    print("| read | rows | seconds | rows/s |")
    print("|---|---:|---:|---:|")
    for label, n, secs in results:
        print(f"| {label} | {n:,} | {secs:.2f} | {n / secs:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
