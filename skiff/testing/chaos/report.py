"""The checkers' results as text (OUT/results.txt and the command's output): the verdict,
per consumer group the queue counts, order, per fault type the RTO, per sending client its
outcomes and RTO, and the latencies."""

from __future__ import annotations

from typing import Any


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.2f} s"


def format_text(results: dict[str, Any]) -> str:
    s = results["settings"]
    lines = [f"verdict: {'OK' if results['ok'] else 'FAILED'} (lost {results['lost']}, "
             f"order violations {results['order_violations']})",
             f"mode {s['mode']}, duration {s['duration_s']:.0f} s, a fault every {s['fault_interval_s']:g} s held "
             f"{s['fault_hold_s']:g} s, {s['keys']} keys at {s['rate']:g} msg/s, lease {s['lease_ms']} ms, "
             f"seed {s['seed']}, clients {', '.join(s.get('clients', ['python']))}"]
    for q in results["queue"]:
        lines.append(f"group {q['group']}: enqueued {q['enqueued']} (SUCCESS {q['success']}, FAILURE {q['failure']}, "
                     f"UNKNOWN {q['unknown']}), dequeued {q['dequeued']} distinct, lost {q['lost']}, duplicated "
                     f"{q['duplicated']}, recovered {q['recovered']}, unexpected {q['unexpected']}")
        if q["lost_values"]:
            lines.append(f"  lost: {' '.join(q['lost_values'])}")
    for o in results["order"]:
        lines.append(f"order ({o['group']}): {o['keys']} keys, {len(o['violations'])} violations")
        lines += [f"  key {v['key']}: {v['first_missing']} not in order after {v['acked_before']} acknowledged"
                  for v in o["violations"]]
    lines.append("fault              runs  messages  lost  duplicated  order  unavailable  not recovered"
                 "  RTO p50   RTO p99   RTO max")
    for name, r in results["by_fault"].items():
        lines.append(f"{name:<18} {r.get('faults', 0):>4}  {r['messages']:>8}  {r['lost']:>4}  {r['duplicated']:>10}  "
                     f"{r['order_violations']:>5}  {r.get('unavailable', 0):>11}  {r.get('not_recovered', 0):>13}  "
                     f"{_ms(r.get('p50')):>8}  {_ms(r.get('p99')):>8}  {_ms(r.get('max')):>8}")
    for kind, c in results.get("by_client", {}).items():  # results of a run before it had none
        lines.append(f"client {kind}: sends {c['sends']} (SUCCESS {c['success']}, FAILURE {c['failure']}, UNKNOWN "
                     f"{c['unknown']}), lost {c['lost']}, order violations {c['order_violations']}, send p50 "
                     f"{_ms(c['enqueue_ms']['p50'])} p99 {_ms(c['enqueue_ms']['p99'])}, its RTO p50 "
                     f"{_ms(c['rto_p50'])} p99 {_ms(c['rto_p99'])}, not recovered after {c['not_recovered']} faults")
    for name, lat in results["latency"].items():
        lines.append(f"latency {name}: p50 {_ms(lat['p50'])}, p99 {_ms(lat['p99'])}, max {_ms(lat['max'])} "
                     f"over {lat['count']}")
    lines += [f"not run: {name}: {why}" for name, why in results["faults_not_run"].items()]
    lines += [f"note: {n}" for n in results["notes"]]
    return "\n".join(lines) + "\n"
