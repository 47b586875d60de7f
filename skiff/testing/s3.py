"""moto's S3 server as a real process for tier tests: started on a free port of
127.0.0.1, waited for with a deadline, stopped (and killed if it does not stop).

Credentials are dummies moto accepts; the tests pass them to boto3 and to brokers
through the environment, as a deployment would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from skiff.testing.processes import free_port
from skiff.testing.waits import wait_for

S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
"""What boto3 needs to talk to moto (any key works)."""


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def client(self) -> Any:
        """A boto3 S3 client of this server."""
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                            aws_secret_access_key="testing", region_name="us-east-1")

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def moto_s3() -> Iterator[S3Server]:
    """A moto S3 server for the duration of the block."""
    exe = shutil.which("moto_server", path=os.path.dirname(sys.executable))
    command = [exe] if exe else [sys.executable, "-m", "moto.server"]
    port = free_port()
    proc = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, **S3_ENV})
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is not None or _answers(endpoint + "/moto-api/"), 30.0, "moto's S3 server")
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with {proc.returncode}")
        yield S3Server(endpoint)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
