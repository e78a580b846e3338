"""The container image's HEALTHCHECK: ask the broker over the wire whether it serves.

`python -m broker.healthcheck [HOST:PORT] [--broker-id N]` sends one Metadata v1 request (no
topics) and exits 0 only if the broker answers with itself among the live brokers and a known
controller: in ZooKeeper mode that is true once the broker has registered and received the
controller's metadata, which is when clients can use it (a listening socket alone says less).
Without arguments it probes the first of `KAFKA_LISTENERS` (a wildcard host becomes 127.0.0.1)
and expects `KAFKA_BROKER_ID` / `KAFKA_NODE_ID` when set.

Standard library only, encoded by hand (Metadata v1 is six fields): Docker runs it every few
seconds in each broker container, and importing the generated codecs would cost ten times the
CPU of the probe itself.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import sys

__all__ = ["MetadataAnswer", "default_address", "main", "probe", "probe_api_versions"]

METADATA, VERSION = 3, 1
API_VERSIONS = 18
CLIENT_ID = b"odradek-healthcheck"


class MetadataAnswer:
    """The part of a Metadata v1 response a health check needs."""

    def __init__(self, broker_ids: list[int], controller_id: int) -> None:
        self.broker_ids = broker_ids
        self.controller_id = controller_id

    def healthy(self, broker_id: int | None) -> tuple[bool, str]:
        if self.controller_id < 0:
            return False, "no controller known yet"
        if broker_id is not None and broker_id not in self.broker_ids:
            return False, f"broker {broker_id} is not among the live brokers {self.broker_ids}"
        if not self.broker_ids:
            return False, "no live brokers"
        return True, f"brokers {self.broker_ids}, controller {self.controller_id}"


def encode_request(correlation_id: int) -> bytes:
    """A size-prefixed Metadata v1 request for no topics (header v1: key, version, id, client)."""
    body = struct.pack(">hhih", METADATA, VERSION, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    body += struct.pack(">i", 0)  # topics: an empty array (null would mean every topic)
    return struct.pack(">i", len(body)) + body


def decode_response(frame: bytes, correlation_id: int) -> MetadataAnswer:
    """Brokers and controller id of a Metadata v1 response (response header v0)."""
    pos = 0

    def take(fmt: str) -> int:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return value

    def skip_string() -> None:
        nonlocal pos
        n = take(">h")
        pos += max(n, 0)

    if take(">i") != correlation_id:
        raise ValueError("response to another request")
    brokers = []
    for _ in range(take(">i")):
        brokers.append(take(">i"))
        skip_string()  # host
        take(">i")  # port
        skip_string()  # rack (nullable)
    return MetadataAnswer(brokers, take(">i"))


def probe(host: str, port: int, timeout: float = 5.0, ssl_context: ssl.SSLContext | None = None) -> MetadataAnswer:
    """Metadata v1 over a fresh connection (TLS with `ssl_context`)."""
    return decode_response(_exchange(host, port, encode_request(1), timeout, ssl_context), 1)


def probe_api_versions(host: str, port: int, timeout: float = 5.0, ssl_context: ssl.SSLContext | None = None) -> None:
    """ApiVersions v0, the one request a SASL listener answers before authentication (the
    operator CLI's reachability probe of a SASL broker); ValueError if the answer is not one."""
    body = struct.pack(">hhih", API_VERSIONS, 0, 1, len(CLIENT_ID)) + CLIENT_ID
    frame = _exchange(host, port, struct.pack(">i", len(body)) + body, timeout, ssl_context)
    if len(frame) < 6 or struct.unpack_from(">i", frame)[0] != 1:
        raise ValueError("response to another request")


def _exchange(host: str, port: int, request: bytes, timeout: float, ssl_context: ssl.SSLContext | None) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as raw:
        s = raw if ssl_context is None else ssl_context.wrap_socket(raw, server_hostname=host)
        with s:
            s.sendall(request)
            size = struct.unpack(">i", _recv_exact(s, 4))[0]
            return _recv_exact(s, size)


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return bytes(buf)


def default_address(environ: dict[str, str] | os._Environ[str]) -> tuple[str, int]:
    """The first listener of KAFKA_LISTENERS (default PLAINTEXT://:9092), wildcards as loopback."""
    first = environ.get("KAFKA_LISTENERS", "PLAINTEXT://:9092").split(",")[0]
    host, _, port = first.split("://", 1)[-1].rpartition(":")
    host = host.strip("[]")
    return (host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"), int(port)


def main(argv: list[str]) -> int:
    env = os.environ
    broker_id: int | None = None
    if "--broker-id" in argv:
        i = argv.index("--broker-id")
        broker_id = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    elif env.get("KAFKA_BROKER_ID") or env.get("KAFKA_NODE_ID"):
        broker_id = int(env.get("KAFKA_BROKER_ID") or env["KAFKA_NODE_ID"])
    if argv:
        host, _, port = argv[0].rpartition(":")
        address = (host or "127.0.0.1", int(port))
    else:
        address = default_address(env)
    try:
        answer = probe(*address)
    except (OSError, ValueError, struct.error) as e:
        print(f"unhealthy: {address[0]}:{address[1]}: {e}")
        return 1
    ok, why = answer.healthy(broker_id)
    print(("healthy: " if ok else "unhealthy: ") + why)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
