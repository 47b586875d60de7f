"""The `skiff` command: server launchers, admin commands and benchmarks."""
