"""Builds the optional compiled kernels (`skiff.common._kernels`, Cython); everything
else is in pyproject.toml.

The extension is optional: without Cython the build skips it, and without a C
compiler (or zlib's header) `optional=True` turns the compile error into a warning.
Either way Skiff installs and runs its pure-Python kernels (`skiff.common.kernels`).
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # no Cython: pure Python only
    cythonize = None

KERNELS = Extension(
    "skiff.common._kernels",
    ["skiff/common/_kernels.pyx"],
    libraries=["z"],
    extra_compile_args=["-O2"],
    optional=True,
)



def ext_modules() -> list[Extension]:
    if cythonize is None:
        return []
    try:
        return cythonize([KERNELS], language_level=3, quiet=True)
    except Exception as exc:  # a Cython too old or too new for the source: pure Python
        print(f"skiff: not building the compiled kernels: {exc}")
        return []


setup(ext_modules=ext_modules())
