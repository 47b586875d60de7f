"""The `skiff` command line without servers: a bad option is reported with its (sub)command's
usage, `skiff message trace` groups events per message, `skiff bench spark` documents every
option and `skiff bench failover` names send statuses."""

from __future__ import annotations

import argparse

import pytest

from skiff.bench import failover, spark
from skiff.cli import trace
from skiff.cli.main import main
from skiff.client.trace import TraceEvent


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    assert info.value.code == 2
    out = capsys.readouterr()
    assert out.out == ""
    return out.err


def test_a_misspelled_option_prints_the_subcommand_usage(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "topic", "create", "-t", "X", "--topc", "Y")
    assert err.startswith("usage: skiff topic create ")
    assert "skiff topic create: error: unrecognized arguments: --topc Y" in err
    assert "usage: skiff [-h]" not in err


def test_a_misspelled_required_option_is_named_too(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "topic", "create", "--topc", "X")
    assert err.startswith("usage: skiff topic create ")
    assert ("skiff topic create: error: unrecognized arguments: --topc; "
            "the following arguments are required: -t/--topic") in err


@pytest.mark.parametrize("argv, prog", [
    (("consume", "-t", "T", "--bogus"), "skiff consume"),
    (("send", "-t", "T", "--tag", "x", "body", "--nope=1"), "skiff send"),
    (("consumer", "progress", "-g", "G", "--topics", "T"), "skiff consumer progress"),
    (("message", "trace", "KEY", "--trace", "T", "--x"), "skiff message trace"),
    (("topic", "--bogus"), "skiff topic"),
])
def test_each_level_reports_its_own_usage(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                          prog: str) -> None:
    err = usage_error(capsys, *argv)
    assert err.startswith(f"usage: {prog} ") and f"{prog}: error: unrecognized arguments" in err, err


def test_known_spellings_are_not_reported(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, "topic", "create", "-q8", "--json", "--cluster=C", "--top")  # --top: an abbreviation
    assert "error: argument -t/--topic: expected one argument" in err
    err = usage_error(capsys, "topic", "create", "-q", "8")
    assert "error: the following arguments are required: -t/--topic" in err and "unrecognized" not in err


def event(kind: str, msg_id: str, t: int, group: str, **more: object) -> TraceEvent:
    return TraceEvent(kind, msg_id, t, group, "success", **more)  # type: ignore[arg-type]


def test_trace_prints_one_table_per_message(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    events = [
        event("send", "AAA", 1_000, "pg", topic="T", tags="a", keys="k", broker_name="b", queue_id=0),
        event("send", "BBB", 2_000, "pg", topic="T", keys="k", broker_name="b", queue_id=1),
        event("consume", "AAA", 3_000, "cg-1", topic="T"),
        event("consume", "CCC", 3_500, "cg-2", topic="U"),
        event("consume", "BBB", 4_000, "cg-1", topic="T"),
        event("consume", "AAA", 5_000, "cg-2", topic="T"),
    ]
    monkeypatch.setattr(trace, "with_admin", lambda args, work: events)
    args = argparse.Namespace(key="k", trace_topic="TT", json=False)
    assert trace.message_trace(args) == 0
    sections = capsys.readouterr().out.strip().split("\n\n")
    assert [s.splitlines()[0] for s in sections] == [
        "AAA: topic T, tags a, keys k", "BBB: topic T, tags -, keys k", "CCC: topic U, send not traced"]
    for section in sections:
        assert section.splitlines()[1].split()[:3] == ["TIME", "EVENT", "GROUP"]
    rows = [[line.split()[2:4] for line in s.splitlines()[2:]] for s in sections]
    assert rows == [[["send", "pg"], ["consume", "cg-1"], ["consume", "cg-2"]],
                    [["send", "pg"], ["consume", "cg-1"]],
                    [["consume", "cg-2"]]]


def test_trace_json_stays_one_list_of_events(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    events = [event("send", "AAA", 1_000, "pg"), event("send", "BBB", 2_000, "pg")]
    monkeypatch.setattr(trace, "with_admin", lambda args, work: events)
    assert trace.message_trace(argparse.Namespace(key="k", trace_topic="TT", json=True)) == 0
    assert '"msg_id": "BBB"' in capsys.readouterr().out


@pytest.mark.parametrize("module", [spark, failover])
def test_every_bench_option_has_help(module) -> None:
    parser = module.build_parser()
    for action in parser._actions:
        assert action.help and action.help.strip(), f"{module.__name__}: {action.option_strings} has no help"


def test_failover_statuses_are_named() -> None:
    named = failover.status_names({0: 52148, -1: 84, 14: 3, 12: 2, 999: 1})
    assert named == {"SEND_OK": 52148, "failed (no answer/timeout)": 84, "refused: SERVICE_NOT_AVAILABLE (14)": 3,
                     "FLUSH_SLAVE_TIMEOUT": 2, "refused: UNKNOWN (999)": 1}
    text = failover.format_report({"lost": 0, "statuses": {"SEND_OK": 52148, "failed (no answer/timeout)": 84}})
    assert text.splitlines() == ["lost: 0", "statuses: SEND_OK: 52148, failed (no answer/timeout): 84"]
