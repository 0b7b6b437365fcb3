"""Test fixtures shared by the rollout and framework tests (labelled fixtures, not results).

- `wordlevel_tokenizer()`: a tiny WordLevel tokenizer with a Qwen-style chat
  template, built in-process with the `tokenizers` library.
- `FakeChatServer`: a loopback HTTP server speaking the slice of vLLM's
  OpenAI-compatible chat and completions API the drivers use. It honours `max_tokens` (or
  returns `short_by` fewer tokens, to exercise the length check), records every
  request body, holds each decode briefly (and, when asked, the first one until the
  next weight publication), and returns vLLM's `prompt_token_ids` / choice `token_ids` and
  logprobs when asked. It stands in for vLLM, which cannot run here.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

CHAT_TEMPLATE = r"""{%- for m in messages -%}
{%- if m.role == 'tool' -%}
{{- '<|im_start|>user\n<tool_response>\n' + m.content + '\n</tool_response><|im_end|>\n' -}}
{%- elif m.role == 'assistant' and preserve_thinking is defined and preserve_thinking -%}
{{- '<|im_start|>assistant\n<think>\n\n</think>\n\n' + m.content + '<|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%}
{%- endif -%}"""
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
WORDS = ["".join(p) for p in itertools.product("bdgklmnprst", "aeiou", "bdgklmnprst")][:400]


def wordlevel_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {t: i for i, t in enumerate(["[UNK]", *SPECIAL, "system", "user", "assistant", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(SPECIAL)
    t = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="<|im_end|>",
                                pad_token="<|endoftext|>")
    t.chat_template = CHAT_TEMPLATE
    return t


def small_plan_rows(new_calls: int = 3, forced=(3, 5, 2), group_size: int = 2):
    """Plan rows (interface columns) for one group: `group_size` trajectories of `new_calls` calls."""
    rows = []
    for traj in range(group_size):
        for call in range(new_calls):
            rows.append({
                "workload": "multi_turn", "update": 1, "group": 0, "trajectory": traj, "call": call,
                "prompt_tokens": 6, "tool_schema_tokens": 4,
                "history_completion_tokens": [2], "history_observation_tokens": [3],
                "forced_completion_tokens": int(forced[call % len(forced)]),
                "tool_observation_tokens": 4 if call < new_calls - 1 else 0, "salt": "",
            })
    return rows


class FakeChatServer:
    """Loopback stand-in for vLLM's /v1/chat/completions (see the module docstring)."""

    def __init__(self, tokenizer, short_by: int = 0, delay_s: float = 0.0, policy_spans: bool = False,
                 hold_first_decode_s: float = 0.0):
        self.tokenizer = tokenizer
        #: hold the first decode until the served policy moves on (at most this long), so that a
        #: run whose trainer publishes after its first step has a decode in flight across it
        #: whatever the machine's speed (a trainer whose next generation waits on the publication
        #: would otherwise have none in flight when generation finishes first)
        self.hold_first_decode_s = hold_first_decode_s
        self._held = False
        self._lock = threading.Lock()
        #: answer chat requests as ART's vLLM runtime does under in-flight LoRA: each choice's
        #: prompt and completion tokens partitioned by the policy version that scored them
        self.policy_spans = policy_spans
        self.short_by = short_by
        self.delay_s = delay_s
        self.requests: list[dict] = []
        #: the policy version it serves (a trainer double moves it on each weight sync), and per
        #: completions request the versions served when it arrived and when it was answered
        self.policy = 0
        self.served: list[tuple[int, int]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):  # vLLM's Prometheus endpoint, with no samples
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                payload = json.dumps(server.respond(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        class QuietServer(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                # A client that cancels its request at the run's end closes the socket first.
                if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def respond(self, body: dict) -> dict:
        if "prompt" in body:
            return self.complete(body)
        arrived, answered = self.decode()
        n = max(0, int(body["max_tokens"]) - self.short_by)
        words = [WORDS[(len(self.requests) * 7 + i) % len(WORDS)] for i in range(n)]
        text = " ".join(words)
        choice = {"index": 0, "finish_reason": "length",
                  "message": {"role": "assistant", "content": text}}
        out = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
               "model": body["model"], "choices": [choice],
               "usage": {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n}}
        if body.get("return_token_ids"):
            kwargs = body.get("chat_template_kwargs") or {}
            prompt = self.tokenizer.apply_chat_template(body["messages"], tokenize=True,
                                                        add_generation_prompt=True, return_dict=False, **kwargs)
            out["prompt_token_ids"] = list(prompt)
            choice["token_ids"] = self.tokenizer.convert_tokens_to_ids(words)
            if self.policy_spans:
                choice.update(self.spans(len(prompt), n, arrived, answered))
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": w, "logprob": -0.5, "bytes": None, "top_logprobs": []}
                                              for w in words]}
        return out

    def decode(self) -> tuple[int, int]:
        """A decode in flight while the trainer may publish: the policy versions served when it
        arrived and when it is answered (recorded in `served`)."""
        arrived = self.policy
        time.sleep(self.delay_s)
        with self._lock:
            hold = self.hold_first_decode_s > 0 and not self._held
            self._held = self._held or hold
        deadline = time.monotonic() + self.hold_first_decode_s
        while hold and self.policy == arrived and time.monotonic() < deadline:
            time.sleep(0.01)
        answered = self.policy
        self.served.append((arrived, answered))
        return arrived, answered

    @staticmethod
    def spans(prompt_tokens: int, completion_tokens: int, arrived: int, answered: int) -> dict:
        """ART's policy_token_spans: a publication during the decode splits the completion in two."""
        def span(start, end, version):
            return {"start_token": start, "end_token": end, "generation_id": f"g{version}", "policy_version": version,
                    "lora_slot": "0", "update_seq": version}

        cut = completion_tokens // 2 if answered != arrived and completion_tokens > 1 else completion_tokens
        completion = [span(0, cut, arrived)] + ([span(cut, completion_tokens, answered)] if cut < completion_tokens else [])
        return {"prompt_policy_token_spans": [span(1, prompt_tokens, arrived)] if prompt_tokens > 1 else [],
                "policy_token_spans": completion}

    def complete(self, body: dict) -> dict:
        """/v1/completions with token-id prompts, as vLLM answers it (return_token_ids, logprobs).

        Like a forced-length vLLM completion with ignore_eos, every third token is the
        end-of-turn special token; the returned text, like vLLM's with
        skip_special_tokens, omits it (so text cannot rebuild the tokens).
        """
        prompt = [int(t) for t in body["prompt"]]
        arrived, answered = self.decode()
        n = max(0, int(body["max_tokens"]) - self.short_by)
        if not (body.get("min_tokens") == body["max_tokens"] and body.get("ignore_eos")):
            n = min(n, 1)  # a real model stops early unless forced
        eos = self.tokenizer.eos_token_id
        words = [WORDS[(len(self.requests) * 7 + i) % len(WORDS)] for i in range(n)]
        ids = [eos if i % 3 == 2 else self.tokenizer.convert_tokens_to_ids(w) for i, w in enumerate(words)]
        text = " ".join(w for i, w in enumerate(words) if i % 3 != 2)
        choice = {"index": 0, "finish_reason": "length", "text": text}
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
            choice["prompt_token_ids"] = prompt
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"tokens": words, "token_logprobs": [-0.25] * n, "top_logprobs": None,
                                  "text_offset": list(range(n))}
        return {"id": f"cmpl-{len(self.requests)}", "object": "text_completion", "created": 0,
                "model": body["model"], "choices": [choice],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": n, "total_tokens": len(prompt) + n}}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


#: Updates of a test run: 1 warmup + 2 measured, the contract's shape at test size.
N = 3


def small_context(tmp_path: Path, backend: str, run_id: str = "run-1", plan_updates: int = N + 4):
    """A RunContext for the comparison suite at test scale (N updates), with a tokenizer-only snapshot.

    The plan offers `plan_updates` updates' worth of groups (a trainer may take more than one per step).
    """
    import copy

    from rl_pipeline_bench.settings.config import load_config
    from rl_pipeline_bench.evidence.store import EvidenceWriter
    from rl_pipeline_bench.backends.context import RunContext
    from rl_pipeline_bench.settings.spec import build_spec, check_spec
    from rl_pipeline_bench.plan.workloads import load_workload, offered_plan

    config = copy.deepcopy(load_config())
    config["suites"]["comparison"].update(scale=0.01, skyrl_batch_size=1,
                                          contract={"warmup_updates": 1, "measured_updates": 2, "headline_updates": 1})
    run_spec = check_spec(build_spec(config, "comparison"))
    spec = load_workload(config, "multi_turn", run_spec.settings["workload_scale"]["multi_turn"])
    snapshot = tmp_path / "snapshot"
    if not snapshot.exists():
        wordlevel_tokenizer().save_pretrained(snapshot)
        (snapshot / "config.json").write_text("{}")
    contract = dict(run_spec.settings["contract"])
    writer = EvidenceWriter(tmp_path / "evidence", run_id, {"backend": backend, "contract": contract})
    model = {"snapshot_path": str(snapshot), "revision": run_spec.model["revision"]}
    return RunContext(run_spec, backend, "multi_turn", spec, 1, offered_plan(spec, config["seed"], plan_updates),
                      model, writer, contract)


def run_as_bench_run(ctx) -> None:
    """Run a context's backend as `bench run` does in the image: its SIGTERM handler installed,
    any failure recorded in the manifest (as runner.run_benchmark does), exit status 1."""
    from rl_pipeline_bench.runs import image_runs
    from rl_pipeline_bench.backends import get

    image_runs.stop_on_sigterm()
    try:
        get(ctx.backend).run(ctx)
    except BaseException as exc:
        ctx.writer.finish("failed", error=f"{type(exc).__name__}: {exc}")
        raise SystemExit(1)
    ctx.writer.finish("completed")


def overlay_env(name: str) -> dict:
    """Environment that puts an older release (an overlay of .ci/setup_frameworks.sh) first on the path."""
    import os
    import sys
    from pathlib import Path

    overlay = Path(sys.prefix) / "overlays" / name
    if not overlay.is_dir():
        raise FileNotFoundError(f"{overlay} is missing: run `bash .ci/setup_frameworks.sh`")
    path = os.pathsep.join(p for p in (str(overlay), os.environ.get("PYTHONPATH", "")) if p)
    # LiteLLM (an ART dependency) otherwise tries to fetch a price list over the network at import.
    return {**os.environ, "PYTHONPATH": path, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def require(module: str):
    """Import a framework package, or skip the module outside the framework venv.

    With RL_BENCH_REQUIRE_FRAMEWORKS=1 (set where the framework venv runs these
    tests) a missing package is an error, never a skip.
    """
    import importlib
    import os

    import pytest

    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("RL_BENCH_REQUIRE_FRAMEWORKS") == "1":
            raise
        pytest.skip(f"{module} is not installed in this environment; these tests run in the framework venv "
                    "built by .ci/setup_frameworks.sh (tests/frameworks/test_in_framework_env.py)",
                    allow_module_level=True)
