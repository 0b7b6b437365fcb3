"""Task-quality evaluation under the RLinf protocol: greedy policies, N held-out
scenarios per task, R seeded runs, success rate as the metric.

One module per job: `benchmarks` (facts and their sources), `spec` (resolved,
hashed protocol settings), `protocol` (episode plan and seeds), `episodes`
(evidence I/O), `envs/` and `policies/` (what runs), `runner` (one evaluation
run), `aggregate` (success rates over runs), `throughput` (simulator build, steps/s,
rendering share and the projected protocol wall time), `tables` (report tables),
`schedule` (checkpoints found under a directory).
"""
