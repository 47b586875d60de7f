"""What the scenario scripts of the official RocketMQ 5.x Python client share: the spec the test
passes (``argv[1]``, JSON with at least ``endpoint`` and ``scenarios``), the client configuration
for its endpoint, and the main that runs the scenarios named and prints one JSON object of what
each saw (and how long it took) for the test to assert on. The scripts run under that client's
own interpreter (SKIFF_RMQ5_PYTHON) and import this module from their directory.
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials

SPEC = json.loads(sys.argv[1])
CFG = ClientConfiguration(SPEC["endpoint"], Credentials())


def main(scenarios):
    """Run the scenarios ``SPEC`` names (functions, by name) and print their results."""
    by_name = {f.__name__: f for f in scenarios}
    results = {}
    for name in SPEC["scenarios"]:
        started = time.time()
        results[name] = by_name[name]()
        results[name + "_s"] = round(time.time() - started, 2)
    print(json.dumps(results))
