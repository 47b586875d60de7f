"""Page calls on a mapping that ``mmap`` and ``os`` lack, made through libc so that the
GIL is released while they run.

- `drop`: ``madvise(MADV_DONTNEED)`` then ``posix_fadvise(POSIX_FADV_DONTNEED)`` of a
  flushed byte range, so its (clean) pages leave the mapping and the page cache. The
  CommitLog drops what lies far enough behind its writer (`CommitLog.flush`): the pages
  freed are the ones its next writes get back, and a recently freed page costs a
  fraction of a page the machine has not used lately (docs/store.md, "Dropping behind").
- `sync`: ``msync(MS_SYNC)`` of a byte range: on Linux ``vfs_fsync_range`` with
  datasync, i.e. ``fdatasync`` limited to the range. ``mmap.flush`` does the same
  call but holds the GIL for the whole fsync; ``os.fdatasync`` releases it but
  writes every dirty page of the file, the partly written tail page included.
- `syncfs`: one ``syncfs`` of the file system holding a file: every dirty page and
  inode there is written and the journal committed once, instead of one ``fsync``
  (and journal commit) per file.

All return False where libc or the call is missing (then the caller falls back:
the pages stay cached, ``os.fdatasync`` syncs file by file).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import mmap
import os

log = logging.getLogger(__name__)

PAGE_BYTES = mmap.PAGESIZE
MADV_DONTNEED = 4
"""Linux's value."""
MS_SYNC = 4
"""Linux's value (glibc <bits/mman-linux.h>)."""


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        for name in ("madvise", "msync"):
            fn = getattr(libc, name)
            fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            fn.restype = ctypes.c_int
        if hasattr(libc, "syncfs"):
            libc.syncfs.argtypes = [ctypes.c_int]
            libc.syncfs.restype = ctypes.c_int
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


def address_of(mm: mmap.mmap) -> int:
    """The mapping's address. The ctypes view is dropped at once, so ``mm.close()`` still
    works; the address is valid while the mapping is open (callers hold the file's lock)."""
    view = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(view)
    finally:
        del view


def _page_span(address: int, lo: int, hi: int) -> tuple[int, int]:
    start = lo - lo % PAGE_BYTES
    return address + start, hi - start


def sync(address: int, lo: int, hi: int) -> bool:
    """fdatasync bytes [lo, hi) of the mapping at ``address``; False if msync is missing.
    Raises OSError when the sync fails (an I/O error)."""
    if _LIBC is None or hi <= lo:
        return _LIBC is not None
    if _LIBC.msync(*_page_span(address, lo, hi), MS_SYNC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"msync: {errno.errorcode.get(err, err)}")
    return True


def syncfs(fd: int) -> bool:
    """Make everything written on the file system holding the open file ``fd`` durable;
    False if syncfs is missing. Raises OSError when it fails (a writeback error)."""
    if _LIBC is None or not hasattr(_LIBC, "syncfs"):
        return False
    if _LIBC.syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"syncfs: {errno.errorcode.get(err, err)}")
    return True


def drop(address: int, fd: int, lo: int, hi: int) -> bool:
    """Unmap bytes [lo, hi) of the file mapping at ``address`` from this process and drop
    their pages from the page cache (clean ones only: the kernel keeps a dirty page, so
    call this on flushed bytes). The data stays in the file; a later read faults it back
    in. False where libc is missing or the calls are refused."""
    if _LIBC is None or hi <= lo:
        return False
    start, length = _page_span(address, lo, hi)
    if _LIBC.madvise(start, length, MADV_DONTNEED) != 0:
        return False
    os.posix_fadvise(fd, start - address, length, os.POSIX_FADV_DONTNEED)
    return True
