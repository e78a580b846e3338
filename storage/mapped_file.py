"""MappedFile: a shared, writable memory map of a file that holds no file descriptor.

Why: the offset and time indexes of every active segment are memory-mapped (Kafka's
``AbstractIndex``). Python's ``mmap.mmap`` keeps a ``dup()`` of the file descriptor for as long
as the map lives (until Python 3.13's ``trackfd=False``), so each partition held three
descriptors -- its ``.log`` plus one per index map -- and a broker hit ``ulimit -n`` at a third
of the partitions Kafka hosts under the same limit. A map made with the C library's ``mmap(2)``
needs no descriptor once made (POSIX), exactly as Java's ``MappedByteBuffer`` in Kafka.

:attr:`MappedFile.view` is a writable ``memoryview`` over the mapped bytes for ``struct``
``pack_into``/``unpack_from`` and slicing. Invariant: the view must not be used after
:meth:`close` (the memory is unmapped; unlike ``mmap.mmap`` there is no exporter to refuse it),
so owners drop their reference to the view before closing -- storage.index does.

A sparse file's pages have no disk blocks until written, and a write through a map into such a
page on a full file system cannot fail with an error: the kernel kills the process with SIGBUS.
:meth:`MappedFile.reserve` allocates the blocks of a range ahead of the writes with
``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14+), which takes the same write faults but returns
the failure as an error instead (EFAULT where the fault would have been SIGBUS). It needs no
descriptor either; where it is unsupported it answers False and the owner falls back to
``posix_fallocate`` on the file (storage.index).

Who may call: the owning index, under the same rules as its ``mmap`` (storage.index).
Linux/POSIX only; elsewhere :func:`map_file` falls back to ``mmap.mmap``.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from typing import Any

__all__ = ["FileMap", "MappedFile", "map_file"]

_PROT_READ_WRITE = mmap.PROT_READ | mmap.PROT_WRITE
_PyBUF_WRITE = 0x200

try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _mmap = _libc.mmap
    _mmap.restype = ctypes.c_void_p
    _mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    _munmap = _libc.munmap
    _munmap.restype = ctypes.c_int
    _munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    _msync = _libc.msync
    _msync.restype = ctypes.c_int
    _msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _madvise = _libc.madvise
    _madvise.restype = ctypes.c_int
    _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _from_memory = ctypes.pythonapi.PyMemoryView_FromMemory
    _from_memory.restype = ctypes.py_object
    _from_memory.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]
    _AVAILABLE = os.name == "posix"
except (AttributeError, OSError):  # pragma: no cover - no C library to call
    _AVAILABLE = False

_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4  # Linux's value; msync(2)
_MADV_POPULATE_WRITE = 23  # Linux 5.14+; madvise(2)
_PAGE_MASK = ~(mmap.PAGESIZE - 1)
# cleared at the first EINVAL: a kernel without MADV_POPULATE_WRITE (or not Linux)
_populate_supported = _AVAILABLE and os.uname().sysname == "Linux"


class MappedFile:
    """``length`` bytes of a file mapped shared and writable (see the module docstring)."""

    __slots__ = ("_addr", "length", "view")

    def __init__(self, fd: int, length: int) -> None:
        if length <= 0:
            raise ValueError(f"cannot map {length} bytes")
        addr = _mmap(None, length, _PROT_READ_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap of {length} bytes failed: {os.strerror(err)}")
        self._addr: int | None = addr
        self.length = length
        self.view: memoryview = _from_memory(addr, length, _PyBUF_WRITE)

    def flush(self) -> None:
        """msync the map (what ``mmap.flush`` does); blocking, may run in an executor."""
        if self._addr is not None and _msync(self._addr, self.length, _MS_SYNC) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"msync failed: {os.strerror(err)}")

    def reserve(self, offset: int, length: int) -> bool:
        """Give bytes [offset, offset + length) of the file disk blocks (and pages) now, so a
        later write to them through :attr:`view` cannot SIGBUS. Raises OSError when the file
        system cannot provide them (full, quota, I/O error); returns False when this kernel
        cannot do it through the map (the caller then uses ``posix_fallocate``).

        Costs one ``madvise`` over the range: populated pages are skipped."""
        global _populate_supported
        if not _populate_supported or self._addr is None or length <= 0:
            return False
        start = offset & _PAGE_MASK
        if _madvise(self._addr + start, offset + length - start, _MADV_POPULATE_WRITE) == 0:
            return True
        err = ctypes.get_errno()
        if err == errno.EINVAL:
            _populate_supported = False
            return False
        if err == errno.EFAULT:  # what a write would have died of: SIGBUS
            raise OSError(
                errno.EFAULT, f"no disk blocks for bytes {offset}-{offset + length} of a mapped "
                "index (the file system is full, over quota or failing)"
            )
        raise OSError(err, f"madvise(MADV_POPULATE_WRITE) failed: {os.strerror(err)}")

    def close(self) -> None:
        """Unmap (idempotent). The view must no longer be used."""
        addr, self._addr = self._addr, None
        if addr is not None:
            self.view = memoryview(b"")
            _munmap(addr, self.length)

    def __del__(self) -> None:
        self.close()


class _PyMapped:
    """The ``mmap.mmap`` fallback with MappedFile's interface (keeps a descriptor)."""

    __slots__ = ("_mm", "length", "view")

    def __init__(self, fd: int, length: int) -> None:
        self._mm: Any = mmap.mmap(fd, length)
        self.length = length
        self.view = memoryview(self._mm)

    def flush(self) -> None:
        self._mm.flush()

    def reserve(self, offset: int, length: int) -> bool:
        return False  # the owner falls back to posix_fallocate

    def close(self) -> None:
        self.view.release()
        self._mm.close()


FileMap = MappedFile | _PyMapped


def map_file(fd: int, length: int) -> FileMap:
    """Map ``length`` bytes of ``fd`` shared and writable; ``fd`` may be closed right after."""
    if _AVAILABLE:
        return MappedFile(fd, length)
    return _PyMapped(fd, length)
