"""The measurement contract, one module per job.

`settings` (ContractSettings: warmup, measured and headline updates), `reasons` (every
reason and warning code), `intervals` (interval arithmetic), `reconcile` (the evidence
files checked against each other) and `summary` (evidence -> summary.json).
"""
