"""Recipe, source and image identities. Standard library only below `images`' Docker calls:
`python -m rl_pipeline_bench.provenance` (its `__main__`) runs inside images and setup scripts."""
