"""A server process's allocator keeps MiB-sized buffers for the next request: a Fetch-like round
(eight 1 MiB answers made, then freed) faults no pages in again once tuned, where under glibc's
defaults part of the memory is given back and faulted in again on every round. An operator's own threshold in the
environment is left alone."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

ROUNDS = """
import resource, sys
from skiff.transport.allocator import tune_for_server
tuned = tune_for_server() if sys.argv[1] == "tune" else False
def rounds(n):
    for _ in range(n):
        answers = [bytes(1 << 20) for _ in range(8)]
        del answers
rounds(3)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
rounds(20)
print(int(tuned), (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 20)
"""

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the tuning is glibc's mallopt")


def _faults_per_round(mode: str, **env: str) -> tuple[bool, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], env={**clean, **env}, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    return out[0] == "1", int(out[1])


def test_tuned_rounds_fault_no_pages_in_and_default_ones_do() -> None:
    tuned, faults = _faults_per_round("tune")
    assert tuned and faults < 16, faults
    tuned, faults = _faults_per_round("default")
    assert not tuned and faults > 128, faults  # glibc's defaults: ~240 pages (a MiB) faulted in again each round


def test_an_operators_threshold_is_left_alone() -> None:
    assert _faults_per_round("tune", MALLOC_TRIM_THRESHOLD_="131072")[0] is False
    assert _faults_per_round("tune", GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072")[0] is False
