"""A raw Kafka connection for tests that must control the exact bytes a broker sees (resends,
stale generations, odd versions): requests are encoded with our generated codecs and answered
in order on one socket."""

from __future__ import annotations

import socket
import struct
from typing import Any

from protocol.framing import decode_response, encode_request_frame
from protocol.messages import AlterClientQuotasRequest
from protocol.messages import alter_client_quotas_request as acq


class RawConnection:
    def __init__(self, port: int, client_id: str = "raw-test", timeout: float = 30.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self.corr = 0

    def call(self, api_key: int, version: int, body: Any) -> Any:
        self.corr += 1
        self.sock.sendall(encode_request_frame(api_key, version, self.corr, self.client_id, body))
        (size,) = struct.unpack(">i", self.recv_exact(4))
        corr, resp = decode_response(self.recv_exact(size), api_key, version)
        assert corr == self.corr
        return resp

    def recv_exact(self, n: int) -> bytes:
        """Exactly n bytes however they arrive: MSG_WAITALL does not wait on a socket with a
        timeout, so a large answer could come back partial."""
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call_once(port: int, api_key: int, version: int, body: Any) -> Any:
    """One request on a fresh connection."""
    with RawConnection(port) as conn:
        return conn.call(api_key, version, body)


def set_client_quota(port: int, client_id: str, key: str, value: float) -> None:
    """AlterClientQuotas of one client-id's quota `key` over a raw connection (it must succeed)."""
    resp = call_once(port, 49, 1, AlterClientQuotasRequest(entries=[acq.EntryData(
        entity=[acq.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[acq.OpData(key=key, value=value, remove=False)])]))
    assert resp.entries[0].error_code == 0, resp
