"""Held pulls whose answer is full are answered inside the dispatch notice; the others
wait for the one wake-up after the loop step, which gathers that step's appends."""

import asyncio

from skiff.broker.long_polling import PullHoldService
from skiff.protocol.command import RemotingCommand
from skiff.transport.loop import run_coroutine


class Queue:
    """A queue's max offset, and the re-reads of its held pulls (one answer per re-read)."""

    def __init__(self) -> None:
        self.max_offset = 0
        self.reruns: list[int] = []

    def rerun(self, offset: int):
        def run(final: bool) -> RemotingCommand | None:
            self.reruns.append(self.max_offset)
            if self.max_offset > offset:
                return RemotingCommand(code=0, remark=f"{offset}..{self.max_offset}")
            return RemotingCommand(code=19, remark="none") if final else None
        return run


def test_a_full_answer_goes_out_inside_the_notice_and_a_partial_one_after_the_step():
    async def main():
        hold = PullHoldService(recheck_interval_ms=60_000)
        hold.start()
        q = Queue()
        full = hold.hold(("T", 0), 0, q.rerun(0), 15_000, max_nums=256)
        partial = hold.hold(("U", 0), 0, q.rerun(0), 15_000, max_nums=32)
        unbounded = hold.hold(("T", 1), 0, q.rerun(0), 15_000)
        q.max_offset = 256
        hold.notify([("T", 0, 256), ("U", 0, 10), ("T", 1, 256)])
        # No loop step ran: only the pull that 256 new entries fill is answered.
        assert full.given and not partial.given and not unbounded.given
        assert (await full).remark == "0..256"
        assert hold.held_count == 2
        q.max_offset = 300
        hold.notify([("U", 0, 20)])  # the same step: gathered with the first notice
        answers = await asyncio.wait_for(asyncio.gather(partial, unbounded), 2)
        assert [a.remark for a in answers] == ["0..300", "0..300"]
        assert q.reruns == [256, 300, 300]  # one re-read each: none before the step ended
        assert hold.held_count == 0
        await hold.stop()
    run_coroutine(main())


def test_a_full_pull_that_finds_nothing_matching_stays_held():
    async def main():
        hold = PullHoldService(recheck_interval_ms=60_000)
        hold.start()
        reads = []

        def filtered(final: bool) -> RemotingCommand | None:
            reads.append(final)  # every new entry was filtered out (tags): nothing to answer
            return RemotingCommand(code=19, remark="none") if final else None

        held = hold.hold(("T", 0), 0, filtered, 200, max_nums=4)
        hold.notify([("T", 0, 8)])
        assert not held.given and hold.held_count == 1
        answer = await asyncio.wait_for(held, 5)
        assert answer.remark == "none" and reads[-1] is True
        await hold.stop()
    run_coroutine(main())
