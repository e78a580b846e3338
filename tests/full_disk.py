"""Helpers of the full-disk tests: a private tmpfs for a broker's log dir, and filling it.

The tmpfs is mounted in the broker's own mount namespace (`unshare`, then `sh` mounts and
execs the broker: signals reach the broker itself), so it disappears with the process and
nothing is left mounted on the machine; the test reaches it through /proc/PID/root."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

UNSHARE = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]


def tmpfs_prefix(directory: Path, size: str, read_only: bool = False) -> list[str]:
    """What goes before a broker's command so that `directory` is a fresh tmpfs of `size` in
    the broker's private mount namespace."""
    directory.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    return [*UNSHARE, "sh", "-c", f'mount -t tmpfs -o {options} tmpfs "$0" && exec "$@"', str(directory)]


def inside(pid: int, path: Path) -> Path:
    """`path` as the process `pid` sees it (its private mounts included)."""
    return Path(f"/proc/{pid}/root") / path.relative_to("/")


def fill(path: Path) -> None:
    """Write zeros to `path` until the file system has no block left."""
    with open(path, "ab", buffering=0) as f:
        for chunk in (1 << 16, 4096, 1):
            try:
                while True:
                    f.write(bytes(chunk))
            except OSError as e:
                assert e.errno == errno.ENOSPC, e


@contextlib.contextmanager
def mounted_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `directory` for the block (it outlives the processes that
    use it: a broker restarted on it finds its files), unmounted after. Needs root: missing,
    the test fails saying so."""
    assert os.geteuid() == 0, "mounting a tmpfs that outlives a broker process needs root"
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], check=True, timeout=30)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "--lazy", str(directory)], check=True, timeout=30)
