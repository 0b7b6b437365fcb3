"""Contract arithmetic and validation against hand-computed fixtures (tests/evidence_fixtures.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from rl_pipeline_bench import jobs
import pytest
from evidence_fixtures import build_evidence

from rl_pipeline_bench import cli
from rl_pipeline_bench.contract.intervals import interval_union_length
from rl_pipeline_bench.contract.reasons import WARNING_CODES
from rl_pipeline_bench.contract.reasons import reason_codes as all_reason_codes
from rl_pipeline_bench.contract.settings import ContractSettings
from rl_pipeline_bench.contract.summary import CONTRACT_RULES, summarize, summarize_to_file

#: The contract's codes plus the registered backends' own (ART's autotuner check).
REASON_CODES = all_reason_codes()
from rl_pipeline_bench.records.atomicfile import atomic_write_table
from rl_pipeline_bench.evidence.store import CALLS, INTERVALS, MANIFEST, UPDATES

ROOT = Path(__file__).resolve().parents[1]


def codes(summary: dict) -> set[str]:
    return {r.split(":", 1)[0] for r in summary["reasons"]}


# ---------------------------------------------------------------------------
# Settings and interval union


def test_contract_settings_defaults_and_limits():
    s = ContractSettings()
    assert (s.warmup_updates, s.measured_updates, s.headline_updates, s.total_updates) == (5, 15, 5, 20)
    assert (s.measured_first, s.headline_first) == (6, 16)
    with pytest.raises(ValueError, match="headline_updates"):
        ContractSettings(5, 3, 4)
    with pytest.raises(ValueError, match="warmup_updates"):
        ContractSettings(0, 15, 5)
    with pytest.raises(ValueError, match="lacks measured_updates"):
        ContractSettings.from_mapping({"warmup_updates": 5, "headline_updates": 5})


@pytest.mark.parametrize(
    "intervals, expected",
    [
        ([(0, 4), (2, 6)], 6.0),  # overlapping ranks: union, not 4 + 4 = 8
        ([(0, 1), (2, 3)], 2.0),  # disjoint
        ([(0, 10), (2, 3)], 10.0),  # nested
        ([(0, 1), (1, 2)], 2.0),  # touching
        ([(5, 6), (0, 4), (3, 5.5)], 6.0),  # unsorted chain: [0, 6]
        ([], 0.0),
    ],
)
def test_interval_union_length(intervals, expected):
    assert interval_union_length(intervals) == pytest.approx(expected)


# ---------------------------------------------------------------------------
# Hand-computed windows and rates


def test_default_contract_hand_computed(tmp_path):
    # completed_at[u] = u^2; accepted[u] = u % 4 + 1; assistant_tokens[u] = 100 u.
    # Headline: updates 16..20, window completed_at[15]=225 -> completed_at[20]=400 = 175 s.
    #   trajectories = 1+2+3+4+1 = 11; tokens = 100*(16+17+18+19+20) = 9000.
    # Measured: updates 6..20, window completed_at[5]=25 -> 400 = 375 s.
    #   trajectories = (3+4+1+2)*3 + (3+4+1) = 38; tokens = 100*(210-15) = 19500.
    # Trainer: per update rank 0 [c-2.5, c-1.0], rank 1 [c-2.0, c-0.5] -> union 2.0 s
    #   (sum of durations would be 3.0 s); 5 updates -> 10 s; 9000 / 10 = 900 tokens/s.
    d = build_evidence(tmp_path, completed_at=[float(u * u) for u in range(1, 21)])
    s = summarize(d)
    assert s["valid"] is True, s["reasons"]
    assert s["reasons"] == []
    h = s["e2e"]["headline"]
    assert (h["first_update"], h["last_update"]) == (16, 20)
    assert (h["window_start_s"], h["window_end_s"], h["window_s"]) == (225.0, 400.0, 175.0)
    assert (h["trajectories"], h["assistant_tokens"]) == (11, 9000)
    assert h["trajectories_per_s"] == pytest.approx(11 / 175)
    assert h["assistant_tokens_per_s"] == pytest.approx(9000 / 175)
    m = s["e2e"]["measured"]
    assert (m["first_update"], m["last_update"]) == (6, 20)
    assert (m["window_start_s"], m["window_end_s"], m["window_s"]) == (25.0, 400.0, 375.0)
    assert (m["trajectories"], m["assistant_tokens"]) == (38, 19500)
    assert m["trajectories_per_s"] == pytest.approx(38 / 375)
    assert m["assistant_tokens_per_s"] == pytest.approx(52.0)
    t = s["trainer"]["headline"]
    assert (t["first_update"], t["last_update"]) == (16, 20)
    assert t["union_s"] == pytest.approx(10.0)
    assert t["assistant_tokens"] == 9000
    assert t["assistant_tokens_per_s"] == pytest.approx(900.0)
    # accepted over 1..20: five cycles of (2+3+4+1) = 50; offered 4 per update * 20.
    assert s["counts"] == {"updates": 20, "calls": 80, "accepted_trajectories": 50, "offered_trajectories": 80}
    assert s["contract"] == {"warmup_updates": 5, "measured_updates": 15, "headline_updates": 5, "total_updates": 20}
    assert s["schema"] == "rl-bench/summary/v1"
    assert (s["suite"], s["backend"], s["workload"], s["trial"], s["status"]) == ("fixture", "reference", "multi_turn", 1, "completed")
    assert s["provenance"]["recipe_sha256"] == "a" * 64
    assert s["provenance"]["started_at"] and s["provenance"]["finished_at"]
    assert s["evidence_dir"] == str(d)


def test_non_default_contract_hand_computed(tmp_path):
    # warmup 2 + measured 4, headline 2 -> N = 6.
    # completed_at = [1, 2, 4, 7, 11, 16]; tokens = 10 u; accepted = [1, 2, 3, 4, 1, 2].
    # Headline: updates 5..6, window completed_at[4]=7 -> 16 = 9 s; tokens 110; trajectories 3.
    # Measured: updates 3..6, window completed_at[2]=2 -> 16 = 14 s; tokens 180; trajectories 10.
    # Trainer (updates 5, 6): rank0 [8,10] + rank1 [9,12] overlap -> [8,12] = 4;
    #   rank0 [12.5,13] and rank1 [14,15] disjoint -> 0.5 + 1; nested rank1 [14.2,14.8] adds 0.
    #   Union 5.5 s (sum of durations would be 7.1); the update-4 interval [5,7] is not headline.
    #   110 / 5.5 = 20 tokens/s.
    intervals = [
        (0, 4, 5.0, 7.0), (1, 4, 5.0, 7.0),
        (0, 5, 8.0, 10.0), (1, 5, 9.0, 12.0),
        (0, 6, 12.5, 13.0), (1, 6, 14.0, 15.0), (1, 6, 14.2, 14.8),
    ]
    d = build_evidence(
        tmp_path,
        contract={"warmup_updates": 2, "measured_updates": 4, "headline_updates": 2},
        completed_at=[1.0, 2.0, 4.0, 7.0, 11.0, 16.0],
        accepted=[1, 2, 3, 4, 1, 2],
        assistant_tokens=[10, 20, 30, 40, 50, 60],
        intervals=intervals,
    )
    s = summarize(d)
    assert s["valid"] is True, s["reasons"]
    h, m, t = s["e2e"]["headline"], s["e2e"]["measured"], s["trainer"]["headline"]
    assert (h["first_update"], h["window_s"], h["assistant_tokens"], h["trajectories"]) == (5, 9.0, 110, 3)
    assert h["assistant_tokens_per_s"] == pytest.approx(110 / 9)
    assert h["trajectories_per_s"] == pytest.approx(3 / 9)
    assert (m["first_update"], m["window_s"], m["assistant_tokens"], m["trajectories"]) == (3, 14.0, 180, 10)
    assert m["assistant_tokens_per_s"] == pytest.approx(180 / 14)
    assert m["trajectories_per_s"] == pytest.approx(10 / 14)
    assert t["union_s"] == pytest.approx(5.5)
    assert t["assistant_tokens_per_s"] == pytest.approx(20.0)
    assert s["contract"]["total_updates"] == 6


# ---------------------------------------------------------------------------
# Every validation reason


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _rewrite_manifest(d: Path, **changes) -> None:
    m = json.loads((d / MANIFEST).read_text())
    m.update(changes)
    (d / MANIFEST).write_text(json.dumps(m))


def _case_evidence_dir_missing(tmp):
    return tmp / "no-such-run"


def _case_manifest_missing(tmp):
    d = build_evidence(tmp)
    (d / MANIFEST).unlink()
    return d


def _case_manifest_corrupt(tmp):
    d = build_evidence(tmp)
    _truncate(d / MANIFEST)
    return d


def _case_manifest_schema(tmp):
    d = build_evidence(tmp)
    _rewrite_manifest(d, schema="rl-bench/evidence/v0")
    return d


def _case_status_not_completed(tmp):
    return build_evidence(tmp, status="failed", error="RuntimeError: trainer crashed")


def _case_contract_missing(tmp):
    return build_evidence(tmp, manifest_contract=None)


def _case_contract_invalid(tmp):
    return build_evidence(tmp, manifest_contract={"warmup_updates": 5, "measured_updates": 3, "headline_updates": 4,
                                                  "trainer_ranks": [0, 1], "offered_trajectories_per_update": 4})


def _case_contract_incomplete(tmp):
    return build_evidence(tmp, manifest_contract={"warmup_updates": 5, "measured_updates": 15, "headline_updates": 5})


def _case_updates_missing(tmp):
    d = build_evidence(tmp)
    (d / UPDATES).unlink()
    return d


def _case_updates_corrupt(tmp):
    d = build_evidence(tmp)
    _truncate(d / UPDATES)
    return d


def _case_calls_missing(tmp):
    d = build_evidence(tmp)
    (d / CALLS).unlink()
    return d


def _case_calls_corrupt(tmp):
    d = build_evidence(tmp)
    (d / CALLS).write_bytes(b"PAR1 this is not a parquet file")
    return d


def _case_intervals_missing(tmp):
    d = build_evidence(tmp)
    (d / INTERVALS).unlink()
    return d


def _case_intervals_corrupt(tmp):
    d = build_evidence(tmp)
    atomic_write_table(d / INTERVALS, pa.table({"rank": [0], "when": [1.0]}))  # wrong columns
    return d


def _case_update_count(tmp):
    return build_evidence(tmp, updates=range(1, 20))


def _case_updates_not_contiguous(tmp):
    return build_evidence(tmp, updates=[*range(1, 11), *range(12, 22)])  # 20 rows, 11 missing, 21 extra


def _case_completion_time_invalid(tmp):
    return build_evidence(tmp, completed_at=[-1.0, *[3.0 * u for u in range(2, 21)]])


def _case_completion_not_increasing(tmp):
    t = [3.0 * u for u in range(1, 21)]
    t[9] = t[8]  # update 10 completes at the same time as update 9
    return build_evidence(tmp, completed_at=t)


def _case_negative_count(tmp):
    tokens = [100 * u for u in range(1, 21)]
    tokens[2] = -5
    return build_evidence(tmp, assistant_tokens=tokens)


def _case_calls_empty(tmp):
    return build_evidence(tmp, calls=[])


def _case_completion_length_mismatch(tmp):
    from evidence_fixtures import default_calls

    calls = default_calls(range(1, 21), [3.0 * u for u in range(1, 21)], [u % 4 + 1 for u in range(1, 21)], 4)
    calls[6]["completion_tokens"] -= 1  # update 2, trajectory 2
    calls[41]["completion_tokens"] += 3
    return build_evidence(tmp, calls=calls)


def _case_accepted_above_offered(tmp):
    acc = [u % 4 + 1 for u in range(1, 21)]
    acc[3] = 5  # update 4 accepts 5 of 4 offered
    return build_evidence(tmp, accepted=acc)


def _case_accepted_beyond_trained(tmp):
    from evidence_fixtures import default_calls

    completed = [3.0 * u for u in range(1, 21)]
    calls = default_calls(range(1, 21), completed, [u % 4 + 1 for u in range(1, 21)], 4)
    calls += default_calls([21], [63.0], [1], 4)  # extra offered update 21: one call wrongly accepted
    return build_evidence(tmp, calls=calls)


def test_calls_of_extra_offered_updates_not_accepted_are_fine(tmp_path):
    from evidence_fixtures import default_calls

    completed = [3.0 * u for u in range(1, 21)]
    calls = default_calls(range(1, 21), completed, [u % 4 + 1 for u in range(1, 21)], 4)
    calls += default_calls([21, 22], [63.0, 66.0], [0, 0], 4)
    s = summarize(build_evidence(tmp_path, calls=calls))
    assert s["valid"], s["reasons"]
    assert s["counts"]["accepted_trajectories"] == sum(u % 4 + 1 for u in range(1, 21))


def _case_interval_invalid(tmp):
    from evidence_fixtures import default_intervals

    iv = default_intervals(range(1, 21), [3.0 * u for u in range(1, 21)], (0, 1))
    iv.append((0, 17, 50.0, 49.0))  # ends before it starts
    return build_evidence(tmp, intervals=iv)


def _case_trainer_ranks_missing(tmp):
    from evidence_fixtures import default_intervals

    iv = [x for x in default_intervals(range(1, 21), [3.0 * u for u in range(1, 21)], (0, 1)) if x[:2] != (1, 18)]
    return build_evidence(tmp, intervals=iv)


def _case_trainer_ranks_unexpected(tmp):
    from evidence_fixtures import default_intervals

    iv = default_intervals(range(1, 21), [3.0 * u for u in range(1, 21)], (0, 1)) + [(5, 19, 55.0, 56.0)]
    return build_evidence(tmp, intervals=iv)


def _case_window_nonpositive(tmp):
    # Zero-length trainer intervals: times increase, every rank is present, the union is 0 s.
    iv = [(r, u, 3.0 * u - 1, 3.0 * u - 1) for u in range(1, 21) for r in (0, 1)]
    return build_evidence(tmp, intervals=iv)


def _case_autotuner_unhealthy(tmp):
    # An ART run whose train log lacked the autotuner's pipeline_settings rows.
    return build_evidence(tmp, manifest={"backend": "art", "art_autotuner": {
        "healthy": False, "problems": ["train row 3 lacks pipeline_settings/min_batch_size"]}})


def test_healthy_art_autotuner_is_not_a_reason(tmp_path):
    d = build_evidence(tmp_path, manifest={"backend": "art", "art_autotuner": {"healthy": True, "problems": []}})
    assert summarize(d)["valid"], summarize(d)["reasons"]


# --- the files reconciled with each other (rl_pipeline_bench.contract.reconcile) ---------


def _case_manifest_identity(tmp):
    return build_evidence(tmp, manifest={"trial": "one"})


def _case_run_record_mismatch(tmp):
    d = build_evidence(tmp)
    record = {"run_id": d.name, "backend": "reference", "workload": "multi_turn", "suite": "fixture", "trial": 2}
    return d, record  # run.json says trial 2 of a trial-1 evidence directory


def _default_calls():
    from evidence_fixtures import default_calls

    return default_calls(range(1, 21), [3.0 * u for u in range(1, 21)], [u % 4 + 1 for u in range(1, 21)], 4)


def _case_calls_not_in_plan(tmp):
    calls = _default_calls()
    calls.append(dict(calls[3]))  # update 1 trajectory 3 recorded twice
    return build_evidence(tmp, calls=calls)


def _case_offered_call_missing(tmp):
    # One call recorded for the 20 updates: its update accepted 2 trajectories, the others none.
    calls = [c for c in _default_calls() if (c["update"], c["trajectory"]) == (1, 0)]
    return build_evidence(tmp, calls=calls, accepted=[2] + [0] * 19, assistant_tokens=[100] + [0] * 19)


def _case_trajectory_acceptance_mixed(tmp):
    calls = _default_calls()
    calls += [dict(c, call=1, forced_completion_tokens=5, completion_tokens=5, accepted=False) for c in calls]
    contract = {"warmup_updates": 5, "measured_updates": 15, "headline_updates": 5, "trainer_ranks": [0, 1],
                "offered_trajectories_per_update": 4,
                "offered_plan": {"groups_per_update": 1, "group_size": 4, "calls_per_trajectory": 2}}
    return build_evidence(tmp, calls=calls, manifest_contract=contract)


def _case_accepted_trajectories_mismatch(tmp):
    # Every call not accepted while the updates count accepted trajectories.
    return build_evidence(tmp, calls=[dict(c, accepted=False) for c in _default_calls()])


def _case_assistant_tokens_mismatch(tmp):
    return build_evidence(tmp, assistant_tokens=[100_000 * u for u in range(1, 21)], calls=_default_calls())


def _case_call_time_invalid(tmp):
    calls = _default_calls()
    calls[9].update(started_at=20.0, finished_at=19.5)  # finishes before it starts
    calls[10].update(started_at=-4.0)
    return build_evidence(tmp, calls=calls)


def _case_interval_empty(tmp):
    from evidence_fixtures import default_intervals

    iv = default_intervals(range(1, 21), [3.0 * u for u in range(1, 21)], (0, 1)) + [(1, 7, 19.0, 19.0)]
    return build_evidence(tmp, intervals=iv)


def _case_interval_outside_run(tmp):
    from evidence_fixtures import default_intervals

    iv = default_intervals(range(1, 21), [3.0 * u for u in range(1, 21)], (0, 1)) + [(0, 20, 59.0, 75.0)]
    return build_evidence(tmp, intervals=iv)


def _case_trainer_union_implausible(tmp):
    # Trainer intervals of 1e-9 s in updates 3 s apart: the trainer rate would be absurd.
    iv = [(r, u, 3.0 * u - 1, 3.0 * u - 1 + 1e-9) for u in range(1, 21) for r in (0, 1)]
    return build_evidence(tmp, intervals=iv)


def _case_plan_mismatch(tmp):
    import copy as _copy

    from rl_pipeline_bench.settings.config import load_config
    from rl_pipeline_bench.settings.spec import build_spec, write_spec

    doc = build_spec(_copy.deepcopy(load_config()), "smoke")
    spec = write_spec(doc, tmp / "results" / "specs" / f"{doc['id']}.json")
    named = {"spec": {"id": spec.id, "hash": spec.hash}, "suite": "smoke", "workload": "multi_turn", "trial": 1}
    # not a smoke backend; summarized under the spec (positional: run_record, spec)
    return build_evidence(tmp / "results" / "evidence", manifest={**named, "backend": "skyrl"}), None, spec


def _summarize_case(tmp, code):
    made = CASES[code](tmp)
    return summarize(*made) if isinstance(made, tuple) else summarize(made)


CASES = {name[len("_case_"):]: fn for name, fn in list(globals().items()) if name.startswith("_case_")}


def test_every_reason_code_has_a_fixture():
    assert set(CASES) == set(REASON_CODES)


@pytest.mark.parametrize("code", sorted(CASES))
def test_validation_reason(tmp_path, code):
    s = _summarize_case(tmp_path, code)
    assert s["valid"] is False
    assert code in codes(s), s["reasons"]
    for r in s["reasons"]:
        c, _, detail = r.partition(": ")
        assert c in REASON_CODES and detail, r
    json.dumps(s, allow_nan=False)  # always serialisable


def test_reason_details_name_the_offender(tmp_path):
    s = summarize(_case_completion_length_mismatch(tmp_path / "a"))
    (r,) = [r for r in s["reasons"] if r.startswith("completion_length_mismatch")]
    assert "2 of 80 calls" in r and "update 2 group 0 trajectory 2 call 0" in r
    assert "completion_tokens=65 forced_completion_tokens=66" in r
    s = summarize(_case_status_not_completed(tmp_path / "b"))
    assert any("'failed'" in r and "trainer crashed" in r for r in s["reasons"])
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: bad batch\n'
    s = summarize(build_evidence(tmp_path / "tb", status="failed", error=tb))
    assert "status_not_completed: run status is 'failed' (error: ValueError: bad batch)" in s["reasons"]
    s = summarize(_case_trainer_ranks_missing(tmp_path / "c"))
    assert "trainer_ranks_missing: rank 1 has no trainer interval for update(s) [18]" in s["reasons"][0]
    s = summarize(_case_updates_not_contiguous(tmp_path / "d"))
    assert codes(s) == {"updates_not_contiguous"}  # 20 rows: the count itself is right
    assert "missing [11]" in s["reasons"][0] and "outside 1..20: [21]" in s["reasons"][0]


def test_invalid_run_keeps_computable_rates(tmp_path):
    s = summarize(_case_trainer_ranks_missing(tmp_path))
    assert s["valid"] is False
    # Headline window 45 -> 60 s = 15 s with 9000 tokens, as in a valid run.
    assert s["e2e"]["headline"]["assistant_tokens_per_s"] == pytest.approx(600.0)
    # Update 18 has only rank 0 [51.5, 53.0] = 1.5 s; four others 2.0 s each -> 9.5 s.
    assert s["trainer"]["headline"]["union_s"] == pytest.approx(9.5)


def test_died_run_reports_running_status_with_partial_rates(tmp_path):
    # Process died after update 17: 17 updates flushed, manifest still "running".
    d = build_evidence(tmp_path, updates=range(1, 18), status="running")
    s = summarize(d)
    assert s["status"] == "running"
    assert {"status_not_completed", "update_count", "updates_not_contiguous"} <= codes(s)
    assert s["e2e"]["headline"]["window_end_s"] is None
    assert s["e2e"]["headline"]["assistant_tokens_per_s"] is None
    assert s["e2e"]["headline"]["trajectories"] == 1 + 2  # updates 16, 17 were recorded
    assert s["counts"]["updates"] == 17


@pytest.mark.parametrize("damage", ["truncated_manifest", "garbage_updates", "empty_dir", "manifest_is_list", "nan_manifest"])
def test_corrupt_evidence_never_raises(tmp_path, damage):
    d = build_evidence(tmp_path)
    if damage == "truncated_manifest":
        (d / MANIFEST).write_text('{"schema": "rl-bench/evidence/v1", "run_id": "x", "sta')
    elif damage == "garbage_updates":
        (d / UPDATES).write_bytes(os.urandom(64))
    elif damage == "empty_dir":
        d = tmp_path / "empty"
        d.mkdir()
    elif damage == "manifest_is_list":
        (d / MANIFEST).write_text("[1, 2]")
    elif damage == "nan_manifest":
        (d / MANIFEST).write_text('{"schema": "rl-bench/evidence/v1", "host": NaN}')
    s = summarize_to_file(d, tmp_path / "out" / "summary.json")
    assert s["valid"] is False and s["reasons"]
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == s


# ---------------------------------------------------------------------------
# bench summarize and the Snakemake script


def _bench_argv() -> list[str]:
    uv = shutil.which("uv")
    return [uv, "run", "--no-sync", "bench"] if uv else [sys.executable, "-m", "rl_pipeline_bench.cli"]


def test_bench_summarize_subprocess(tmp_path):
    d = build_evidence(tmp_path)
    out = subprocess.run([*_bench_argv(), "summarize", str(d)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["valid"] is True
    assert s["reasons"] == []
    for section, key in [("headline", "trajectories_per_s"), ("headline", "assistant_tokens_per_s"),
                         ("measured", "trajectories_per_s"), ("measured", "assistant_tokens_per_s")]:
        assert isinstance(s["e2e"][section][key], float)
    assert s["e2e"]["headline"]["assistant_tokens_per_s"] == pytest.approx(600.0)  # 9000 tokens / 15 s
    assert s["trainer"]["headline"]["assistant_tokens_per_s"] == pytest.approx(900.0)  # 9000 / 10 s union


def test_bench_summarize_invalid_run_exits_zero_and_writes_output(tmp_path, capsys):
    d = _case_completion_not_increasing(tmp_path)
    out = tmp_path / "s.json"
    assert cli.main(["summarize", str(d), "--output", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["valid"] is False and "completion_not_increasing" in codes(printed)
    assert json.loads(out.read_text()) == printed


def test_bench_summarize_missing_path_exits_2(tmp_path, capsys):
    assert cli.main(["summarize", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "evidence directory not found" in err and "nope" in err


def test_workflow_script_writes_summary(tmp_path):
    d = build_evidence(tmp_path / "evidence")
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps({"evidence_dir": str(d)}))
    out, log = tmp_path / "runs" / "summary.json", tmp_path / "logs" / "summary.log"
    jobs.summarize_run(run_json, out, log)
    assert json.loads(out.read_text()) == summarize(d)
    assert "valid=True" in log.read_text()


def test_rollout_activity_in_the_headline_window(tmp_path):
    # Default fixture: per update u one 0.2 s call per trajectory, [3u-3, 3u-2.8]; headline 45 -> 60 s.
    s = summarize(build_evidence(tmp_path / "steady"))
    act = s["rollout"]["headline"]
    assert act["calls_finished"] == 20 and act["calls_started"] == 20  # updates 16-20, 4 calls each
    assert act["busy_share"] == pytest.approx(5 * 0.2 / 15)
    assert act["last_call_finished_s"] == pytest.approx(57.2) and act["in_flight_at_end"] is False
    assert act["idle_tail_s"] == pytest.approx(2.8)
    # it paused just as long every update before the window (waiting on the trainer): steady, no warning
    assert act["steady_longest_pause_s"] == pytest.approx(2.8) and act["steady_busy_share"] == pytest.approx(0.2 / 3)
    assert s["warnings"] == [] and s["contract_rules"] == CONTRACT_RULES


def test_drained_headline_window_is_warned(tmp_path):
    from evidence_fixtures import default_calls

    completed = [3.0 * u for u in range(1, 21)]
    calls = default_calls(range(1, 21), completed, [u % 4 + 1 for u in range(1, 21)], 4)
    for c in calls:  # the work of updates 16-20 was all generated before the headline window opened
        if c["update"] >= 16:
            c["started_at"], c["finished_at"] = 44.0, 44.9
    s = summarize(build_evidence(tmp_path, calls=calls))
    act = s["rollout"]["headline"]
    assert act["calls_finished"] == 0 and act["busy_share"] == 0.0 and act["idle_tail_s"] == pytest.approx(15.1)
    (w,) = s["warnings"]
    assert w.startswith("generation_stopped_early:") and "15.1 s" in w and "0 call(s) finished" in w
    assert s["valid"], s["reasons"]  # a warning does not invalidate the run


def test_generation_through_the_window_end_gives_no_warning(tmp_path):
    from evidence_fixtures import default_calls

    completed = [3.0 * u for u in range(1, 21)]
    calls = default_calls(range(1, 21), completed, [u % 4 + 1 for u in range(1, 21)], 4)
    # work of extra offered update 21 in flight when update 20 completes at 60 s (never accepted)
    calls += [dict(c, started_at=57.5, finished_at=61.0) for c in default_calls([21], [60.0], [0], 4)]
    s = summarize(build_evidence(tmp_path, calls=calls))
    act = s["rollout"]["headline"]
    assert act["in_flight_at_end"] is True and act["idle_tail_s"] == 0.0
    assert act["busy_share"] == pytest.approx((5 * 0.2 + 2.5) / 15)
    assert s["warnings"] == [] and s["valid"]


def test_every_warning_code_is_documented():
    from rl_pipeline_bench.evidence.digest import SUMMARY_CHECK_CODES

    doc = (ROOT / "docs" / "validation.md").read_text()
    for code in [*REASON_CODES, *WARNING_CODES, *SUMMARY_CHECK_CODES]:
        assert f"`{code}`" in doc, code


def test_identity_of_the_wrong_type_is_named_and_not_echoed(tmp_path):
    s = summarize(build_evidence(tmp_path, manifest={"backend": ["x"], "workload": "../etc"}))
    (r,) = [r for r in s["reasons"] if r.startswith("manifest_identity")]
    assert "backend is ['x']" in r and "workload is '../etc'" in r
    assert s["backend"] is None and s["workload"] is None and s["trial"] == 1
    assert s["run_id"] == Path(s["evidence_dir"]).name


def test_run_id_must_name_the_evidence_directory(tmp_path):
    d = build_evidence(tmp_path)
    moved = d.rename(tmp_path / "20260101T000000Z-other-run")
    s = summarize(moved)
    assert any(r.startswith("manifest_identity: run_id is") for r in s["reasons"]), s["reasons"]
    assert s["run_id"] == moved.name


def test_framework_runs_reconcile_over_the_run(tmp_path):
    """ART/SkyRL batch across plan updates: their updates' totals are bounded by the calls,
    and trained calls of extra offered updates (recorded not accepted) count as generated."""
    art = {"backend": "art", "art_autotuner": {"healthy": True, "problems": []}}
    s = summarize(build_evidence(tmp_path / "ok", manifest=art))
    assert s["valid"], s["reasons"]
    s = summarize(build_evidence(tmp_path / "x1000", manifest=art, calls=_default_calls(),
                                 assistant_tokens=[100_000 * u for u in range(1, 21)]))
    assert codes(s) == {"assistant_tokens_mismatch"}, s["reasons"]
    # Update 20 trained the 4 trajectories of extra offered update 21 instead of its own.
    from evidence_fixtures import default_calls

    calls = [c for c in _default_calls() if c["update"] != 20]
    calls += [dict(c, accepted=False) for c in default_calls([21], [63.0], [4], 4, [2000])]
    acc = [u % 4 + 1 for u in range(1, 20)] + [4]
    s = summarize(build_evidence(tmp_path / "across", manifest=art, calls=calls, accepted=acc))
    assert s["valid"], s["reasons"]
    s = summarize(build_evidence(tmp_path / "faked", manifest=art, calls=[dict(c, accepted=False) for c in calls],
                                 accepted=acc))
    assert "accepted_trajectories_mismatch" in codes(s)


def test_reference_run_accepts_untrained_extra_work_exactly(tmp_path):
    """Calls of extra offered updates recorded not accepted are consistent; accepted ones are not."""
    from evidence_fixtures import default_calls

    calls = _default_calls() + default_calls([21], [63.0], [0], 4)
    assert summarize(build_evidence(tmp_path / "a", calls=calls))["valid"]
    calls[-4]["accepted"] = True
    assert codes(summarize(build_evidence(tmp_path / "b", calls=calls))) == {"accepted_beyond_trained"}


def test_a_relabelled_run_is_not_the_run_its_label_names(tmp_path):
    """The manifest's spec fixes suite, backends, workloads, trials and each workload's plan: evidence
    relabelled as another workload (or backend) is `plan_mismatch`; a run of the plan is not."""
    import copy as _copy

    from rl_pipeline_bench.settings.config import load_config
    from rl_pipeline_bench.settings.spec import build_spec, write_spec
    from rl_pipeline_bench.plan.workloads import spec_plan

    doc = build_spec(_copy.deepcopy(load_config()), "smoke")
    spec = write_spec(doc, tmp_path / "results" / "specs" / f"{doc['id']}.json")
    root = tmp_path / "results" / "evidence"
    named = {"spec": {"id": spec.id, "hash": spec.hash}, "suite": "smoke", "backend": "reference", "trial": 1}
    _ws, plan, _ = spec_plan(spec, "multi_turn")
    calls = [dict(update=int(r.update), group=int(r.group), trajectory=int(r.trajectory), call=int(r.call),
                  prompt_tokens=50, forced_completion_tokens=int(r.forced_completion_tokens),
                  completion_tokens=int(r.forced_completion_tokens), accepted=True, started_at=0.1, finished_at=0.2,
                  policy_version=0) for r in plan.itertuples() if r.update <= 20]

    def mismatch(**manifest):
        """The run summarized under the spec and the plan of the workload its label names."""
        label = manifest["workload"]
        plan_of_label = spec_plan(spec, label)[1] if label in spec.workloads else None
        s = summarize(build_evidence(root, calls=calls, manifest={**named, **manifest}), spec=spec, plan=plan_of_label)
        return [r for r in s["reasons"] if r.startswith("plan_mismatch")]

    assert mismatch(workload="multi_turn") == []  # other reasons (the fixture's updates) are not this one
    (relabelled,) = mismatch(workload="multi_turn_salted")
    assert "forced lengths other than workload 'multi_turn_salted''s plan" in relabelled
    (other_backend,) = mismatch(workload="multi_turn", backend="art")
    assert "backend 'art' is not one of" in other_backend and spec.id in other_backend
    assert mismatch(workload="multi_turn", trial=2) == []  # trials are not part of the spec's identity
    (no_trial,) = mismatch(workload="multi_turn", trial=0)
    assert "trial 0 is not a trial number" in no_trial
    # the plan handed in must be the label's: multi_turn evidence summarized against another workload's plan
    s = summarize(build_evidence(root, calls=calls, manifest={**named, "workload": "multi_turn"}), spec=spec,
                  plan=spec_plan(spec, "tool_history")[1])
    (wrong_plan,) = [r for r in s["reasons"] if r.startswith("plan_mismatch")]
    assert "against workload ['tool_history']'s plan, but its manifest says 'multi_turn'" in wrong_plan
