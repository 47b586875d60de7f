"""`skiff up` logs what an operator acts on: no line per CLI command or client connection,
and the open-file warning once, only when the queues come near the limit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from skiff.testing.processes import SkiffProcess, skiff_command
from skiff.testing.waits import wait_for

UP = ["up", "--dir", "data", "--namesrv-port", "0", "--broker-port", "0", "--listenHost=127.0.0.1",
      "--metrics-port", "0", "--namesrv-metrics-port", "0", "--no-dashboard", "--grpcServerPort=0",
      "--mappedFileSizeCommitLog=4194304", "--maxHashSlotNum=1024", "--maxIndexNum=4096"]
OPEN_FILES_WARNING = "may open at most"
TIMEOUT_S = 60


def start_up(tmp_path: Path, open_files: int | None = None) -> tuple[SkiffProcess, str]:
    """`skiff up` (under ``ulimit -n open_files`` if given); the process and its NameServer address."""
    prefix = None
    if open_files is not None:
        prefix = ["bash", "-c", f'ulimit -n {open_files} && exec "$@"', "skiff-up", *skiff_command([])]
    up = SkiffProcess(UP, cwd=tmp_path, command_prefix=prefix)
    m = up.wait_for_line(r"skiff namesrv listening on (?P<addr>\S+)")
    up.wait_for_line(r"skiff broker listening on")
    return up, m["addr"].rstrip(",")


def cli(namesrv: str, *args: str) -> None:
    done = subprocess.run(skiff_command([*args, "-n", namesrv]), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr


def test_cli_commands_leave_no_lines_in_the_servers_log(tmp_path: Path):
    up, namesrv = start_up(tmp_path)
    with up:
        cli(namesrv, "topic", "create", "-t", "L-quiet", "-q", "2")
        started = len(up.output.splitlines())
        commands = [("topic", "list"), ("topic", "status", "-t", "L-quiet"), ("send", "-t", "L-quiet", "x"),
                    ("consume", "-t", "L-quiet", "--from-beginning", "--count", "1"), ("cluster", "list")]
        for args in commands:
            cli(namesrv, *args)
        cli(namesrv, "send", "-t", "L-quiet", "last")
        log = up.output.splitlines()[started:]
    assert up.popen.returncode == 0
    noisy = [line for line in log if re.search(r" (INFO|WARNING) skiff\.transport", line) or "closed" in line]
    assert noisy == [], "\n".join(noisy)
    assert len(log) <= 2, "\n".join(log)  # at most the auto-created topic's lines, no line per command
    assert OPEN_FILES_WARNING not in up.output  # this machine's limit is far above the try-out's queues


def test_open_file_warning_comes_once_when_the_queues_near_the_limit(tmp_path: Path):
    up, namesrv = start_up(tmp_path, open_files=400)
    with up:
        assert OPEN_FILES_WARNING not in up.output  # a low limit alone is nothing to act on
        cli(namesrv, "topic", "create", "-t", "L-big", "-q", "200")
        wait_for(lambda: OPEN_FILES_WARNING in up.output, TIMEOUT_S, "the open-file warning")
        cli(namesrv, "topic", "create", "-t", "L-bigger", "-q", "100")
    assert up.output.count(OPEN_FILES_WARNING) == 1, up.output
    assert re.search(r"WARNING .*this broker has \d+ queues and may open at most 400 files", up.output)
