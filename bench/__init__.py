"""Benchmarks that print figures (never timed assertions; not part of the test suite).

    python -m bench.core --help
"""
