"""RL Systems Bench: reproducible benchmarks for asynchronous RL training pipelines."""

__version__ = "0.1.0"
