"""`skiff bench grpc_floor` really serves and measures each server shape."""

from __future__ import annotations

import pytest

from skiff.bench.grpc_floor import SHAPES, main, measure


@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_answers_every_call_and_reports_the_server_cpu(shape: str) -> None:
    # The server's CPU is read in 10 ms ticks: Skiff's door costs ~16 µs per empty call, so
    # 300 calls (~5 ms) could read 0 ticks; 2,000 are several ticks in every shape.
    calls = 2000
    result = measure(shape, calls=calls, in_flight=8, size=10, workers=2)
    assert result["calls"] == calls and float(result["calls_per_s"] or 0) > 0
    cpu = result["server_cpu_us_per_call"]
    assert cpu is not None and float(cpu) > 0


def test_an_unknown_shape_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--shapes", "aio,fibers"])
    assert "fibers" in capsys.readouterr().err
