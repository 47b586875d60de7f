"""What the kernel twin tests share: the compiled kernel of a module, or the test skipped.

Each compiled kernel (`skiff.common.kernels`) is compared with its pure-Python reference;
where the extension is not built, or `SKIFF_NO_EXTENSIONS=1` turns it off (the pure-Python
pass of `make test`), there is nothing to compare and the comparison is skipped."""

from __future__ import annotations

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
