"""Builds the optional compiled kernels (`skiff.common._kernels`, `skiff.store._kernels`,
`skiff.broker._kernels`, `skiff.columnar._kernels`, `skiff.protocol._frames`: Cython); everything
else is in pyproject.toml.

The extension is optional: without Cython the build skips it, and without a C
compiler `optional=True` turns the compile error into a warning.
Either way Skiff installs and runs its pure-Python kernels (`skiff.common.kernels`).
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    from Cython.Build import cythonize
except ImportError:  # no Cython: pure Python only
    cythonize = None

KERNELS = [
    Extension(name, [path], extra_compile_args=["-O2"], optional=True)
    for name, path in [
        ("skiff.common._kernels", "skiff/common/_kernels.pyx"),
        ("skiff.store._kernels", "skiff/store/_kernels.pyx"),  # the store's (cimports skiff/common/_kernels.pxd)
        ("skiff.broker._kernels", "skiff/broker/_kernels.pyx"),  # the writer's
        ("skiff.columnar._kernels", "skiff/columnar/_kernels.pyx"),  # the column-wise record decoder's (Spark source, tier)
        ("skiff.protocol._frames", "skiff/protocol/_frames.pyx"),  # the remoting frame codec's
        ("skiff.protocol.kafka._records", "skiff/protocol/kafka/_records.pyx"),  # the Kafka record batch decoder
    ]
]



class OptionalBuildExt(build_ext):
    """A compile failure is a warning, in every install mode (an editable install's
    build does not honour ``optional=True``)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no Python headers
            print(f"skiff: the compiled kernels were not built, pure Python it is: {exc}")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"skiff: the compiled kernels were not built, pure Python it is: {exc}")


def ext_modules() -> list[Extension]:
    if cythonize is None:
        return []
    try:
        return cythonize(KERNELS, language_level=3, quiet=True)
    except Exception as exc:  # a Cython too old or too new for the source: pure Python
        print(f"skiff: not building the compiled kernels: {exc}")
        return []


setup(ext_modules=ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
