"""Reproducible measurements of runoff (`make bench`); see benchmarks/README.md."""
