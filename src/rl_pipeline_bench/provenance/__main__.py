"""`python -m rl_pipeline_bench.provenance`: recipe and source identities, standard library only."""

from .recipes import _main

raise SystemExit(_main())
