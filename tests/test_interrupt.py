"""Ctrl-C, as a terminal sends it (SIGINT to the foreground process group): a few clean lines.

The workflow interrupted mid-run says what it finished (with rates) and where the stopped
run's evidence is, instead of an error block per stopped job with its shell command and
whole log; a direct `bench run` interrupted ends in one progress line and `bench: interrupted`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_copy import copy_repo, workflow_env

from rl_pipeline_bench.runs.terminal import TERMINATING, InterruptFilter, interrupt_summary, quiet_terminal


def _record(msg: str, level: int) -> logging.LogRecord:
    return logging.LogRecord("snakemake.logging", level, __file__, 1, msg, None, None)


def test_the_filter_drops_error_blocks_only_after_the_interrupt():
    f = InterruptFilter()
    assert f.filter(_record("Error in rule run_benchmark:", logging.ERROR))  # a genuine failure is reported
    assert f.filter(_record(f"{TERMINATING}, this might take some time.", logging.INFO)) and f.interrupted
    assert not f.filter(_record("RuleException: CalledProcessError ...", logging.ERROR))
    assert f.filter(_record("Complete log(s): x", logging.INFO))


def test_the_terminal_drops_the_schedulers_bookkeeping_and_the_log_file_keeps_it(tmp_path):
    logger = logging.getLogger("rl-bench-test-terminal")
    screen, log_file = logging.StreamHandler(), logging.FileHandler(tmp_path / "log")
    logger.handlers[:] = [screen, log_file]
    interrupt = quiet_terminal(logger)
    lines = ["Select jobs to execute...", "Execute 1 jobs...", "Write-protecting output file results/x.json.",
             "Job 3: run reference multi_turn trial1", "1 of 21 steps (5%) done"]
    assert [m for m in lines if all(f.filter(_record(m, logging.INFO)) for f in screen.filters)] == lines[3:]
    assert log_file.filters == [] and isinstance(interrupt, InterruptFilter)


def test_the_summary_names_finished_runs_with_rates_and_the_stopped_one(tmp_path):
    done = tmp_path / "results" / "runs" / "smoke-abc" / "reference" / "multi_turn" / "trial1" / "summary.json"
    done.parent.mkdir(parents=True)
    done.write_text(json.dumps({"backend": "reference", "workload": "multi_turn", "trial": 1, "valid": True,
                                "e2e": {"headline": {"trajectories_per_s": 5.43, "assistant_tokens_per_s": 127.6}},
                                "trainer": {"headline": {"assistant_tokens_per_s": 259.9}}}))
    stopped = tmp_path / "results" / "evidence" / "RUN-2"
    stopped.mkdir(parents=True)
    (stopped / "manifest.json").write_text(json.dumps({"status": "failed", "backend": "reference",
                                                       "workload": "tool_history", "trial": 1}))
    text = interrupt_summary(0.0, tmp_path)
    assert text.splitlines() == [
        "Interrupted (Ctrl-C). Finished work is kept; the same command runs what is still missing.",
        "  finished: reference multi_turn trial1: headline 5.43 trajectories/s, 127.6 assistant tokens/s; "
        "trainer 259.9 tokens/s",
        f"  stopped:  reference tool_history trial1: evidence kept in {stopped} (failed)"]


def _interrupt(argv: list[str], workdir: Path, after: str) -> tuple[int, list[str], list[str]]:
    """Start argv as a terminal's foreground job, send Ctrl-C to its group after the line `after`."""
    proc = subprocess.Popen(argv, cwd=workdir, env=workflow_env(workdir), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    before, rest, sent = [], [], False
    for line in proc.stdout:
        (rest if sent else before).append(line.rstrip("\n"))
        if not sent and after in line:
            os.killpg(proc.pid, signal.SIGINT)
            sent = True
    code = proc.wait(timeout=300)
    assert sent, "\n".join(before[-30:])
    return code, before, rest


@pytest.mark.e2e
def test_ctrl_c_of_the_workflow_is_a_few_lines(tmp_path):
    workdir = copy_repo(tmp_path / "repo")
    code, _before, after = _interrupt([sys.executable, "-m", "snakemake", "--cores", "1", "reports/comparison.html"],
                                      workdir, "update 2/20 done")
    text = "\n".join(after)
    assert code != 0 and len(after) <= 8, text
    assert "Interrupted (Ctrl-C)" in text and "  stopped:  reference " in text and "evidence kept in" in text, text
    for noise in ("RuleException", "Error in rule", "shell:", "Logfile", "Traceback", "message: None", "%|"):
        assert noise not in text, (noise, text)
    (manifest,) = [json.loads(p.read_text()) for p in (workdir / "results" / "evidence").glob("*/manifest.json")]
    assert manifest["status"] == "failed" and "KeyboardInterrupt" in manifest["error"]


@pytest.mark.e2e
def test_ctrl_c_of_a_direct_run_is_a_few_lines(tmp_path):
    workdir = copy_repo(tmp_path / "repo")
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "results/models/reference-tiny-qwen3moe.json"],
                   cwd=workdir, env=workflow_env(workdir), check=True, capture_output=True)
    code, before, after = _interrupt([sys.executable, "-m", "rl_pipeline_bench.cli", "run", "--backend", "reference",
                                      "--workload", "tool_history"], workdir, "update 2/20 done")
    assert code == 130, after
    assert len(after) <= 3 and after[-1] == "bench: interrupted", after
    stopped = [line for line in after if "interrupted after" in line]
    assert len(stopped) == 1 and "evidence kept in " in stopped[0] and "/results/evidence/" in stopped[0], after
    assert not any("Traceback" in line or "%|" in line for line in before + after)
