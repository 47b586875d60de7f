"""RocketMQ's client versions (``MQVersion.Version``): the remoting protocol carries a version as the
enum's ordinal (a heartbeat's, a connection list's ``version``), and the admin tools show its name
(``MQVersion.getVersionDesc``: ``V5_1_2``). A 5.x (gRPC) client says its version as text in its
Settings' user agent (``5.1.2``), which Skiff turns into the ordinal so the connection lists carry
the client's own version.

The enum, in RocketMQ's order: V3_0_0_SNAPSHOT, V3_0_0_ALPHA1, V3_0_0_BETA1..BETA5, BETA6..BETA9
each after its _SNAPSHOT, V3_0_0_FINAL; then a _SNAPSHOT and a release of V3_0_1..V3_0_15,
V3_1_0..V3_1_9, V3_2_0..V3_2_9, V3_3_1..V3_9_9 (no x_0 from 3.3 to 3.9), V4_0_0..V5_9_9; then
HIGHER_VERSION. So V4_9_4 is 401 and V5_0_0 is 413.
"""

from __future__ import annotations

import re


def _versions() -> tuple[str, ...]:
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", *(f"V3_0_0_BETA{i}" for i in range(1, 6))]
    for i in range(6, 10):
        names += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    names.append("V3_0_0_FINAL")
    releases = [(3, 0, p) for p in range(1, 16)] + [(3, m, p) for m in (1, 2) for p in range(10)]
    releases += [(3, m, p) for m in range(3, 10) for p in range(1, 10)]
    releases += [(major, m, p) for major in (4, 5) for m in range(10) for p in range(10)]
    for major, minor, patch in releases:
        names += [f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"]
    names.append("HIGHER_VERSION")
    return tuple(names)


VERSIONS = _versions()
_ORDINALS = {name: i for i, name in enumerate(VERSIONS)}
V5_0_0 = _ORDINALS["V5_0_0"]
"""What a 5.x client that says no version RocketMQ knows is listed with."""
_DOTTED = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:[-_.](snapshot))?$", re.IGNORECASE)


def version_ordinal(text: str) -> int | None:
    """The ordinal of a version as clients write it (``5.1.2``, ``5.0.8-SNAPSHOT``, ``V5_1_2``);
    None when RocketMQ's enum has no such version."""
    found = _DOTTED.match(text.strip())
    name = text.strip().upper() if found is None else \
        f"V{found[1]}_{found[2]}_{found[3]}" + ("_SNAPSHOT" if found[4] else "")
    return _ORDINALS.get(name)


def version_name(ordinal: int) -> str:
    """The name the admin tools show for an ordinal (past the last: HIGHER_VERSION, as getVersionDesc)."""
    return VERSIONS[min(max(ordinal, 0), len(VERSIONS) - 1)]
