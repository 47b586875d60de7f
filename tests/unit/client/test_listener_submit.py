"""`ListenerRunner.submit`: coroutine listeners as jobs of a few worker tasks (no task per
batch), bounded by the runner's concurrency, every outcome handed to its callback; and
`ListenerRunner.run`, the orderly service's, awaited in the caller's task within the same bound."""

from __future__ import annotations

import asyncio
from typing import Any

from skiff.client._impl.listener import SKIPPED, ListenerRunner


async def settled(runner: ListenerRunner, count: int, outcomes: Any) -> None:
    """Wait (5 s at most) until ``count`` outcomes arrived; `drain` would close the runner."""
    deadline = asyncio.get_running_loop().time() + 5
    while len(outcomes) < count or runner.inflight:
        assert asyncio.get_running_loop().time() < deadline, (len(outcomes), runner.inflight)
        await asyncio.sleep(0.005)


def one(i: int) -> list[Any]:
    return [i]


def test_submit_runs_every_job_once_within_the_concurrency_bound() -> None:
    async def main() -> None:
        running = peak = 0

        async def listener(batch: list[Any], ctx: object) -> str:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0)
            running -= 1
            if batch[0] == 7:
                raise ValueError("seven")
            return f"ok {batch[0]}"

        runner = ListenerRunner(listener, 3)
        outcomes: dict[int, Any] = {}
        for i in range(50):
            runner.submit(one(i), None, lambda outcome, i=i: outcomes.__setitem__(i, outcome))  # type: ignore[misc]
        await settled(runner, 50, outcomes)
        assert sorted(outcomes) == list(range(50))
        assert all(outcomes[i] == f"ok {i}" for i in range(50) if i != 7)
        assert isinstance(outcomes[7], ValueError)
        assert peak == 3  # the bound is reached and never passed
        assert runner.inflight == 0

    asyncio.run(main())


def test_submit_after_close_skips_and_sync_listeners_answer_through_the_pool() -> None:
    async def main() -> None:
        async def listener(batch: list[Any], ctx: object) -> str:
            return "called"

        runner = ListenerRunner(listener, 2)
        runner.close()
        got: list[Any] = []
        runner.submit(one(1), None, got.append)
        await runner.drain(5.0)
        assert got == [SKIPPED]

        sync_runner = ListenerRunner(lambda batch, ctx: len(batch), 2)
        answers: list[Any] = []
        for n in (1, 2, 3):
            sync_runner.submit(one(0) * n, None, answers.append)
        await settled(sync_runner, 3, answers)
        assert sorted(answers) == [1, 2, 3]
        sync_runner.shutdown()

    asyncio.run(main())


def test_run_awaits_in_the_callers_task_within_the_bound() -> None:
    async def main() -> None:
        running = peak = 0

        async def listener(batch: list[Any], ctx: object) -> str:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0)
            running -= 1
            if batch[0] == 3:
                raise ValueError("three")
            return f"ok {batch[0]}"

        runner = ListenerRunner(listener, 2)
        tasks_before = len(asyncio.all_tasks())
        outcomes = await asyncio.gather(*(runner.run(one(i), None) for i in range(8)))
        assert [o for i, o in enumerate(outcomes) if i != 3] == [f"ok {i}" for i in range(8) if i != 3]
        assert isinstance(outcomes[3], ValueError)
        assert peak == 2 and runner.inflight == 0
        assert len(asyncio.all_tasks()) == tasks_before  # no task left behind, none made per batch by run
        runner.close()
        assert await runner.run(one(9), None) is SKIPPED

    asyncio.run(main())


def test_a_job_submitted_as_the_last_worker_stops_still_runs() -> None:
    """The worker's task is done a loop step before its done callback runs: a job submitted in
    that step must start a new worker, or it waits for the next submit (forever, for the last
    message)."""
    async def main() -> None:
        async def listener(batch: list[Any], ctx: object) -> int:
            return int(batch[0])

        runner = ListenerRunner(listener, 1)
        got: list[Any] = []
        loop = asyncio.get_running_loop()

        def first_done(outcome: Any) -> None:
            got.append(outcome)
            loop.call_soon(runner.submit, one(2), None, got.append)  # runs after the worker returns

        runner.submit(one(1), None, first_done)
        await settled(runner, 2, got)
        assert got == [1, 2]

    asyncio.run(main())
