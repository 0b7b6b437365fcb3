"""The reference backend's asynchronous pipeline: one rollout thread, one trainer thread.

The rollout thread generates the plan's groups in (update, group) order on its own
policy copy, at most `max_policy_age` versions ahead of the trainer. The trainer thread
trains update u once all of u's groups are generated, publishes the adapter in flight
(between rollout calls), and records the update. The plan offers updates beyond the
N trained ones, so the rollout is still generating when update N completes; then it
stops at its next call boundary and everything it made past N goes into the evidence
as not accepted. Evidence goes only through ctx.writer.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import torch

from ... import paths
from ...models.lora import apply_lora, plan_lora
from ...models.snapshots import SnapshotError, verify_record
from . import policy
from .policy import ReferenceBackendError
from .decode import SAMPLER
from .rollout import GroupResult, PolicyBoard, RolloutWorker, Stopped, banned_token_mask
from .trainer import REWARD_DESCRIPTION, Trainer

PLAN_COLUMNS = ("update", "group", "trajectory", "call", "forced_completion_tokens")
#: Most calls decoded in one batch unless `reference.decode_batch_rows` says otherwise.
DECODE_BATCH_ROWS = 64


def _snapshot_path(model: dict[str, Any]) -> Path:
    """The snapshot directory of the identity record, verified file by file when hashes are recorded."""
    raw = (model or {}).get("snapshot_path")
    if not raw:
        raise ReferenceBackendError("the model identity record has no snapshot_path")
    path = Path(raw)
    if not path.is_dir():
        raise ReferenceBackendError(f"model snapshot {path} does not exist (rebuild {paths.model_record(model.get('model', 'MODEL'))})")
    if not (path / "config.json").is_file():
        raise ReferenceBackendError(f"model snapshot {path} has no config.json")
    if model.get("files") and model.get("hf_home") and model.get("repo_id") and model.get("revision"):
        try:
            verify_record(model)
        except SnapshotError as exc:
            raise ReferenceBackendError(f"model snapshot does not match its identity record: {exc}") from exc
    return path


def _check_plan(plan) -> dict[int, list[int]]:
    missing = [c for c in PLAN_COLUMNS if c not in plan.columns]
    if missing:
        raise ReferenceBackendError(f"offered plan lacks columns {missing}")
    if plan.empty:
        raise ReferenceBackendError("offered plan is empty")
    updates = sorted(int(u) for u in plan["update"].unique())
    if updates != list(range(1, len(updates) + 1)):
        raise ReferenceBackendError(f"offered plan updates are not 1..N: {updates[:10]}")
    return {u: sorted(int(g) for g in plan.loc[plan["update"] == u, "group"].unique()) for u in updates}


def _offered(plan) -> dict[int, int]:
    per = plan.groupby("update")[["group", "trajectory"]].apply(lambda d: len(d.drop_duplicates()))
    return {int(u): int(n) for u, n in per.items()}


def run(ctx) -> None:
    """Run the whole plan of ctx on the reference pipeline; raises on any failure."""
    ref = ctx.run_spec.backend_settings("reference")
    torch.set_num_threads(int(ref["torch_threads"]))
    snapshot = _snapshot_path(ctx.model)
    offered = _check_plan(ctx.plan)
    n = int(ctx.trained_updates)
    if max(offered) < n:
        raise ReferenceBackendError(f"offered plan has {max(offered)} updates, the run trains {n}")
    expected = {u: groups for u, groups in offered.items() if u <= n}
    rollout_dev, trainer_dev = policy.pick_devices(ctx.device)
    log = ctx.log
    log.info("reference backend: snapshot %s, rollout on %s, trainer on %s, torch threads %d",
             snapshot, rollout_dev, trainer_dev, torch.get_num_threads())

    tokenizer = policy.load_tokenizer(snapshot)
    torch.manual_seed(ctx.run_spec.seed)  # LoRA init (A random, B zero) is reproducible
    trainer_base = policy.load_base_model(snapshot, trainer_dev)
    lora = plan_lora(trainer_base, ref["lora_rank"], ref["lora_alpha"])
    trainer_model = apply_lora(trainer_base, lora)
    rollout_model = apply_lora(policy.load_base_model(snapshot, rollout_dev), lora).eval()
    trainer_params = policy.adapter_parameters(trainer_model)
    rollout_params = policy.adapter_parameters(rollout_model)
    for p in rollout_params.values():
        p.requires_grad_(False)
    policy.copy_adapter(trainer_params, rollout_params)  # version 0 on both sides
    merged = policy.MergedAdapter(rollout_model, rollout_params, rollout_dev)  # the rollout decodes merged weights
    vocab_size = int(trainer_model.get_base_model().config.vocab_size)
    expert_names = policy.expert_adapter_names(trainer_params)
    lora_record = lora.manifest() | {
        "adapter_tensors": len(trainer_params),
        "adapter_parameters": int(sum(p.numel() for p in trainer_params.values())),
        "expert_adapter_tensors": len(expert_names),
    }
    reference_record = {
        "rollout_device": str(rollout_dev), "trainer_device": str(trainer_dev),
        "torch_threads": torch.get_num_threads(), "max_policy_age": ref["max_policy_age"],
        "learning_rate": ref["learning_rate"], "reward": REWARD_DESCRIPTION,
        "sampling": f"temperature 1, special tokens masked, exactly forced tokens; {SAMPLER}",
        "dtype": str(next(trainer_base.parameters()).dtype).removeprefix("torch."),
    }
    ctx.writer.update_manifest(lora=lora_record, reference=reference_record)

    def first_step(params) -> None:
        grads = [params[n].grad for n in expert_names]
        seen = any(g is not None and bool(g.abs().sum() > 0) for g in grads)
        ctx.writer.update_manifest(lora=lora_record | {"expert_adapters_receive_gradients": seen if expert_names else None})
        log.info("LoRA: %d adapter tensors (%d on experts, gradients reach them: %s)",
                 len(params), len(expert_names), seen if expert_names else "n/a")

    board = PolicyBoard()
    channel: "queue.Queue[GroupResult]" = queue.Queue()
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rollout = RolloutWorker(
        model=rollout_model, tokenizer=tokenizer, plan=ctx.plan, board=board, out=channel,
        banned=banned_token_mask(tokenizer, vocab_size, rollout_dev), clock=ctx.writer.clock,
        workload=ctx.workload, seed=ctx.run_spec.seed, max_policy_age=ref["max_policy_age"], log=log,
        batch_rows=int(ref.get("decode_batch_rows", DECODE_BATCH_ROWS)), decode_loop=str(ref.get("decode_loop", "auto")),
    )
    log.info("rollout decoding: %s loop, up to %d rows a batch", rollout.decoder.mode, rollout.batch_rows)

    def record_decoding() -> None:
        decoder = rollout.decoder
        ctx.writer.update_manifest(reference=reference_record | {"decode": {
            "loop": decoder.mode, "batch_rows": rollout.batch_rows, "batches": rollout.batches,
            "graph_failure": decoder.graph_failure, "step_experts": decoder.step_experts, "experts_failure": decoder.experts_failure,
            "kv_budget_bytes": decoder.kv_budget_bytes, "split_batches": decoder.sub_batches,
            "prefill_tokens": decoder.prefill_tokens}, "publication": merged.record()})

    record_decoding()
    trainer = Trainer(
        model=trainer_model, params=trainer_params,
        publish=lambda: board.publish(lambda: merged.publish(trainer_params)),
        board=board, inbox=channel, expected_groups=expected,
        banned=banned_token_mask(tokenizer, vocab_size, trainer_dev), pad_id=pad_id, vocab_size=vocab_size,
        learning_rate=ref["learning_rate"], max_policy_age=ref["max_policy_age"], writer=ctx.writer, log=log,
        offered_per_update=_offered(ctx.plan), on_first_step=first_step,
    )
    errors: list[BaseException] = []

    def guarded(fn):
        def target():
            try:
                fn()
            except Stopped:
                pass
            except BaseException as exc:  # handed to the main thread, which re-raises it
                errors.append(exc)
                log.error("%s failed: %r", threading.current_thread().name, exc)
                board.halt()
        return target

    def train_then_stop_rollout() -> None:
        trainer.run()
        board.halt()  # update N is complete: the rollout stops at its next call boundary

    threads = [threading.Thread(target=guarded(on_own_stream(rollout.run, rollout_dev)), name="rollout", daemon=True),
               threading.Thread(target=guarded(on_own_stream(train_then_stop_rollout, trainer_dev)), name="trainer",
                                daemon=True)]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.5)
    except BaseException:
        board.halt()
        for t in threads:
            t.join(timeout=30)
        _record_unconsumed(ctx, rollout, trainer, channel)
        if not ctx.writer.finished:
            record_decoding()
        raise
    _record_unconsumed(ctx, rollout, trainer, channel)
    if not ctx.writer.finished:
        record_decoding()
    if errors:
        raise errors[0]
    ctx.writer.flush()


def on_own_stream(fn, device: torch.device):
    """`fn` run on a CUDA stream of its own (on CPU, as it is).

    On one GPU, rollout and trainer on the default stream would queue behind each other
    kernel by kernel, and the trainer's end-of-update sync would wait for the rollout's
    decode too: its interval would time both. Each thread's stream is its current stream
    (thread-local), so every kernel either side launches goes there.
    """
    if device.type != "cuda":
        return fn

    def target():
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))  # after what the main thread set up
        with torch.cuda.stream(stream):
            fn()
    return target


def _record_unconsumed(ctx, rollout: RolloutWorker, trainer: Trainer, channel: "queue.Queue[GroupResult]") -> None:
    """Calls that were generated but never trained on still go into the evidence, as not accepted:
    after a failure, and after success for the work offered beyond the last trained update."""
    rows = [row for g in trainer.holding for row in g.call_rows(False)]
    while True:
        try:
            rows += channel.get_nowait().call_rows(False)
        except queue.Empty:
            break
    for group in rollout.in_flight:
        rows += group.result.call_rows(False)
    if rows and not ctx.writer.finished:
        ctx.writer.add_calls(rows)
        ctx.log.info("recorded %d generated but untrained calls as not accepted", len(rows))

