"""`skiff.bench.client_send`: a real producer's sends are all answered by the canned peer, in the
reads it says, and the figure it prints is measured over the sends it counts."""

from __future__ import annotations

import json

import pytest

from skiff.bench.client_send import main


@pytest.mark.parametrize("per_read", [1, 64])
def test_every_send_is_answered_and_measured(capsys: pytest.CaptureFixture[str], per_read: int) -> None:
    assert main(["--sends", "300", "--warmup", "40", "--repeat", "2", "--in-flight", "16",
                 "--per-read", str(per_read), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["sends"] == 300 and figures["per_read"] == per_read
    assert len(figures["rounds_us_per_send"]) == 2
    assert 0 < figures["client_cpu_us_per_send"] == min(figures["rounds_us_per_send"])


def test_batches_are_answered_and_measured_per_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--batch", "256", "--sends", "40", "--warmup", "8", "--repeat", "2", "--in-flight", "8",
                 "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["batch"] == 256 and figures["sends"] == 40
    assert figures["client_cpu_us_per_message"] == pytest.approx(figures["client_cpu_us_per_send"] / 256, rel=0.01)


def test_bad_options_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--in-flight", "0"])
    assert "at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--batch", "5000"])
    assert "at most 4096" in capsys.readouterr().err
