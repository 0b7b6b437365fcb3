"""Every reason and warning code a summary can carry, in one place.

A summary reason is "code: human detail" and makes the run invalid; a warning has the
same form and flags a figure to distrust. docs/validation.md lists each code (a test
keeps it complete); a backend adds its own codes on its descriptor (`reason_codes()`).
"""

from __future__ import annotations

#: An update's trainer union must cover at least this share of its wall time.
TRAINER_SHARE_FLOOR = 1e-4

#: Stable warning codes; a warning flags a measurement to distrust but does not invalidate the run.
WARNING_CODES: dict[str, str] = {
    "generation_stopped_early": "the rollout had no call in flight at the end of the headline window and had "
                                "been idle for longer than 5 % of the window and than any pause before the "
                                "window: the window measured a drain, not steady state",
    "rollout_activity_unknown": "no headline window or no timed calls, so the rollout's activity in it is unknown",
}

#: Stable reason codes; a summary reason is "code: human detail".
REASON_CODES: dict[str, str] = {
    "evidence_dir_missing": "the evidence directory does not exist",
    "manifest_missing": "manifest.json is absent",
    "manifest_corrupt": "manifest.json is not a readable JSON object",
    "manifest_schema": "manifest.json declares an evidence schema version this code has no reader for",
    "status_not_completed": "the run did not finish with status 'completed'",
    "contract_missing": "the manifest records no usable contract settings (defaults used)",
    "contract_invalid": "the manifest's contract settings are not valid (defaults used)",
    "contract_incomplete": "the manifest's contract lacks trainer_ranks or offered_trajectories_per_update, "
                           "or its offered_plan shape is malformed",
    "updates_missing": "updates.parquet is absent",
    "updates_corrupt": "updates.parquet is unreadable or has the wrong columns",
    "calls_missing": "calls.parquet is absent",
    "calls_corrupt": "calls.parquet is unreadable or has the wrong columns",
    "intervals_missing": "trainer_intervals.parquet is absent",
    "intervals_corrupt": "trainer_intervals.parquet is unreadable or has the wrong columns",
    "update_count": "the number of updates differs from the contract's total",
    "updates_not_contiguous": "updates are not exactly 1..N, each once",
    "completion_time_invalid": "a completion time is negative or not finite",
    "completion_not_increasing": "completion times do not strictly increase with the update number",
    "negative_count": "an update reports negative accepted trajectories or assistant tokens",
    "calls_empty": "no model calls were recorded",
    "completion_length_mismatch": "a call's completion length differs from its forced length",
    "accepted_above_offered": "an update accepted more trajectories than were offered",
    "accepted_beyond_trained": "a call of an extra offered update (after the last trained one) is marked accepted",
    "interval_invalid": "a trainer interval ends before it starts or has a non-finite bound",
    "trainer_ranks_missing": "an expected trainer rank has no interval for a headline update",
    "trainer_ranks_unexpected": "a trainer interval comes from a rank the contract does not expect",
    "window_nonpositive": "a measurement window or trainer union is zero or negative",
    # the evidence files reconciled with each other and with the manifest's identity (reconcile.py)
    "manifest_identity": "a manifest identity field (run_id, backend, workload, suite, trial) has the wrong type "
                         "or value, or the run id is not the evidence directory's name",
    "run_record_mismatch": "run.json names another run, backend, workload, suite, trial or spec than the manifest",
    "calls_not_in_plan": "a call is recorded twice, lacks its update, or has an identity the offered plan does not hold",
    "offered_call_missing": "an offered call of a recorded update has no row in calls.parquet",
    "trajectory_acceptance_mixed": "a trajectory has both accepted and not accepted calls",
    "accepted_trajectories_mismatch": "an update's accepted_trajectories disagree with its accepted calls",
    "assistant_tokens_mismatch": "an update's assistant_tokens disagree with its accepted calls' completion tokens",
    "call_time_invalid": "a call starts before the run, finishes before it starts, or has a non-finite time",
    "interval_empty": "a trainer interval has zero length",
    "interval_outside_run": "a trainer interval starts before the run, ends after its last update, "
                            "or is tagged with an update that was not recorded",
    "trainer_union_implausible": f"an update's trainer union is below {TRAINER_SHARE_FLOOR:g} of its wall time",
}


def reason_codes() -> dict[str, str]:
    """The contract's reason codes plus those of every registered backend's own evidence checks."""
    from ..backends import registered

    codes = dict(REASON_CODES)
    for backend in registered():
        codes.update(backend.reason_codes)
    return codes
