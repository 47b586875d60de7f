"""`skiff.bench.tier_table`: the run it times is the records it says, and bad options are refused."""

from __future__ import annotations

import pytest

from skiff.bench.tier_table import main, make_run
from skiff.common.stored_message import decode_records


def test_the_run_holds_the_records_it_says() -> None:
    messages = decode_records(make_run(5, 100))
    assert [m.queue_offset for m in messages] == [0, 1, 2, 3, 4]
    assert {len(m.body) for m in messages} == {100} and messages[3].msg_id == f"ID{3:024X}"
    assert messages[0].born_host == "10.0.0.1:5000" and messages[0].store_host == "127.0.0.1:10911"


def test_it_prints_the_cpu_per_message_of_each_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--messages", "50", "--size", "10", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("50 records of 10 B")
    assert [line.split(":")[0] for line in lines[1:]] == ["records_to_table", "Tier.upload of the table",
                                                         "  of which key_index"]
    assert all("us CPU per message" in line for line in lines[1:])


@pytest.mark.parametrize("bad", [["--messages", "0"], ["--size", "-1"], ["--repeat", "0"]])
def test_bad_options_are_refused(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(bad)
    assert "must be at least" in capsys.readouterr().err
