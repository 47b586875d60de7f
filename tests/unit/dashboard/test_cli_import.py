"""Every `skiff` command builds the whole parser: the dashboard's web stack must not load then."""

from __future__ import annotations

import subprocess
import sys


def test_building_the_cli_parser_does_not_import_the_web_stack():
    code = ("import sys; from skiff.cli.main import build_parser; build_parser(); "
            "print(sorted(m for m in ('aiohttp', 'jinja2', 'skiff.dashboard.web') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
