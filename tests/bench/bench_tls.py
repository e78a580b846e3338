"""TLS and SASL side by side with Apache Kafka 3.9 (issue #23 §1, §2): produce and consume
throughput and the broker's CPU per record over SSL and over SASL_SSL with SCRAM-SHA-256, and over
PLAINTEXT on the same brokers for the cost of TLS.

Both brokers run at once on loopback, each with a PLAINTEXT, an SSL and a SASL_SSL listener (the
SCRAM user created through AlterUserScramCredentials on both) serving the same
PKCS12 keystore (an EC P-256 certificate with SAN 127.0.0.1 from a CA made for the run), TLS
1.2 and 1.3 enabled, client authentication off: Odradek as `odradek serve`, Kafka 3.9 as one KRaft
node (tests/compat/reference_kafka.py) with kafka-server-start.sh's heap and G1 settings. The
client is librdkafka through `odradek perf`'s functions (clients/perf_run.py) with
security.protocol=SSL and the CA as ssl.ca.location (hostname verification on): 1 KiB records,
one partition, acks=1, linger.ms=5, batch.size=1 MiB; the consume reads what the produce wrote,
from the earliest offset. Over TLS Odradek cannot sendfile: fetched segment bytes are read in the
executor and encrypted by the transport (broker/network.py); Kafka encrypts in its network
threads (SslTransportLayer), with no zero copy either.

Each broker's CPU time (tests/bench/peers.py's `cpu_seconds`) is read around every workload and
reported per record. A warm-up at a fifth of the size comes first; then `--trials` rounds,
alternating which broker goes first, and the table shows medians.

    python -m tests.bench.bench_tls [--records 200000] [--trials 3] [--scale 1.0]

Run by `python -m tests.bench --only tls` (make bench), which passes --scale through
ODRADEK_BENCH_SCALE. A smoke run: --scale 0.02.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from clients.perf_run import run_consume, run_produce  # noqa: E402
from tests.bench.peers import cpu_seconds  # noqa: E402
from tests.broker_process import BrokerProcess, free_port  # noqa: E402
from tests.tls_certs import PASSWORD, CertificateAuthority  # noqa: E402

RECORDS = 200_000
PROTOCOLS = ("SSL", "SASL_SSL", "PLAINTEXT")
SIZE = 1024
PRODUCER = {"linger.ms": 5, "batch.size": 1 << 20, "enable.idempotence": False}
KAFKA_JVM = ("-Xmx1g", "-Xms1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
             "-Djava.awt.headless=true")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Broker:
    name: str
    pid: Callable[[], int]
    plaintext: str
    ssl: str
    sasl_ssl: str
    stop: Callable[[], None]


# the client's SCRAM user, created on both brokers once they are up (AlterUserScramCredentials)
SCRAM_USER, SCRAM_PASSWORD = "bench", "bench-secret"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def ssl_settings(keystore: Path) -> dict[str, str]:
    return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": PASSWORD, "ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}


def start_odradek(work: Path, keystore: Path) -> Broker:
    plain, ssl_port, sasl_port = free_port(), free_port(), free_port()
    b = BrokerProcess(work / "odradek", port=plain,
                      listeners=f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},"
                                f"SASL_SSL://127.0.0.1:{sasl_port}",
                      overrides=["log.flush.offset.checkpoint.interval.ms=60000",
                                 "sasl.enabled.mechanisms=SCRAM-SHA-256", f"sasl.jaas.config={SCRAM_JAAS}",
                                 *(f"{k}={v}" for k, v in ssl_settings(keystore).items())])
    b.start()
    return Broker("Odradek", lambda: b.proc.pid, b.bootstrap, f"127.0.0.1:{ssl_port}",  # type: ignore[union-attr]
                  f"127.0.0.1:{sasl_port}", b.stop)


def start_kafka(work: Path, keystore: Path) -> Broker:
    from tests.compat.reference_kafka import ReferenceKafka

    plain, ssl_port, sasl_port, controller = free_port(), free_port(), free_port(), free_port()
    k = ReferenceKafka(work / "kafka", port=plain, jvm_args=KAFKA_JVM, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port},"
                     f"CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},"
                                f"SASL_SSL://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        **ssl_settings(keystore)})
    k.controller_port = controller
    k.start(timeout=180)
    return Broker("Kafka", k.pid, k.bootstrap, f"127.0.0.1:{ssl_port}", f"127.0.0.1:{sasl_port}", k.stop)


def add_scram_user(bootstrap: str) -> None:
    """The client's SCRAM-SHA-256 credential, through AlterUserScramCredentials (KIP-554) as
    kafka-configs --bootstrap-server does: the same request to both brokers."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    upsert = UserScramCredentialUpsertion(SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          SCRAM_PASSWORD.encode())
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)


def create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    deadline = time.monotonic() + 30  # the metadata shows the leader a moment after CreateTopics
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (meta is not None and meta.error is None and meta.partitions
                and all(p.leader >= 0 for p in meta.partitions.values())):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} has no leader 30 s after CreateTopics")


