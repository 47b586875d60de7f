"""`python -m skiff.bench.kafka_producer_walk` finds every batch it wrote (its exit status says so)."""

from __future__ import annotations

import pytest

from skiff.bench.kafka_producer_walk import main, walk


def test_the_walk_finds_every_batch(capsys: pytest.CaptureFixture[str]) -> None:
    assert walk(3000, 8)[0] == 375
    assert walk(3000, 0)[0] == 0
    assert main(["--messages", "1000", "--batch", "1"]) == 0
    assert "1000 batches found" in capsys.readouterr().out
