"""The one place that chooses between Skiff's compiled kernels and their Python references.

The hot loops named in docs/performance.md ("Compiled kernels") have a pure-Python
reference, which stays the definition of what they do, and an optional compiled
version in `skiff.common._kernels` (Cython, built by ``pip install`` / ``make``
where a C compiler is found; a build without one silently leaves it out). A module
defines its reference and binds the public name once::

    pack_records = kernels.select("pack_records", pack_records_py)

`select` returns the compiled function when the extension is importable and
``SKIFF_NO_EXTENSIONS`` is not set (to anything but ``0`` or empty), else the
reference. Tests run both on the same inputs (`compiled` gives the compiled one).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

DISABLED = os.environ.get("SKIFF_NO_EXTENSIONS", "") not in ("", "0")
"""``SKIFF_NO_EXTENSIONS=1``: run the pure-Python references even where the extension is built."""


def _load() -> tuple[ModuleType | None, str]:
    try:
        # By name: a build without a C compiler has no such module, and there is no
        # stub for the extension (its functions are reached through `compiled`).
        return importlib.import_module("skiff.common._kernels"), ""
    except ImportError as exc:
        return None, f"the extension is not built ({exc})"


_COMPILED, _MISSING = _load()

IMPLEMENTATION = (
    "pure Python (SKIFF_NO_EXTENSIONS is set)" if DISABLED and _COMPILED is not None
    else "pure Python (no compiled kernels: build with a C compiler)" if _COMPILED is None
    else "compiled kernels (Cython)"
)
"""What `skiff version` and the broker's start line report."""


def compiled(name: str) -> Callable[..., Any] | None:
    """The compiled kernel ``name``, whether or not it is in use (None when not built)."""
    return getattr(_COMPILED, name, None) if _COMPILED is not None else None


def select(name: str, reference: F) -> F:
    """The implementation of kernel ``name`` to use: compiled if built and allowed, else ``reference``."""
    kernel = None if DISABLED else compiled(name)
    # The compiled kernel takes and returns what its reference does.
    return cast(F, kernel) if kernel is not None else reference
