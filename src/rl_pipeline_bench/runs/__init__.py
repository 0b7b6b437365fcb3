"""Executing one benchmark: the runner, its container form, readiness checks of the machine, and the workflow launcher behind `bench run --suite`."""
