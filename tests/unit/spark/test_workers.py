"""`register` checks the interpreter Spark's Python workers will start: a local session is
pointed at this interpreter, any other session gets an error that says what to set. The
session object here only carries what the check reads (master, pythonExec); the real local
path runs in tests/integration/test_readme.py with a real SparkSession."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from skiff.spark.workers import SparkWorkerPythonError, ensure_worker_python, worker_import_error


@pytest.fixture
def bare_python(tmp_path: Path) -> str:
    """An interpreter that cannot import skiff: this one without site-packages or PYTHONPATH."""
    script = tmp_path / "bare-python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    script.chmod(0o755)
    return str(script)


def session(master: str, python: str) -> SimpleNamespace:
    return SimpleNamespace(sparkContext=SimpleNamespace(master=master, pythonExec=python))


def test_this_interpreter_imports_the_source():
    assert worker_import_error(sys.executable) is None


def test_missing_interpreter_is_reported(tmp_path: Path):
    assert "No such file" in (worker_import_error(str(tmp_path / "no-python")) or "")


def test_local_session_is_pointed_at_this_interpreter(bare_python: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    spark = session("local[2]", bare_python)
    ensure_worker_python(spark)
    assert spark.sparkContext.pythonExec == sys.executable and os.environ["PYSPARK_PYTHON"] == sys.executable


@pytest.mark.parametrize("master", ["spark://10.0.0.1:7077", "local[2]"])
def test_otherwise_the_error_says_what_to_set(bare_python: str, master: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYSPARK_PYTHON", bare_python)  # chosen by the user: not overridden, even locally
    spark = session(master, bare_python)
    with pytest.raises(SparkWorkerPythonError, match=f"PYSPARK_PYTHON={sys.executable}") as err:
        ensure_worker_python(spark)
    assert "No module named 'skiff'" in str(err.value) and spark.sparkContext.pythonExec == bare_python
