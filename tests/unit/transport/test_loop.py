"""`run`: the first SIGTERM/SIGINT asks the server to stop, a second one cancels it."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from skiff.transport.loop import run


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_first_signal_sets_the_stop_event(sig):
    async def main(stop: asyncio.Event) -> str:
        os.kill(os.getpid(), sig)
        await asyncio.wait_for(stop.wait(), 5)
        return "stopped cleanly"

    assert run(main) == "stopped cleanly"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_second_signal_cancels_main():
    async def main(stop: asyncio.Event) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), 5)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(30)

    with pytest.raises(KeyboardInterrupt):
        run(main)
