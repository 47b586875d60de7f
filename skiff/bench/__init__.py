"""Benchmarks. Each module here has a ``main(argv)`` and is a subcommand of
``skiff bench`` (``skiff bench store --quick``); figures go to docs/performance.md."""
