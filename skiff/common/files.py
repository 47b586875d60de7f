"""Small files replaced atomically and durably: the one copy of the sequence.

`replace_atomically` writes ``<path>.tmp`` in the same directory, flushes and fsyncs
it, renames it over ``path`` (``os.replace``: atomic on POSIX), then fsyncs the
directory so the rename itself survives a crash. A crash leaves the old file or the
new one, never a torn mix; at worst a stale ``<path>.tmp`` stays behind, which the
next replace truncates (readers ignore it).

Used for the store's checkpoint and timer progress files, a compacted queue's
MANIFEST, the broker's JSON tables, the NameServer's kvConfig.json and the client's
local offset files.
"""

from __future__ import annotations

import os
from collections.abc import Callable

TMP_SUFFIX = ".tmp"
"""The temporary file of ``path`` is ``path + TMP_SUFFIX``, beside it."""


def replace_atomically(path: str | os.PathLike[str], data: bytes,
                       before_rename: Callable[[], None] | None = None) -> None:
    """Replace ``path`` with ``data`` atomically and durably (see the module docstring).

    ``before_rename`` runs once the temporary file is durable and before the rename
    (a crash-test step, or moving the old file aside as a backup). The directory must
    exist. Raises OSError (for example on a full disk).
    """
    target = os.fspath(path)
    tmp = target + TMP_SUFFIX
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if before_rename is not None:
        before_rename()
    os.replace(tmp, target)
    fsync_dir(os.path.dirname(target) or ".")


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make renames and new files in the directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
