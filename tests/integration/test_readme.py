"""README.md runs as written: every fenced code block is taken from the README itself and
run, in order, against a real NameServer and broker, so the README cannot drift.

What the test changes, and why:
- the NameServer address: the blocks say ``127.0.0.1:9876`` (what ``make run`` listens on);
  the test's cluster is on a free port, so ``SKIFF_NAMESRV`` points the CLI at it and the
  address is replaced in the Python blocks;
- ``build/venv``: the shell lines run in a scratch directory whose ``build/venv`` is this
  interpreter's environment, so ``. build/venv/bin/activate`` is run as written;
- skipped: ``make run`` and ``make test`` (the cluster stands in for the first; the second
  is the suite this test is part of) and ``pip install`` (it would change the environment
  under test). Only those lines are skipped; `SKIPPED` lists them and the test checks that
  nothing else is.

The push-consumer block runs until Ctrl+C: the test sends a message after it started, waits
until the consumer prints it, then interrupts it. The Spark block runs in a plain
``SparkSession`` with ``PYSPARK_PYTHON`` unset and this environment's ``bin`` off PATH, as a
newcomer's shell would have it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from skiff.cli.main import build_parser
from skiff.client import Message, Producer
from skiff.testing.cluster import Cluster
from skiff.testing.processes import ProcessError, SkiffProcess

README = Path(__file__).resolve().parents[2] / "README.md"
README_NAMESRV = "127.0.0.1:9876"
SKIPPED = re.compile(r"^(make (run|test)|pip install)\b")
"""Lines the test does not run (see the module docstring)."""
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
TIMEOUT_S = 100
"""Per README shell block and push-consumer step: a wait that never ends fails here, with the output."""
SPARK_TIMEOUT_S = 300
"""The Spark block: a plain session and its first job take ~30 s, but 2-3 min on a loaded 2-core
machine (75 s to start the JVM and 55 s for a one-row show() at load 18)."""

pytestmark = [pytest.mark.spark, pytest.mark.slow]


INLINE = re.compile(r"`([^`]+)`")
REPO_PATH = re.compile(r"^(docs|examples|tests|skiff)/[\w./-]*$")


def readme_blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block, in README order."""
    return [(m[1], m[2]) for m in BLOCK.finditer(README.read_text())]


def command_lines(text: str) -> list[str]:
    """A shell block's commands, comments after `#` dropped (none of ours quote a #)."""
    return [line.split(" #")[0].strip() for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("readme")) as c:
        yield c


@pytest.fixture
def env(cluster: Cluster, tmp_path: Path) -> dict[str, str]:
    """What a newcomer's shell in the repository has: no PYSPARK_PYTHON, this environment not
    activated (its bin off PATH), skiff importable (the test's own PYTHONPATH) and the NameServer."""
    venv_bin = str(Path(sys.prefix) / "bin")
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin)
    skiff_root = str(README.parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "VIRTUAL_ENV")}
    env.update(PATH=path, SKIFF_NAMESRV=cluster.namesrv_addr, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [skiff_root, os.environ.get("PYTHONPATH")])))
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "venv").symlink_to(sys.prefix)
    return env


