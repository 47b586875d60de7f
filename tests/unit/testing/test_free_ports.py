"""`started_on_free_ports`: a try-out that lost a port to another process before its bind is
started again on new ports; any other failure is raised at once."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import cast

import pytest

from skiff.testing.processes import ProcessError, SkiffProcess
from skiff.testing.up_ha import started_on_free_ports


class _Started:
    def __init__(self, line: str) -> None:
        self.line = line

    def wait_for_line(self, pattern: str, timeout_s: float) -> re.Match[str]:
        match = re.search(pattern, self.line)
        assert match is not None
        return match


def _starts(*failures: str) -> tuple[list[int], Callable[[], SkiffProcess]]:
    calls: list[int] = []

    def start() -> SkiffProcess:
        calls.append(len(calls))
        if len(calls) <= len(failures):
            raise ProcessError(failures[len(calls) - 1])
        return cast(SkiffProcess, _Started("skiff up --brokers 2: NameServer 127.0.0.1:9876, ..."))
    return calls, start


def test_a_port_taken_before_the_bind_starts_again_on_new_ports() -> None:
    calls, start = _starts("skiff: cannot listen on 127.0.0.1:49969: address already in use")
    _, ready = started_on_free_ports(start, r"NameServer (\S+),")
    assert ready[1] == "127.0.0.1:9876" and calls == [0, 1]


def test_other_failures_and_the_last_attempt_are_raised() -> None:
    calls, start = _starts("skiff: bad configuration")
    with pytest.raises(ProcessError, match="bad configuration"):
        started_on_free_ports(start, r"NameServer (\S+),")
    assert calls == [0]
    taken = "address already in use"
    calls, start = _starts(taken, taken, taken)
    with pytest.raises(ProcessError, match=taken):
        started_on_free_ports(start, r"NameServer (\S+),", attempts=3)
    assert calls == [0, 1, 2]
