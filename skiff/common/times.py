"""Times people type: ms since the epoch, ``now``, or ISO-8601, read one way by the CLI and the dashboard."""

from __future__ import annotations

import time
from datetime import datetime


def parse_time_ms(text: str) -> int:
    """``1714560000000``, ``-1``, ``now`` or an ISO-8601 time (local time unless it has an offset);
    ValueError says what is accepted."""
    text = text.strip()
    if text.lower() == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"{text!r} is not ms since the epoch, 'now' or an ISO time") from None
