"""`skiff.bench.pull_decode`: the answers it builds decode to the messages it says, and the
figure it prints is measured over every message of every round."""

from __future__ import annotations

import json

import pytest

from skiff.bench.pull_decode import answers, check, main
from skiff.protocol.message_codec import decode_stored_messages


def test_the_answers_hold_consecutive_offsets_and_bodies_that_name_them() -> None:
    bodies = answers(3, 5, 20)
    check(bodies, 5, 20)
    msgs = decode_stored_messages(bodies[2])
    assert [m.queue_offset for m in msgs] == [10, 11, 12, 13, 14]
    assert msgs[1].body == (11).to_bytes(8, "big") * 2 + bytes(4)
    assert msgs[0].born_timestamp == msgs[4].born_timestamp and msgs[0].topic == "BenchPullDecode"


def test_a_round_is_measured_per_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pulls", "4", "--batch", "32", "--repeat", "2", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["pulls"] == 4 and figures["batch"] == 32 and len(figures["rounds_ns_per_message"]) == 2
    assert 0 < figures["ns_per_message"] == min(figures["rounds_ns_per_message"])


def test_bad_options_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--batch", "0"])
    assert "at least 1" in capsys.readouterr().err
