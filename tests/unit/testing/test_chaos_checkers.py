"""The chaos checkers on hand-made histories: each must flag what it exists to flag, and pass
a history that is clean."""

from __future__ import annotations

from pathlib import Path

from skiff.testing.chaos.checkers import (by_client, check_all, check_latency, check_order, check_queue, check_rto,
                                          client_kind, percentile, subsequence_break)
from skiff.testing.chaos.history import Event, HistoryWriter, Kind, Op, Result, fault_event, read_history

G = "orderly"


def enq(value: str, t: int, result: Result = Result.SUCCESS, latency: int = 5, key: str = "",
        client: str = "p0") -> Event:
    return Event(client, Op.ENQUEUE, Kind.RESPONSE, result, value, key or value.split("-")[0], t, latency, "")


def deq(value: str, t: int, group: str = G, key: str = "") -> Event:
    return Event(group, Op.DEQUEUE, Kind.RESPONSE, Result.SUCCESS, value, key or value.split("-")[0], t, 0, "")


def fault(name: str, kind: Kind, t: int) -> Event:
    return fault_event(name, kind, ["broker-1"], t_ms=t)


CLEAN = [enq("a-0", 10), enq("a-1", 20), enq("b-0", 25), deq("a-0", 30), deq("b-0", 31), deq("a-1", 40)]


def test_a_clean_history_passes_every_checker() -> None:
    verdict = check_all(CLEAN, [G])
    assert verdict.ok and verdict.lost == 0 and verdict.order_violations == 0
    q = verdict.queue[0]
    assert (q.success, q.dequeued, q.duplicated, q.recovered, q.unexpected) == (3, 3, 0, 0, 0)


def test_an_acknowledged_message_never_dequeued_is_lost() -> None:
    q = check_queue([*CLEAN, enq("a-2", 50)], G)
    assert q.lost == 1 and q.lost_values == ["a-2"]
    assert not check_all([*CLEAN, enq("a-2", 50)], [G]).ok


def test_an_unknown_enqueue_never_dequeued_is_not_lost_and_one_dequeued_is_recovered() -> None:
    history = [*CLEAN, enq("a-2", 50, Result.UNKNOWN), enq("a-3", 51, Result.FAILURE), deq("a-3", 60)]
    q = check_queue(history, G)
    assert (q.lost, q.unknown, q.failure, q.recovered) == (0, 1, 1, 1)


def test_a_value_dequeued_twice_is_duplicated_and_one_never_sent_is_unexpected() -> None:
    q = check_queue([*CLEAN, deq("a-0", 50), deq("z-9", 51)], G)
    assert (q.duplicated, q.duplicated_values, q.unexpected, q.unexpected_values) == (1, ["a-0"], 1, ["z-9"])
    assert not check_all([*CLEAN, deq("z-9", 51)], [G]).ok


def test_each_group_is_checked_on_its_own() -> None:
    history = [*CLEAN, deq("a-0", 50, "concurrent"), deq("b-0", 51, "concurrent")]
    results = {q.group: q for q in check_all(history, [G]).queue}
    assert results[G].lost == 0 and results["concurrent"].lost == 1
    assert results["concurrent"].lost_values == ["a-1"]


def test_a_swap_within_a_key_breaks_order_and_redeliveries_do_not() -> None:
    swapped = [enq("a-0", 10), enq("a-1", 20), deq("a-1", 30), deq("a-0", 31)]
    result = check_order(swapped, G)
    assert [(v.key, v.first_missing, v.acked_before) for v in result.violations] == [("a", "a-1", 1)]
    redelivered = [enq("a-0", 10), enq("a-1", 20), deq("a-0", 30), deq("a-0", 31), deq("a-1", 32), deq("a-0", 33)]
    assert check_order(redelivered, G).violations == []


def test_order_is_per_key_and_ignores_values_not_acknowledged() -> None:
    history = [enq("a-0", 10), enq("b-0", 11), enq("a-1", 12, Result.UNKNOWN), enq("a-2", 13),
               deq("b-0", 20), deq("a-0", 21), deq("a-2", 22)]
    assert check_order(history, G).violations == []
    assert subsequence_break(["1", "2", "3"], ["1", "3", "2"]) == 2
    assert subsequence_break([], ["1"]) is None


def test_a_lost_message_in_the_middle_of_a_key_breaks_its_order_too() -> None:
    history = [enq("a-0", 10), enq("a-1", 11), enq("a-2", 12), deq("a-0", 20), deq("a-2", 21)]
    assert [v.first_missing for v in check_order(history, G).violations] == ["a-1"]


def test_rto_runs_from_the_first_failure_after_a_fault_to_the_next_success() -> None:
    history = [enq("a-0", 100), fault("kill-master", Kind.START, 200),
               enq("a-1", 260, Result.UNKNOWN, latency=40),   # invoked at 220
               enq("a-2", 300, Result.FAILURE),
               enq("a-3", 1500, latency=100),                  # invoked 1400 >= 220: the recovery
               fault("kill-master", Kind.END, 1600),
               fault("pause-slave", Kind.START, 2000), enq("a-4", 2100), fault("pause-slave", Kind.END, 2200)]
    rtos = check_rto(history)
    assert [(r.name, r.unavailable, r.rto_ms) for r in rtos] == [("kill-master", True, 1280),
                                                                   ("pause-slave", False, 0)]
    assert rtos[0].end_ms == 1600


