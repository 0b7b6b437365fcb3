"""Evidence v1: the run directory a benchmark writes, its table parts, its digests, the attempts index and the terminal progress line."""
