"""Benchmarks: plain Python scripts, each runnable as `python -m bench.<name>`; `bench.run_all` runs them all."""