def test_a_success_invoked_before_the_failure_does_not_end_the_unavailability() -> None:
    history = [fault("partition", Kind.START, 0), enq("a-0", 500, Result.UNKNOWN, latency=300),  # invoked 200
               enq("b-0", 600, latency=500),  # invoked 100: began before the failure's send
               enq("a-1", 900, latency=100)]
    assert check_rto(history)[0].rto_ms == 700


def test_writes_that_never_come_back_have_no_rto_and_a_later_fault_closes_the_window() -> None:
    never = [fault("kill-majority", Kind.START, 0), enq("a-0", 10, Result.FAILURE)]
    assert [(r.unavailable, r.rto_ms) for r in check_rto(never)] == [(True, None)]
    closed = [fault("x", Kind.START, 0), enq("a-0", 10), fault("y", Kind.START, 50),
              enq("a-1", 60, Result.FAILURE), enq("a-2", 90)]
    assert [(r.name, r.unavailable, r.rto_ms) for r in check_rto(closed)] == [("x", False, 0), ("y", True, 35)]


def test_latency_end_to_end_takes_the_first_dequeue() -> None:
    history = [enq("a-0", 10, latency=5), deq("a-0", 30), deq("a-0", 90), enq("a-1", 40, latency=10), deq("a-1", 60)]
    latency = check_latency(history)
    assert latency[f"end_to_end_ms[{G}]"]["max"] == 30 and latency["enqueue_ms"]["max"] == 10
    assert latency[f"end_to_end_ms[{G}]"]["p50"] == 25
    assert percentile([1, 2, 3, 4], 50) == 2 and percentile([], 50) is None and percentile(list(range(100)), 99) == 98


def test_the_history_file_round_trips(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "history")
    for event in [*CLEAN, fault("kill-master", Kind.START, 5)]:
        writer.add(event)
    writer.close()
    assert read_history(tmp_path / "history") == [*CLEAN, fault("kill-master", Kind.START, 5)]
    assert (tmp_path / "history").read_text().splitlines()[0].split("\t")[:4] == ["p0", "enqueue", "RESPONSE",
                                                                                  "SUCCESS"]


def test_the_fault_table_puts_each_message_and_finding_under_the_fault_it_was_sent_in() -> None:
    history = [enq("a-0", 10), fault("kill-master", Kind.START, 100), enq("a-1", 150), enq("a-2", 160),
               fault("kill-master", Kind.END, 300), fault("pause-slave", Kind.START, 400), enq("a-3", 450),
               deq("a-0", 500), deq("a-2", 501), deq("a-3", 502), deq("a-3", 503)]
    table = check_all(history, [G]).faults
    assert table["(before any fault)"]["messages"] == 1
    kill = table["kill-master"]
    assert (kill["messages"], kill["lost"], kill["order_violations"], kill["faults"]) == (2, 1, 1, 1)
    assert (table["pause-slave"]["messages"], table["pause-slave"]["duplicated"]) == (1, 1)


def test_the_client_table_keeps_each_kind_of_sender_apart() -> None:
    """Our producers are p<n>, RocketMQ's clients <kind>-p<n>: each kind's outcomes, losses,
    order and its own RTO (a C++ client still failing after ours recovered is down longer)."""
    assert (client_kind("p3"), client_kind("cpp-p0"), client_kind("rmq5-p12")) == ("python", "cpp", "rmq5")
    history = [enq("k0-0", 10), enq("c0-0", 11, client="cpp-p0"), fault("kill-master", Kind.START, 100),
               enq("k0-1", 150, Result.UNKNOWN), enq("c0-1", 160, Result.UNKNOWN, client="cpp-p0"),
               enq("k0-2", 300, latency=10),                                      # ours back at 300
               enq("c0-2", 1150, Result.FAILURE, client="cpp-p0"),
               enq("c0-3", 2200, latency=100, client="cpp-p0"),                  # the C++ client back at 2200
               enq("c0-4", 2300, client="cpp-p0"),
               deq("k0-0", 500), deq("k0-2", 501), deq("c0-0", 502), deq("c0-4", 2400), deq("c0-3", 2401)]
    table = by_client(history, [G])
    assert set(table) == {"python", "cpp"}
    py, cpp = table["python"], table["cpp"]
    assert (py["sends"], py["success"], py["unknown"], py["lost"], py["order_violations"]) == (3, 2, 1, 0, 0)
    assert (cpp["sends"], cpp["success"], cpp["failure"], cpp["unknown"]) == (5, 3, 1, 1)
    assert (cpp["lost"], cpp["order_violations"]) == (0, 1)  # c0-4 before c0-3: its key's order broken
    assert (py["rto_p50"], cpp["rto_p50"]) == (155, 2045)   # each from its own first failure, invoked 145 and 155
    assert check_all(history, [G]).clients == table
