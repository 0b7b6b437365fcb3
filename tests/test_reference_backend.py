"""The embedded reference backend on CPU: forced lengths, staleness, evidence v1 from a short real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rl_pipeline_bench.plan import workloads as wl
from rl_pipeline_bench.backends import reference
from rl_pipeline_bench.backends.reference import policy
from rl_pipeline_bench.backends.reference.policy import ReferenceBackendError
from rl_pipeline_bench.backends.reference.decode import SAMPLER, Batch, Decoder
from rl_pipeline_bench.backends.reference.rollout import (
    CallResult, GroupResult, PolicyBoard, TrajectoryResult, banned_token_mask,
)
from rl_pipeline_bench.backends.reference.trainer import Trainer, acceptance, group_advantages, reward
from rl_pipeline_bench.records.configfile import get_suite
from rl_pipeline_bench.contract.summary import summarize
from rl_pipeline_bench.evidence.store import EvidenceWriter, read_evidence
from rl_pipeline_bench.records.timestamps import new_run_id
from rl_pipeline_bench.models.lora import apply_lora, plan_lora
from rl_pipeline_bench.models.reference import build_reference_snapshot
from rl_pipeline_bench.settings.spec import build_spec, check_spec
from rl_pipeline_bench.backends.context import RunContext

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model_record(tmp_path_factory):
    return build_reference_snapshot(REPO / "models" / "tiny_qwen3_moe.yaml", tmp_path_factory.mktemp("hf"),
                                    model="reference-tiny-qwen3moe")


@pytest.fixture(scope="module")
def tokenizer(model_record):
    return policy.load_tokenizer(model_record["snapshot_path"])


def make_ctx(config, tmp_path, record, workload="multi_turn", n_updates=3, extra=0):
    """A RunContext training n_updates; the plan offers `extra` more updates after them."""
    config["suites"]["smoke"]["contract"] = {"warmup_updates": 1, "measured_updates": n_updates - 1,
                                             "headline_updates": 1, "extra_offered_updates": extra}
    run_spec = check_spec(build_spec(config, "smoke"))
    suite = get_suite(config, "smoke")
    spec = wl.load_workload(config, workload, suite["scale"])
    plan = wl.offered_plan(spec, config["seed"], run_spec.offered_updates)
    contract = {**run_spec.settings["contract"], "trainer_ranks": reference.trainer_ranks(run_spec),
                "offered_trajectories_per_update": spec.trajectories_per_update}
    manifest = {"backend": "reference", "workload": workload, "suite": suite.name, "trial": 1, "contract": contract,
                "model": {k: record.get(k) for k in ("model", "repo_id", "revision")}}
    writer = EvidenceWriter(tmp_path / "evidence", new_run_id(suite.name, "reference", workload, 1), manifest)
    return RunContext(run_spec, "reference", workload, spec, 1, plan, record, writer, contract)


@pytest.mark.parametrize("loop", ["eager", "static"])
def test_decoding_honours_every_length_exactly(model_record, tokenizer, loop):
    model = policy.load_base_model(model_record["snapshot_path"], torch.device("cpu")).eval()
    banned = banned_token_mask(tokenizer, model.config.vocab_size, torch.device("cpu"))
    prompts = [[1, 53, 200, 300, 2, 1, 54], [1, 53, 400, 2, 1, 54], [1, 53] + list(range(100, 140)) + [2, 1, 54]]
    lengths = [9, 1, 23]
    keys = [1, 2, 2**62 + 3]
    ticks = iter(range(1000))
    decoder = Decoder(model, banned, tokenizer.pad_token_id, loop=loop)
    outs, finished = decoder.decode(Batch(prompts, lengths, keys), lambda: float(next(ticks)))
    assert [len(o) for o in outs] == lengths
    assert not any(bool(banned[t]) for o in outs for t in o)  # no EOS, no special token, no <unk>
    assert finished[1] < finished[0] < finished[2]  # each row's finish time is when it got its last token
    # Same key, same prompt, alone or in another order: the same tokens (batch mates do not change a row's draws).
    alone, _ = decoder.decode(Batch(prompts[2:], lengths[2:], keys[2:]))
    assert alone[0] == outs[2]
    swapped, _ = decoder.decode(Batch(prompts[::-1], lengths[::-1], keys[::-1]))
    assert swapped[::-1] == outs


def test_banned_mask_covers_special_tokens(tokenizer):
    mask = banned_token_mask(tokenizer, 4100, torch.device("cpu"))
    for tok in ("<|im_end|>", "<|endoftext|>", "<|im_start|>", "<think>", "<tool_call>", "<|unk|>"):
        assert bool(mask[tokenizer.convert_tokens_to_ids(tok)]), tok
    assert bool(mask[4096:].all()) and not bool(mask[100])


def test_reward_and_advantages():
    assert reward([0, 1, 4095, 4000], 4096) == 0.5
    assert reward([], 4096) == 0.0
    advs = group_advantages([1.0, 0.0, 0.5, 0.5])
    assert abs(sum(advs)) < 1e-9 and advs[0] > 0 > advs[1]
    assert group_advantages([0.3, 0.3]) == [0.0, 0.0]


def _group(versions, forced=3, produced=3, update=7):
    trajs = [TrajectoryResult(t, [CallResult(0, [1, 2], list(range(10, 10 + produced)), forced, v, 0.0, 1.0)])
             for t, v in enumerate(versions)]
    return GroupResult(update, 0, trajs)


def test_acceptance_rejects_stale_and_wrong_length_groups():
    assert acceptance(_group([5, 6]), 6, 4) == (True, "")
    ok, why = acceptance(_group([1, 1]), 6, 4)
    assert not ok and "policy age 5.00" in why
    ok, why = acceptance(_group([6, 6], forced=3, produced=2), 6, 4)
    assert not ok and "produced 2 tokens, forced 3" in why


def test_stale_group_is_recorded_and_never_trained_on(config, model_record, tokenizer, tmp_path):
    ctx = make_ctx(config, tmp_path, model_record)
    model = policy.load_base_model(model_record["snapshot_path"], torch.device("cpu"))
    model = apply_lora(model, plan_lora(model, 8, 32))
    params = policy.adapter_parameters(model)
    before = {n: p.detach().clone() for n, p in params.items()}
    board = PolicyBoard()
    for _ in range(6):
        board.publish(lambda: None)
    import queue

    trainer = Trainer(model=model, params=params, publish=lambda: board.publish(lambda: None), board=board,
                      inbox=queue.Queue(), expected_groups={7: [0]},
                      banned=banned_token_mask(tokenizer, 4096, torch.device("cpu")), pad_id=0, vocab_size=4096,
                      learning_rate=1e-2, max_policy_age=4, writer=ctx.writer, log=ctx.log, offered_per_update={7: 2})
    stats = trainer.train_update(7, [_group([0, 1])])  # ages 6 and 5: mean 5.5 > 4
    assert stats.rejected_groups == 1 and stats.accepted_trajectories == 0 and stats.assistant_tokens == 0
    assert all(torch.equal(before[n], p) for n, p in params.items())
    ctx.writer.finish("completed")
    ev = read_evidence(ctx.writer.path)
    assert ev.calls["accepted"].tolist() == [False, False]
    assert ev.updates[["update", "accepted_trajectories", "assistant_tokens", "policy_version"]].values.tolist() == [[7, 0, 0, 7]]


def test_short_run_writes_evidence_v1(config, model_record, tmp_path):
    ctx = make_ctx(config, tmp_path, model_record, "multi_turn", 3)
    reference.run(ctx)
    ctx.writer.finish("completed")
    ev = read_evidence(ctx.writer.path)
    assert ev.problems == []
    up = ev.updates
    assert up["update"].tolist() == [1, 2, 3]
    assert up["completed_at"].is_monotonic_increasing and up["completed_at"].is_unique
    assert up["policy_version"].tolist() == [1, 2, 3]
    assert (up["accepted_trajectories"] == ctx.workload_spec.trajectories_per_update).all()
    calls = ev.calls
    assert len(calls) == len(ctx.plan)
    assert (calls["completion_tokens"] == calls["forced_completion_tokens"]).all()
    merged = calls.merge(ctx.plan, on=["update", "group", "trajectory", "call"], suffixes=("", "_plan"))
    assert len(merged) == len(ctx.plan)
    assert (merged["forced_completion_tokens"] == merged["forced_completion_tokens_plan"]).all()
    assert (merged["prompt_tokens"] > merged["prompt_tokens_plan"]).all()  # template + content
    assert calls["accepted"].all()
    assert (calls["started_at"] <= calls["finished_at"]).all() and (calls["started_at"] >= 0).all()
    # accepted assistant tokens are the completion tokens actually generated and trained on
    per_update = calls.groupby("update")["completion_tokens"].sum()
    assert up.set_index("update")["assistant_tokens"].to_dict() == per_update.to_dict()
    # a call of update u ran on a policy no older than the staleness limit allows
    age_limit = ctx.run_spec.backend_settings("reference")["max_policy_age"]
    assert (calls["policy_version"] <= calls["update"] - 1).all()
    assert (calls["policy_version"] >= calls["update"] - 1 - age_limit).all()
    assert ((up["mean_policy_age"] >= 0) & (up["mean_policy_age"] <= age_limit)).all()
    iv = ev.intervals
    assert iv["rank"].tolist() == [0, 0, 0] and iv["update"].tolist() == [1, 2, 3]
    assert (iv["start"] <= iv["end"]).all()
    assert (iv.set_index("update")["end"] <= up.set_index("update")["completed_at"]).all()
    manifest = json.loads((ctx.writer.path / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["lora"]["rank"] == 8 and manifest["lora"]["alpha"] == 32
    assert set(manifest["lora"]["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj"}
    if manifest["lora"]["experts"] != "none":
        assert manifest["lora"]["expert_adapters_receive_gradients"] is True
    log = (ctx.writer.path / "run.log").read_text()
    assert log.count("trajectories/s") == 3
    summary = summarize(ctx.writer.path)
    assert summary["valid"], summary["reasons"]
    assert summary["e2e"]["headline"]["trajectories_per_s"] > 0
    # calls in flight decode together across groups and updates, as an inference server batches them
    batch_sizes = calls.groupby("started_at").size()
    groups_per_batch = calls.groupby("started_at")[["update", "group"]].apply(lambda d: len(d.drop_duplicates()))
    assert groups_per_batch.max() > 1 and batch_sizes.max() > ctx.workload_spec.group_size
    decode = manifest["reference"]["decode"]
    assert decode["loop"] == "eager" and decode["batches"] == len(batch_sizes) and decode["graph_failure"] is None
    assert manifest["reference"]["sampling"].endswith(SAMPLER)


def test_extra_offered_work_keeps_generation_going_and_is_never_accepted(config, model_record, tmp_path):
    ctx = make_ctx(config, tmp_path, model_record, "tool_history", 3, extra=2)
    reference.run(ctx)
    ctx.writer.finish("completed")
    ev = read_evidence(ctx.writer.path)
    assert ev.updates["update"].tolist() == [1, 2, 3]  # only the trained updates are updates
    beyond = ev.calls[ev.calls["update"] > 3]
    assert len(beyond) > 0 and not beyond["accepted"].any()
    assert (beyond["completion_tokens"] == beyond["forced_completion_tokens"]).all()
    assert ev.calls[ev.calls["update"] <= 3]["accepted"].all()
    summary = summarize(ctx.writer.path)
    assert summary["valid"], summary["reasons"]
    assert summary["counts"]["accepted_trajectories"] == 3 * ctx.workload_spec.trajectories_per_update


def test_zero_policy_age_limit_makes_rollout_wait(config, model_record, tmp_path):
    config["reference"]["max_policy_age"] = 0
    ctx = make_ctx(config, tmp_path, model_record, "long_generation", 3)
    reference.run(ctx)
    ctx.writer.finish("completed")
    ev = read_evidence(ctx.writer.path)
    assert (ev.calls["policy_version"] == ev.calls["update"] - 1).all()
    assert ev.updates["mean_policy_age"].tolist() == [0.0, 0.0, 0.0]
    # update u's generation starts only after update u-1 was trained (and then published)
    first_start = ev.calls.groupby("update")["started_at"].min()
    trained = ev.intervals.set_index("update")["end"]
    assert all(first_start[u] >= trained[u - 1] for u in (2, 3))


def test_broken_snapshot_path_raises(config, model_record, tmp_path):
    broken = dict(model_record, snapshot_path=str(tmp_path / "no-such-snapshot"))
    ctx = make_ctx(config, tmp_path, broken)
    with pytest.raises(ReferenceBackendError, match="does not exist"):
        reference.run(ctx)
    ctx.writer.finish("failed", error="broken snapshot")


def test_altered_snapshot_raises(config, model_record, tmp_path):
    altered = dict(model_record, files=dict(model_record["files"], **{"config.json": "0" * 64}))
    ctx = make_ctx(config, tmp_path, altered)
    with pytest.raises(ReferenceBackendError, match="config.json"):
        reference.run(ctx)
    ctx.writer.finish("failed", error="altered snapshot")


def test_pick_devices():
    assert policy.pick_devices("cpu") == (torch.device("cpu"), torch.device("cpu"))
    with pytest.raises(ReferenceBackendError, match="not one of"):
        policy.pick_devices("tpu")


def test_trainer_failure_raises_and_keeps_generated_calls(config, model_record, tmp_path, monkeypatch):
    from rl_pipeline_bench.backends.reference import trainer as trainer_mod

    original = trainer_mod.Trainer.train_update

    def failing(self, update, groups):
        if update == 2:
            raise RuntimeError("trainer broke on purpose")
        return original(self, update, groups)

    monkeypatch.setattr(trainer_mod.Trainer, "train_update", failing)
    ctx = make_ctx(config, tmp_path, model_record, "long_generation", 3)
    with pytest.raises(RuntimeError, match="trainer broke on purpose"):
        reference.run(ctx)
    ctx.writer.finish("failed", error="trainer broke on purpose")
    ev = read_evidence(ctx.writer.path)
    assert ev.updates["update"].tolist() == [1]
    calls = ev.calls
    assert calls.loc[calls["update"] == 1, "accepted"].all()
    later = calls[calls["update"] >= 2]
    assert not later["accepted"].any()
    # the group the trainer held when it failed is in the evidence, not lost
    assert (later["update"] == 2).sum() == (ctx.plan["update"] == 2).sum()
    assert (later["completion_tokens"] == later["forced_completion_tokens"]).all()
    assert json.loads((ctx.writer.path / "manifest.json").read_text())["status"] == "failed"


def test_rollout_failure_raises(config, model_record, tmp_path, monkeypatch):
    original = Decoder.decode
    calls = {"n": 0}

    def failing(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("rollout broke on purpose")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Decoder, "decode", failing)
    config["reference"]["max_policy_age"] = 0  # update 2 starts only after update 1 was published
    ctx = make_ctx(config, tmp_path, model_record, "long_generation", 3)
    with pytest.raises(RuntimeError, match="rollout broke on purpose"):
        reference.run(ctx)
    ctx.writer.finish("failed", error="rollout broke on purpose")
    ev = read_evidence(ctx.writer.path)
    assert ev.updates["update"].tolist() == [1]


@pytest.mark.e2e
def test_sigkill_mid_run_leaves_evidence_readable_up_to_the_last_landed_update(config, model_record, tmp_path):
    """A real `bench run` killed with SIGKILL mid-way: every update on disk is whole and readable,
    with all of its offered calls and its trainer interval, and the summary names why it is invalid."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import time

    record = tmp_path / "model.json"
    record.write_text(json.dumps(model_record))
    root = tmp_path / "evidence"
    proc = subprocess.Popen([sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--backend", "reference",
                             "--workload", "tool_history", "--model-record", str(record), "--evidence-root", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    landed = 0
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            runs = list(root.glob("*")) if root.is_dir() else []
            if runs and (landed := len(read_evidence(runs[0]).updates)) >= 3:
                break
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert landed >= 3, "the run ended or stalled before three updates landed"
    (run,) = root.iterdir()
    ev = read_evidence(run)
    assert ev.problems == [] and ev.manifest["status"] == "running"
    k = len(ev.updates)
    assert k >= landed and ev.updates["update"].tolist() == list(range(1, k + 1))
    spec = wl.load_workload(config, "tool_history", get_suite(config, "smoke")["scale"])
    plan = wl.offered_plan(spec, config["seed"], 20)
    keys = ["update", "group", "trajectory", "call"]
    on_disk = ev.calls[ev.calls["update"] <= k][keys].sort_values(keys).values.tolist()
    assert on_disk == plan[plan["update"] <= k][keys].sort_values(keys).values.tolist()
    assert ev.intervals["update"].tolist()[:k] == list(range(1, k + 1))
    # At most the update being handed over at the instant of the kill is missing from disk.
    logged = [int(m) for m in re.findall(r"update (\d+)/\d+ completed", (run / "run.log").read_text())]
    assert logged and k >= logged[-1] - 1
    summary = summarize(run)
    codes = {r.split(":")[0] for r in summary["reasons"]}
    assert not summary["valid"] and {"status_not_completed", "update_count"} <= codes
    file_codes = {f"{t}_{p}" for t in ("manifest", "updates", "calls", "intervals") for p in ("missing", "corrupt")}
    assert not codes & file_codes


def test_update_chunks_respect_the_token_budget_and_keep_every_sample():
    from rl_pipeline_bench.backends.reference.trainer import token_chunks

    samples = [([1] * p, [2] * c, float(i)) for i, (p, c) in enumerate([(10, 5), (3, 2), (40, 30), (7, 1), (12, 12), (100, 200)])]
    chunks = token_chunks(samples, 64)
    assert sorted(s[2] for c in chunks for s in c) == [float(i) for i in range(6)]
    for c in chunks:
        width = max(len(p) + len(q) for p, q, _ in c)
        assert len(c) == 1 or len(c) * width <= 64
    assert [s[2] for s in chunks[0]] == [5.0]  # longer than the budget: alone, first
