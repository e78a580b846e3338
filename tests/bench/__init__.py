"""Benchmarks: not part of `make test`; `make bench` runs them and writes docs/benchmarks.md."""
