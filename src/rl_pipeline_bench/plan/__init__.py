"""The offered work: workload plans, the identity of one model call, and plan rows rendered into chat messages."""
