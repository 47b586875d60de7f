"""Helpers for tests (and benchmarks) that run the real thing: `processes` starts
`skiff` commands and reads their output, `cluster` a NameServer with brokers on free
ports, `wire` a protocol-level client of a broker, `waits` deadline-bound waits."""
