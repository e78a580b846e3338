"""Spark's own `kafka` source and sink (Java kafka-clients 3.9.2 inside Spark) over SASL_SSL with
SCRAM-SHA-256 (issue #23, Real peers): `kafka.security.protocol=SASL_SSL`,
`kafka.sasl.mechanism=SCRAM-SHA-256`, a ScramLoginModule `kafka.sasl.jaas.config` and a PKCS12
truststore made by keytool. The Odradek node runs in ZooKeeper mode, where SCRAM credentials
live; the user is created with Kafka 3.9.2's kafka-configs before the broker starts. A batch
write and a batch read back are equal, and the broker logged the SCRAM authentications of
User:spark on the SASL_SSL listener. Our `format("odradek")` source and sink take the same
`kafka.*` security options (mapped for kafka-python as `odradek --command-config` maps them) and
read and write the same topic over the same listener. The PLAINTEXT listener only serves the
topic's creation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.broker_process import BrokerProcess, free_port
from tests.compat.jvm import run_tool
from tests.spark.helpers import create_topic, unique_topic
from tests.tls_certs import PASSWORD, CertificateAuthority
from tests.zookeeper import ZooKeeperServer

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SPARK_PASSWORD = "spark-secret"


def test_kafka_and_odradek_sources_and_sinks_over_sasl_ssl_scram(spark: Any, zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    zk = zookeeper.connect_string()
    run_tool(CONFIG_COMMAND, "--zookeeper", zk, "--alter", "--add-config",
             f"SCRAM-SHA-256=[password={SPARK_PASSWORD}]", "--entity-type", "users", "--entity-name", "spark")
    ca = CertificateAuthority(tmp_path / "certs")
    keystore = ca.issue("broker", "broker1").pkcs12_file()
    plain, sasl_ssl = free_port(), free_port()
    broker = BrokerProcess(
        tmp_path / "data", port=plain, zookeeper_connect=zk, broker_id=1,
        listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        overrides=["offsets.topic.replication.factor=1", "sasl.enabled.mechanisms=SCRAM-SHA-256",
                   f"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config={SCRAM_MODULE} required;",
                   "ssl.keystore.type=PKCS12", f"ssl.keystore.location={keystore}",
                   f"ssl.keystore.password={PASSWORD}"]).start()
    try:
        topic = create_topic(broker.bootstrap, unique_topic("ksasl"), 2)
        security = {
            "kafka.bootstrap.servers": f"127.0.0.1:{sasl_ssl}",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": f'{SCRAM_MODULE} required username="spark" password="{SPARK_PASSWORD}";',
            "kafka.ssl.truststore.type": "PKCS12",
            "kafka.ssl.truststore.location": str(ca.java_truststore()),
            "kafka.ssl.truststore.password": PASSWORD,
        }
        rows = [(f"k{i}", f"v{i}-{'x' * (i % 50)}") for i in range(500)]
        spark.createDataFrame(rows, "key string, value string").write.format("kafka") \
            .options(**security).option("topic", topic).save()
        got = (spark.read.format("kafka").options(**security).option("subscribe", topic).load()
               .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value").collect())
        assert sorted((r.key, r.value) for r in got) == sorted(rows)
        # the odradek source reads what Spark's sink wrote, and its sink writes what Spark's source reads
        ours = (spark.read.format("odradek").options(**security).option("subscribe", topic).load()
                .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value").collect())
        assert sorted((r.key, r.value) for r in ours) == sorted(rows)
        more = [(f"o{i}", f"w{i}") for i in range(100)]
        spark.createDataFrame(more, "key string, value string").write.format("odradek") \
            .options(**security).option("topic", topic).mode("append").save()
        got = (spark.read.format("kafka").options(**security).option("subscribe", topic).load()
               .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value").collect())
        assert sorted((r.key, r.value) for r in got) == sorted(rows + more)
        scram = [line for line in broker.lines if "authenticated SASL client" in line]
        assert scram and all("listener='SASL_SSL'" in line and "mechanism='SCRAM-SHA-256'" in line
                             and "principal='User:spark'" in line for line in scram), scram
    finally:
        broker.stop()
