"""The one place that chooses between Skiff's compiled kernels and their Python references.

The hot loops named in docs/performance.md ("Compiled kernels") have a pure-Python
reference, which stays the definition of what they do, and an optional compiled
version in the kernel module beside the package whose logic it is
(`skiff.common._kernels`, `skiff.store._kernels`, `skiff.broker._kernels`,
`skiff.columnar._kernels`, `skiff.protocol._frames`: Cython,
built by ``pip install`` / ``make`` where a C compiler is found; a build without one
silently leaves them out). A module defines its reference and binds the public name once::

    pack_records = kernels.select("pack_records", pack_records_py)
    batch_inputs = kernels.select("batch_inputs", batch_inputs_py, "skiff.broker._kernels")

`select` returns the compiled function when the extension is importable and
``SKIFF_NO_EXTENSIONS`` is not set (to anything but ``0`` or empty), else the
reference. Tests run both on the same inputs (`compiled` gives the compiled one).

Row types shared with the kernels are read by slot, not by name: the compiled code
indexes ``row[7]`` for a born host, and the references unpack rows positionally (one
``zip``, one tuple unpack: the fast way in Python). `ROW_LAYOUTS` is the field order
they rely on, and the row types' class decorator `kernel_row` checks it when their
module is imported, so a reordered or inserted field fails there with a
`RowLayoutError` that names both orders, instead of storing fields in each other's
places.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R", bound=type)

DISABLED = os.environ.get("SKIFF_NO_EXTENSIONS", "") not in ("", "0")
"""``SKIFF_NO_EXTENSIONS=1``: run the pure-Python references even where the extension is built."""


def _load(module: str = "skiff.common._kernels") -> tuple[ModuleType | None, str]:
    try:
        # By name: a build without a C compiler has no such module, and there is no
        # stub for the extension (its functions are reached through `compiled`).
        return importlib.import_module(module), ""
    except ImportError as exc:
        return None, f"the extension is not built ({exc})"


_COMPILED, _MISSING = _load()
_MODULES: dict[str, ModuleType | None] = {"skiff.common._kernels": _COMPILED}
"""Kernel modules by name, loaded on first use: a kernel lives beside the package whose
logic it compiles (``skiff.store._kernels`` for the store's, ``skiff.broker._kernels`` for the writer's,
``skiff.columnar._kernels`` for the column-wise record decoder's (Spark source, tier upload),
``skiff.protocol._frames`` for the frame and batch-body codecs), each module optional."""


IMPLEMENTATION = (
    "pure Python (SKIFF_NO_EXTENSIONS is set)" if DISABLED and _COMPILED is not None
    else "pure Python (no compiled kernels: build with a C compiler)" if _COMPILED is None
    else "compiled kernels (Cython)"
)
"""What `skiff version` and the broker's start line report."""


def compiled(name: str, module: str = "skiff.common._kernels") -> Callable[..., Any] | None:
    """The compiled kernel ``name`` of ``module``, whether or not it is in use (None when not built)."""
    if module not in _MODULES:
        _MODULES[module] = _load(module)[0]
    found = _MODULES[module]
    return getattr(found, name, None) if found is not None else None


def select(name: str, reference: F, module: str = "skiff.common._kernels") -> F:
    """The implementation of kernel ``name`` to use: compiled if built and allowed, else ``reference``."""
    kernel = None if DISABLED else compiled(name, module)
    # The compiled kernel takes and returns what its reference does.
    return cast(F, kernel) if kernel is not None else reference


ROW_LAYOUTS: dict[str, tuple[str, ...]] = {
    "MessageInput": (
        # skiff.store.results.MessageInput. skiff/common/_kernels.pyx: pack_records reads
        # slots 1 to 9 (as skiff.common.record.pack_records_py does); skiff/broker/_kernels.pyx:
        # batch_inputs fills all 13; skiff/store/_kernels.pyx: batch_columns reads slots 0 to 12;
        # skiff/protocol/_frames.pyx: plain_sends fills all 13; skiff/protocol/kafka/_records.pyx:
        # decode_plain_rows fills all 13; skiff.broker.writer._rows and
        # skiff.store.checks.batch_columns_py build and unpack them in this order.
        "topic", "queue_id", "body", "properties", "flag", "sys_flag", "born_timestamp", "born_host",
        "reconsume_times", "prepared_transaction_offset", "tags", "keys", "uniq_key",
    ),
    "DispatchBatch": (
        # skiff.store.dispatcher.DispatchBatch. skiff/store/_kernels.pyx: replicated_columns returns its
        # columns in this order (after the unit counts); the dispatcher reads the first
        # eight with zip(*batch[:8]) and runs as batch[-1], index_items unpacks all eleven.
        "topics", "queue_ids", "queue_offsets", "physical_offsets", "sizes", "tag_codes", "store_timestamps",
        "sys_flags", "keys", "uniq_keys", "runs",
    ),
}
"""Field order, by type name, of the row types the kernels and their references read by slot."""


class RowLayoutError(TypeError):
    """A row type's fields are not in the order the kernels read them (`ROW_LAYOUTS`)."""


def row_fields(row_type: type) -> tuple[str, ...]:
    """The field names of a NamedTuple or dataclass, in order."""
    if dataclasses.is_dataclass(row_type):
        return tuple(f.name for f in dataclasses.fields(row_type))
    fields: tuple[str, ...] = getattr(row_type, "_fields")
    return fields


def check_row_layout(row_type: type) -> None:
    """Raise `RowLayoutError` unless ``row_type``'s fields are `ROW_LAYOUTS`' for its name."""
    name = row_type.__name__
    expected = ROW_LAYOUTS[name]
    found = row_fields(row_type)
    if found != expected:
        raise RowLayoutError(
            f"{row_type.__module__}.{row_type.__qualname__} has the fields {found}, but the compiled kernels "
            f"(skiff/common/_kernels.pyx, skiff/store/_kernels.pyx, skiff/broker/_kernels.pyx, "
            f"skiff/protocol/_frames.pyx) and their Python references read a {name} "
            f"by slot in the order {expected} (skiff.common.kernels.ROW_LAYOUTS): keep that order, or change the kernels, the "
            f"references and ROW_LAYOUTS together"
        )


def kernel_row(row_type: R) -> R:
    """Class decorator of a row type the kernels read by slot: `check_row_layout` at import."""
    check_row_layout(row_type)
    return row_type
