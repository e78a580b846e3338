"""storage.mapped_file: an index map keeps no file descriptor, and reads/writes/flushes reach
the file (real files, real mmap(2))."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from storage.index import OffsetIndex
from storage.mapped_file import MappedFile, map_file


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_map_keeps_no_descriptor_and_writes_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(bytes(4096))
    before = open_fds()
    maps = []
    for _ in range(50):
        fd = os.open(path, os.O_RDWR)
        try:
            maps.append(map_file(fd, 4096))
        finally:
            os.close(fd)
    assert open_fds() == before  # Python's mmap.mmap would hold 50 more
    m = maps[0]
    assert isinstance(m, MappedFile)
    struct.pack_into(">ii", m.view, 8, 7, 42)
    assert struct.unpack_from(">ii", maps[1].view, 8) == (7, 42)  # one shared page cache
    m.flush()
    assert path.read_bytes()[8:16] == struct.pack(">ii", 7, 42)
    for mapped in maps:
        mapped.close()
        mapped.close()  # idempotent
    assert len(m.view) == 0  # the view of a closed map is empty, not dangling


def test_indexes_hold_no_descriptor(tmp_path: Path) -> None:
    before = open_fds()
    indexes = [OffsetIndex(tmp_path / f"{i:020d}.index", i * 100, 1 << 20) for i in range(20)]
    for i, idx in enumerate(indexes):
        idx.append(i * 100 + 5, 4096)
    assert open_fds() == before
    for idx in indexes:
        idx.close()
    reopened = OffsetIndex(tmp_path / f"{3:020d}.index", 300, 1 << 20)
    assert reopened.entries == 1 and reopened.lookup(306) == (305, 4096)
    reopened.close()
