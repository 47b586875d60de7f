"""The run's picture (matplotlib, PNG): messages acknowledged and delivered per second, and
each send's answer time, over the run, with every fault's window shaded and named, as
OpenChaos's latency-point graph. Sends answered other than SEND_OK are drawn apart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skiff.testing.chaos.checkers import consumer_groups, dequeues, enqueue_responses, fault_windows
from skiff.testing.chaos.history import Event, Result

if TYPE_CHECKING:
    from matplotlib.axes import Axes

LABELLED_FAULTS_MAX = 30
"""Past this many faults the windows are coloured by type (legend) but not named one by one."""
FAULT_COLOURS = ("#f4a582", "#92c5de", "#b8e186", "#fdb863", "#c2a5cf", "#d9d9d9", "#fb9a99", "#a6cee3",
                 "#ffff99", "#cab2d6", "#b2df8a", "#80cdc1")


def plot(events: Sequence[Event], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    answers = enqueue_responses(events)
    if not answers:
        return
    t0 = min(e.invoked_ms for e in answers)
    fig, (rate, latency) = plt.subplots(2, 1, figsize=(14, 7), sharex=True)
    _rates(rate, answers, events, t0)
    _latency(latency, answers, t0)
    _faults((rate, latency), events, t0)
    latency.legend(loc="upper right", fontsize=7, markerscale=4, ncol=2)
    rate.set_title(title)
    latency.set_xlabel("seconds since the first send")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def per_second(times_ms: list[int], t0: int) -> tuple[list[int], list[int]]:
    counts = Counter((t - t0) // 1000 for t in times_ms)
    if not counts:
        return [], []
    xs = list(range(0, max(counts) + 1))
    return xs, [counts.get(x, 0) for x in xs]


def _rates(ax: Axes, answers: list[Event], events: Sequence[Event], t0: int) -> None:
    acked = [e.t_ms for e in answers if e.result == Result.SUCCESS]
    series = [("SEND_OK", acked)]
    series += [(f"delivered to {g}", [e.t_ms for e in dequeues(events, g)]) for g in consumer_groups(events)]
    for label, times in series:
        xs, ys = per_second(times, t0)
        ax.plot(xs, ys, label=label, linewidth=0.9)
    ax.set_ylim(0, 3 * max(per_second(acked, t0)[1] or [1]))  # redelivery bursts after a failover go off the top
    ax.set_ylabel("messages / s (clipped at 3x the peak SEND_OK rate)")
    ax.legend(loc="upper right", fontsize=8)


def _latency(ax: Axes, answers: list[Event], t0: int) -> None:
    for result, colour in ((Result.SUCCESS, "#2166ac"), (Result.UNKNOWN, "#f1a340"), (Result.FAILURE, "#b2182b")):
        points = [e for e in answers if e.result == result]
        ax.scatter([(e.invoked_ms - t0) / 1000 for e in points], [max(e.latency_ms, 1) for e in points],
                   s=2, c=colour, label=f"{result.value} ({len(points)})")
    ax.set_yscale("log")
    ax.set_ylabel("send answered after (ms)")


def _faults(axes: tuple[Axes, Axes], events: Sequence[Event], t0: int) -> None:
    names = sorted({start.op for start, _, _ in fault_windows(events)})
    colour = {n: FAULT_COLOURS[i % len(FAULT_COLOURS)] for i, n in enumerate(names)}
    for n in names:
        axes[1].axvspan(0, 0, color=colour[n], alpha=0.35, lw=0, label=n)
    windows = fault_windows(events)
    for start, end, close in windows:
        stop = end.t_ms if end is not None else (close or start.t_ms + 1000)
        for ax in axes:
            ax.axvspan((start.t_ms - t0) / 1000, (stop - t0) / 1000, color=colour[start.op], alpha=0.35, lw=0)
        if len(windows) <= LABELLED_FAULTS_MAX:  # names only while they stay readable
            axes[0].text((start.t_ms - t0) / 1000, 0, start.op, rotation=90, fontsize=6, va="bottom")
