"""The machine's physical limits, measured in the same run as the brokers they bound.

  - sequential disk write: `write()` 1 MiB blocks to a new file in the directory the brokers'
    data lives in (so the same filesystem), then `fsync()`; MB/s over the whole, fsync included.
    No broker can durably append faster than this.
  - loopback TCP: a plain socket sender and receiver (two threads: `sendall`/`recv_into` release
    the GIL) moving 1 MiB buffers over 127.0.0.1; no broker can move bytes from a client on this
    machine faster than this.

MB is 10^6 bytes, as in the rest of the harness's tables.

    python -m tests.bench.limits [--mb 512] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

CHUNK = 1 << 20


def disk_write_mb_s(directory: Path, total_bytes: int) -> float:
    """Write `total_bytes` sequentially to a fresh file in `directory`, fsync, delete; MB/s."""
    block = os.urandom(CHUNK)
    fd, name = tempfile.mkstemp(prefix="seqwrite-", dir=directory)
    try:
        start = time.perf_counter()
        written = 0
        while written < total_bytes:
            written += os.write(fd, block[: min(CHUNK, total_bytes - written)])
        os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(name)
    return written / elapsed / 1e6


def loopback_tcp_mb_s(total_bytes: int) -> float:
    """Send `total_bytes` from one socket to another over 127.0.0.1; MB/s from the first send
    to the last byte received."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        received = [0]
        failure: list[BaseException] = []

        def receive() -> None:
            try:
                conn, _ = listener.accept()
                with conn:
                    buf = bytearray(CHUNK)
                    view = memoryview(buf)
                    while received[0] < total_bytes:
                        n = conn.recv_into(view)
                        if n == 0:
                            break
                        received[0] += n
            except OSError as e:
                failure.append(e)

        receiver = threading.Thread(target=receive, daemon=True)
        receiver.start()
        block = os.urandom(CHUNK)
        with socket.create_connection(listener.getsockname()) as sender:
            start = time.perf_counter()
            sent = 0
            while sent < total_bytes:
                chunk = block[: min(CHUNK, total_bytes - sent)]
                sender.sendall(chunk)
                sent += len(chunk)
            receiver.join(60)
            elapsed = time.perf_counter() - start
    if failure or received[0] != total_bytes:
        raise RuntimeError(f"loopback receiver got {received[0]} of {total_bytes} bytes: {failure}")
    return total_bytes / elapsed / 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=512, help="MB to move in each measurement")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = ap.parse_args(argv)
    total = args.mb * 1_000_000
    disk = disk_write_mb_s(args.dir, total)
    print(f"sequential disk write (fsync'd) in {args.dir}: {disk:,.0f} MB/s")
    print(f"loopback TCP: {loopback_tcp_mb_s(total):,.0f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
