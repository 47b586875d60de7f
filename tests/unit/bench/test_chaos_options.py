"""`skiff chaos`'s options: bad input is an error that names what is accepted (exit status 2),
before any cluster starts."""

from __future__ import annotations

import argparse

import pytest

from skiff.bench._chaos import build_parser


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["--out", "somewhere", *argv])


def test_clients_default_to_ours_and_take_rocketmqs_own() -> None:
    assert parse().clients == ["python"]
    assert parse("--clients", "python, cpp,rmq5,cpp").clients == ["python", "cpp", "rmq5"]


@pytest.mark.parametrize("value", ["java", "", "python,go"])
def test_an_unknown_client_is_refused_naming_the_known_ones(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse("--clients", value)
    assert exc.value.code == 2
    assert "known: python, cpp, rmq5" in capsys.readouterr().err


def test_durations_and_faults_are_checked() -> None:
    assert parse("--duration", "15m", "--fault-hold", "3s").duration == 900.0
    with pytest.raises(SystemExit):
        parse("--duration", "soon")
    with pytest.raises(SystemExit):
        parse("--faults", "kill-master,meteor")
