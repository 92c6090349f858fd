"""Benchmark tooling: plots of the collective benchmark's JSON (`plot`)."""
