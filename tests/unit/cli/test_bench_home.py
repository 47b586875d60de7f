"""`skiff bench` is the one home of the benchmarks: the transport benchmark and the
side-by-side harness (a package, with its `main` in its `__init__`) are subcommands
like the others, found the same way."""

from __future__ import annotations

import importlib

import pytest

from skiff.bench import transport
from skiff.cli.bench import bench_modules
from skiff.cli.main import main


def test_bench_lists_transport_and_the_compare_package() -> None:
    modules = bench_modules()
    assert modules["transport"] == "transport"
    assert modules["compare"] == "compare"
    assert not any(name.startswith("_") for name in modules)
    for name in ("transport", "compare"):
        assert callable(importlib.import_module(f"skiff.bench.{modules[name]}").main)


def test_bench_transport_options_have_help() -> None:
    for action in transport.build_parser()._actions:
        assert action.help and action.help.strip(), action.option_strings


@pytest.mark.parametrize("name", ["transport", "compare"])
def test_bench_subcommand_help_names_the_command(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["bench", name, "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: skiff bench {name} ")