def run_shell(lines: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """Run the lines in one bash, each must exit 0; each line's output."""
    marker = "### line done"
    script = "set -e\n" + "".join(f"{line}\necho '{marker}'\n" for line in lines)
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 0, f"README line failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout.split(marker + "\n")[:-1]


def run_python(text: str, cluster: Cluster, cwd: Path, env: dict[str, str], *, interrupt_after=None,
               timeout_s: float = TIMEOUT_S) -> str:
    script = cwd / "readme_block.py"
    script.write_text(text.replace(README_NAMESRV, cluster.namesrv_addr))
    # PYTHONFAULTHANDLER: a block that does not end is sent SIGABRT, which writes every
    # thread's stack into its output, so a failure says where it waited.
    proc = SkiffProcess([], cwd=cwd, env={**env, "PYTHONFAULTHANDLER": "1"},
                        command_prefix=[sys.executable, str(script)])
    with proc:
        if interrupt_after is not None:
            interrupt_after(proc)
            proc.signal(signal.SIGINT)
        try:
            code = proc.wait(timeout_s)
        except ProcessError:
            proc.signal(signal.SIGABRT)
            with contextlib.suppress(ProcessError):
                proc.wait(10)
            when = "after SIGINT" if interrupt_after is not None else "after it started"
            raise ProcessError(f"the README block still ran {timeout_s} s {when}; its output and "
                               f"threads:\n{proc.output}") from None
    assert code == 0, proc.output
    return proc.output


def keeps_consuming(cluster: Cluster):
    """While the push consumer runs: send a message it subscribes to and wait until it prints it."""
    def check(proc: SkiffProcess) -> None:
        proc.wait_for_line(r"created b'\{\"id\": 1\}'", TIMEOUT_S)
        with Producer("readme-test", cluster.namesrv_addr) as producer:
            producer.send(Message.of("Orders", b"sent-while-running", tags="paid"))
        proc.wait_for_line(r"paid b'sent-while-running'", TIMEOUT_S)
    return check


@pytest.mark.timeout(4 * TIMEOUT_S + SPARK_TIMEOUT_S + 60)  # every wait below, with room
def test_readme_runs_as_written(cluster: Cluster, env: dict[str, str], tmp_path: Path):
    blocks = readme_blocks()
    assert [lang for lang, _ in blocks] == ["sh", "sh", "python", "python"], "a README block this test does not know"
    setup, usage = (command_lines(text) for _, text in blocks[:2])
    assert all(SKIPPED.match(line) for line in setup) and not any(SKIPPED.match(line) for line in usage)

    send, consume, status, progress = run_shell(usage, tmp_path, env)[1:]
    assert "SEND_OK" in send
    assert re.search(r"tags=created keys=order-1 \{\"id\": 1\}", consume), consume
    header, *rows = status.splitlines()
    assert header.split()[:2] == ["BROKER", "QUEUE"] and sum(int(r.split()[3]) for r in rows) == 1, status
    assert re.search(r"^Orders\s+broker-a\s+\d+\s+\d+\s+\d+\s+0\s", progress, re.M), progress

    pushed = run_python(blocks[2][1], cluster, tmp_path, env, interrupt_after=keeps_consuming(cluster))
    assert "sent-while-running" in pushed

    shown = run_python(blocks[3][1], cluster, tmp_path, env, timeout_s=SPARK_TIMEOUT_S)
    assert re.search(r"\|\s*created\s*\|\s*\{\"id\": 1\}\s*\|", shown), shown
    assert re.search(r"\|\s*paid\s*\|\s*sent-while-running\s*\|", shown), shown


def inline_spans() -> list[str]:
    """The README's inline code outside fenced blocks, a span broken over lines joined again."""
    prose = BLOCK.sub("", README.read_text())
    return [" ".join(m[1].split()) for m in INLINE.finditer(prose)]


def test_readme_inline_commands_and_paths_exist():
    """The commands and paths the prose names: each `skiff ...` (every alternative of a|b) is a
    real command, each `make ...` a Makefile target, each repo path exists."""
    parser = build_parser()
    spans = inline_spans()
    commands = [s.split() for s in spans if s.startswith("skiff ")]
    assert ["skiff", "broker", "-c", "broker.conf", "-n", "'ns1:9876;ns2:9876'"] in commands  # joined across lines
    for words in commands:
        path = [w for w in words[1:] if not w.startswith("-")][:2] if words[1] == "bench" else words[1:2]
        for alternative in path[-1].split("|"):
            args, _ = parser.parse_known_args([*path[:-1], alternative])  # an unknown one exits 2
            assert getattr(args, "handler", None), f"README names `{' '.join(words)}`, which runs nothing"
    targets = set(re.findall(r"^([\w-]+):", (README.parent / "Makefile").read_text(), re.M))
    for span in spans:
        if span.startswith("make "):
            assert span.split()[1] in targets, span
        if REPO_PATH.match(span):
            assert (README.parent / span).exists(), span