def workload(b: Broker, protocol: str, topic: str, n: int, ca: Path) -> list[dict[str, Any]]:
    """Produce then consume `n` records over `protocol`; one row per direction."""
    bootstrap = {"SSL": b.ssl, "SASL_SSL": b.sasl_ssl}.get(protocol, b.plaintext)
    client = ({"security.protocol": protocol, "ssl.ca.location": str(ca),
               "ssl.endpoint.identification.algorithm": "https"} if protocol != "PLAINTEXT" else {})
    if protocol == "SASL_SSL":
        client |= {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": SCRAM_USER, "sasl.password": SCRAM_PASSWORD}
    create(b.plaintext, topic)
    rows = []
    cpu = cpu_seconds(b.pid())
    p = run_produce(bootstrap, topic, n, SIZE, acks="1", props={**PRODUCER, **client}, timeout_s=120)
    if p.failed:
        raise RuntimeError(f"{b.name} {protocol}: {p.failed} records not acknowledged: {p.first_error}")
    rows.append({"system": b.name, "protocol": protocol, "workload": "produce", "records": p.records,
                 "bytes": p.bytes, "s": p.elapsed_s, "cpu_s": cpu_seconds(b.pid()) - cpu})
    cpu = cpu_seconds(b.pid())
    c = run_consume(bootstrap, topic, n, props=client, timeout_s=120)
    if c.records != n:
        raise RuntimeError(f"{b.name} {protocol}: consumed {c.records} of {n}")
    rows.append({"system": b.name, "protocol": protocol, "workload": "consume", "records": c.records,
                 "bytes": c.bytes, "s": c.elapsed_s, "cpu_s": cpu_seconds(b.pid()) - cpu})
    return rows


def run(n: int, trials: int, systems: list[str], work: Path) -> list[dict[str, Any]]:
    ca = CertificateAuthority(work / "certs")
    keystore = ca.issue("broker", "bench-broker").pkcs12_file()
    starters = {"odradek": start_odradek, "kafka": start_kafka}
    brokers: list[Broker] = []
    rows: list[dict[str, Any]] = []
    try:
        for s in systems:
            log(f"starting {s}")
            brokers.append(starters[s](work, keystore))
            add_scram_user(brokers[-1].plaintext)
        for b in brokers:  # warm-up: the JIT, the first TLS sessions, the topics' first segments
            for protocol in PROTOCOLS:
                workload(b, protocol, f"warm-{protocol.lower()}", max(1000, n // 5), ca.ca_file())
        for trial in range(trials):
            order = brokers if trial % 2 == 0 else brokers[::-1]
            for protocol in PROTOCOLS:
                for b in order:
                    log(f"trial {trial + 1}/{trials}: {b.name} {protocol}")
                    for row in workload(b, protocol, f"t{trial}-{protocol.lower()}", n, ca.ca_file()):
                        rows.append({**row, "trial": trial})
    finally:
        for b in brokers:
            b.stop()
    return rows


def report(rows: list[dict[str, Any]], n: int, trials: int) -> list[str]:
    def med(system: str, protocol: str, wl: str, f: Callable[[dict[str, Any]], float]) -> float | None:
        vals = [f(r) for r in rows if (r["system"], r["protocol"], r["workload"]) == (system, protocol, wl)]
        return statistics.median(vals) if vals else None

    def rate(r: dict[str, Any]) -> float:
        return r["records"] / r["s"]

    def cpu_us(r: dict[str, Any]) -> float:
        return r["cpu_s"] / r["records"] * 1e6

    def fmt(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    systems = sorted({r["system"] for r in rows}, key=lambda s: s != "Odradek")
    out = ["### TLS and SASL throughput and broker CPU per record", "",
           "| workload | system | SSL records/s | SSL MB/s | SSL broker CPU µs/record | SASL_SSL records/s "
           "| SASL_SSL broker CPU µs/record | PLAINTEXT records/s | PLAINTEXT broker CPU µs/record | TLS CPU cost |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for wl in ("produce", "consume"):
        for s in systems:
            ssl_rate, plain_rate = med(s, "SSL", wl, rate), med(s, "PLAINTEXT", wl, rate)
            ssl_cpu, plain_cpu = med(s, "SSL", wl, cpu_us), med(s, "PLAINTEXT", wl, cpu_us)
            sasl_rate, sasl_cpu = med(s, "SASL_SSL", wl, rate), med(s, "SASL_SSL", wl, cpu_us)
            mbs = med(s, "SSL", wl, lambda r: r["bytes"] / r["s"] / 1e6)
            cost = f"{ssl_cpu / plain_cpu:.2f}x" if ssl_cpu and plain_cpu else "-"
            out.append(f"| {wl} | {s} | {fmt(ssl_rate, ',.0f')} | {fmt(mbs, '.1f')} | {fmt(ssl_cpu, '.2f')} | "
                       f"{fmt(sasl_rate, ',.0f')} | {fmt(sasl_cpu, '.2f')} | "
                       f"{fmt(plain_rate, ',.0f')} | {fmt(plain_cpu, '.2f')} | {cost} |")
    out += ["", f"{n:,} records of {SIZE} B, one partition, acks=1, librdkafka; median of {trials} trial(s). "
            "TLS CPU cost: the broker's CPU per record over SSL / over PLAINTEXT."]
    if len(systems) == 2:
        out += ["", "Odradek / Kafka (throughput ratio; CPU per record ratio, lower is better):", ""]
        for protocol in ("SSL", "SASL_SSL"):
            for wl in ("produce", "consume"):
                ro, rk = med("Odradek", protocol, wl, rate), med("Kafka", protocol, wl, rate)
                co, ck = med("Odradek", protocol, wl, cpu_us), med("Kafka", protocol, wl, cpu_us)
                if ro and rk and co and ck:
                    out.append(f"- {protocol} {wl}: throughput {ro / rk:.2f}x, broker CPU per record {co / ck:.2f}x")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=RECORDS)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--systems", default="odradek,kafka")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("ODRADEK_BENCH_SCALE", 1)))
    args = ap.parse_args(argv)
    n = max(1000, int(args.records * args.scale))
    trials = args.trials if args.scale >= 1 else 1
    work = Path(tempfile.mkdtemp(prefix="odradek-bench-tls-"))
    try:
        rows = run(n, trials, [s for s in args.systems.split(",") if s], work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(report(rows, n, trials)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
