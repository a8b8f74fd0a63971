"""Benchmarks: what archmax adds on top of Temporal's own round trips (see bench/README.md)."""
