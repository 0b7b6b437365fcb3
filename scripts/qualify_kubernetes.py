#!/usr/bin/env python3
"""The seed's Kubernetes qualification flow (logic: rl_pipeline_bench.k8s). See README, "Clusters"."""

import sys

from rl_pipeline_bench.k8s.cli import main

if __name__ == "__main__":
    sys.exit(main())
