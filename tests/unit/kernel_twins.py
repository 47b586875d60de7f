"""What the kernel twin tests share: the compiled kernel of a module, or the test skipped.

Each compiled kernel (`skiff.common.kernels`) is compared with its pure-Python reference;
where the extension is not built, or `SKIFF_NO_EXTENSIONS=1` turns it off (the pure-Python
pass of `make test`), there is nothing to compare and the comparison is skipped."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from skiff.common import kernels


def compiled_kernels(module: str) -> Callable[[str], Any]:
    """``compiled(name)`` for the kernels of ``module`` (e.g. ``"skiff.store._kernels"``)."""
    def compiled(name: str) -> Any:
        kernel = kernels.compiled(name, module)
        if kernel is None or kernels.DISABLED:
            pytest.skip("the compiled kernels are not built here, or switched off")
        return kernel
    return compiled


def damaged(rng: random.Random, data: bytes, *, flip: float, cut: float, tail: int) -> bytes:
    """``data`` flipped in one bit (with chance ``flip``), cut short (``cut``), or else with up to
    ``tail`` random bytes after it: the inputs a kernel must decline or read as its reference does."""
    out = bytearray(data)
    how = rng.random()
    if how < flip:
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif how < flip + cut:
        del out[rng.randrange(len(out)):]
    else:
        out += rng.randbytes(rng.randint(1, tail))
    return bytes(out)
