"""What a workflow interrupted with Ctrl-C leaves on the terminal: a few lines, not every job's error block.

After Ctrl-C Snakemake reports each job it stopped as a failure: the exception with the
job's shell command, the job again with that command, and (show-failed-logs) the job's
whole log. For an interrupt that is noise: the user asked for it. `InterruptFilter`, put on
Snakemake's logger by the Snakefile, lets everything through until Snakemake logs that it
is terminating on the user's request, and from then on drops error records (those blocks
and the closing "At least one job did not complete"). The Snakefile's onerror hook then
prints `interrupt_summary`: what this invocation ran, the rates of the runs it finished,
and where the stopped run's evidence is. A genuine failure is reported as Snakemake
reports it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ..evidence import progress

#: The line Snakemake's scheduler logs when it stops on KeyboardInterrupt (snakemake 9's job_scheduler).
TERMINATING = "Terminating processes on user request"


class InterruptFilter(logging.Filter):
    """Passes every record until the interrupt; then only records below ERROR."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.interrupted and str(record.msg).startswith(TERMINATING):
            self.interrupted = True
            return True
        return not (self.interrupted and record.levelno >= logging.ERROR)


def interrupt_summary(started: float, runs_dir: Path | str, evidence_root: Path | str) -> str:
    """The few lines after an interrupt: the runs this invocation finished (with rates), the one it stopped."""
    lines = ["Interrupted (Ctrl-C). Finished work is kept; the same command runs what is still missing."]
    for path in sorted(Path(runs_dir).glob("*/*/*/trial*/summary.json")):
        if path.stat().st_mtime < started:
            continue
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        label = progress.run_label(summary.get("backend"), summary.get("workload"), int(summary.get("trial") or 0))
        lines.append(f"  finished: {label}: {progress.rates_text(summary)}")
    for ev in sorted(Path(evidence_root).glob("*/manifest.json")):
        if ev.stat().st_mtime < started:
            continue
        try:
            manifest = json.loads(ev.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if manifest.get("status") != "completed":
            label = progress.run_label(manifest.get("backend"), manifest.get("workload"), int(manifest.get("trial") or 0))
            lines.append(f"  stopped:  {label}: evidence kept in {ev.parent} ({manifest.get('status')})")
    return "\n".join(lines)
