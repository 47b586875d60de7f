"""Benchmarks run outside the test suite (see docs/benchmarks.md)."""
