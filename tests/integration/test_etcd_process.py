"""`skiff up --ha`'s etcd runner: a busy port gets a clear error naming the log, no process left."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from skiff.broker.ha.etcd_process import EtcdProcess, etcd_binary
from skiff.common.errors import SkiffError
from skiff.testing.processes import free_port

pytestmark = pytest.mark.skipif(etcd_binary() is None, reason="etcd-server is not installed (make etcd)")


def test_an_etcd_whose_client_port_is_taken_reports_it_and_leaves_nothing_running(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        etcd = EtcdProcess(tmp_path / "etcd", client_port=port, peer_port=free_port())
        etcd.launch()
        proc = etcd.proc
        assert proc is not None
        # The taken port still accepts connections, so readiness must come from the process, not the port:
        # an etcd that exited is an error even though something answers there.
        with pytest.raises(SkiffError, match=r"etcd did not start on 127\.0\.0\.1:\d+ .*etcd\.log"):
            etcd.wait_ready(10)
    assert proc.poll() is not None and etcd.proc is None
    assert (tmp_path / "etcd" / "etcd.log").read_bytes()
