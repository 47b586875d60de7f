"""A broker raises its soft open-file limit to the hard one: every ConsumeQueue file
holds a descriptor, and a soft limit of 1,024 would stop it at about a thousand queues."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

SCRIPT = """
import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
from skiff.cli.broker import raise_open_file_limit
print(raise_open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)
"""


HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


@pytest.mark.skipif(HARD == resource.RLIM_INFINITY or HARD <= 256, reason="needs a finite hard limit above 256")
def test_the_soft_limit_is_raised_to_the_hard_one() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    returned, soft, hard = map(int, done.stdout.split())
    assert returned == soft == hard
