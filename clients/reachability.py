"""Which brokers answer: the probe every operator command runs before trusting the metadata.

A broker that was just killed stays in every Metadata answer (leader, ISR) until its ZooKeeper
session expires, and kafka-python sends an admin request to a random listed broker: without this
probe one dead broker of three makes a third of the commands fail with `ECONNREFUSED` for as long
as the session lasts. Kafka's tools retry another node within their timeout; we find the dead
ones first, name them in a warning, and keep the client away from them.

"Answers" means a request (Metadata v1, as the container health check's) gets a reply, not just
a TCP accept: a paused (SIGSTOP) broker still completes the handshake in its kernel.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import click

from broker.healthcheck import probe as wire_probe
from broker.healthcheck import probe_api_versions
from clients.client_properties import ClientProperties

PROBE_TIMEOUT_S = 2.0  # how long a live broker may take to answer
# the end of a probe's reason when the broker is alive behind a SASL listener
WANTS_SASL = "its listener wants SASL authentication"


def probe(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S, client: ClientProperties | None = None) -> str | None:
    """None when the broker at host:port answers within timeout_s, else why not. The request is
    the container health check's Metadata v1 (broker.healthcheck: encoded by hand, one round
    trip), over TLS when the command's client properties say SSL; a SASL listener answers only
    ApiVersions before authentication, so that is what it is asked. Any well-formed answer
    counts, whatever it says about the cluster. A broker that closes the connection at Metadata
    but answers ApiVersions is alive behind a SASL listener: the reason says to give the
    credentials, rather than that it is down."""
    client = client or ClientProperties()
    try:
        if client.sasl:
            probe_api_versions(host, port, timeout_s, client.ssl_context())
        else:
            wire_probe(host, port, timeout_s, client.ssl_context())
    except TimeoutError:
        return f"no answer within {timeout_s:g}s"
    except (ValueError, struct.error):
        return "answered something other than Kafka's protocol"
    except ConnectionRefusedError as e:
        return e.strerror or str(e)
    except OSError as e:  # reset, or closed before answering (ConnectionError)
        reason = e.strerror or str(e) or type(e).__name__
        if not client.sasl and _answers_api_versions(host, port, timeout_s, client):
            return f"{reason} at Metadata after answering ApiVersions: {WANTS_SASL} (give --command-config)"
        return reason
    return None


def _answers_api_versions(host: str, port: int, timeout_s: float, client: ClientProperties) -> bool:
    try:
        probe_api_versions(host, port, timeout_s, client.ssl_context())
    except (OSError, ValueError, struct.error):
        return False
    return True


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (or `[v6]:port`) -> (host, port)."""
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]"), int(port)


def unanswered(addresses: Iterable[tuple[str, int]], timeout_s: float,
               client: ClientProperties | None = None) -> dict[tuple[str, int], str]:
    """The addresses that do not answer, with the reason; probed in parallel, so a command with
    several dead brokers waits one probe timeout, not one each."""
    targets = sorted(set(addresses))
    if not targets:
        return {}
    limit = min(timeout_s, PROBE_TIMEOUT_S)
    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        reasons = list(pool.map(lambda a: probe(a[0], a[1], limit, client), targets))
    return {a: r for a, r in zip(targets, reasons, strict=True) if r is not None}


def warn(text: str) -> None:
    """A warning on standard error, as the other commands' `Warn: ...` lines."""
    click.echo(f"Warn: {text}", err=True)


def avoid_unreachable(manager: Any, bootstrap: str, timeout_s: float,
                      client: ClientProperties | None = None) -> dict[int, str]:
    """Probe the bootstrap servers and every broker a kafka-python client's metadata lists, warn
    about each that does not answer, and keep the client away from those brokers for the rest of
    the command; their ids -> "host:port".

    `manager` is the client's KafkaConnectionManager (kafka-python 3.0.12, pinned): a node in its
    backoff table is skipped by least_loaded_node and refused by get_connection until the time
    set, so a request for any broker goes to a live one."""
    nodes = {(b.host, b.port): b.node_id for b in manager.cluster.brokers()}
    seeds = {split_address(a if ":" in a else f"{a}:9092") for a in bootstrap.split(",") if a.strip()}
    unreachable: dict[int, str] = {}
    for (host, port), why in unanswered([*nodes, *seeds], timeout_s, client).items():
        node = nodes.get((host, port))
        if node is None:
            warn(f"bootstrap server {host}:{port} does not answer ({why})")
            continue
        unreachable[node] = f"{host}:{port}"
        warn(f"broker {node} at {host}:{port} does not answer ({why}); asking the others")
        manager._backoff[node] = (1, time.monotonic() + 24 * 3600,
                                  manager.config["socket_connection_setup_timeout_ms"])
    return unreachable
