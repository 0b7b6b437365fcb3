"""What the workflow's terminal shows: Snakemake's job lines without its bookkeeping, and a few lines after Ctrl-C.

The Snakefile calls `quiet_terminal` on Snakemake's logger. On the terminal's handlers
(never the log file under .snakemake/log, which keeps everything) it drops the scheduler's
bookkeeping ("Select jobs to execute...", "Execute 1 jobs...", "Write-protecting output
file ..."), and after Ctrl-C the error records: Snakemake reports each job it stopped as a
failure (the exception with the job's shell command, the job again with that command, and
with show-failed-logs the job's whole log), which for an interrupt is noise, the user asked
for it. The Snakefile's onerror hook then prints `interrupt_summary`: what this invocation
ran, the rates of the runs it finished, and where the stopped run's evidence is. A genuine
failure is reported as Snakemake reports it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from .. import paths
from ..evidence import progress
from ..records.jsonfile import read_json

#: The line Snakemake's scheduler logs when it stops on KeyboardInterrupt (snakemake 9's job_scheduler).
TERMINATING = "Terminating processes on user request"


#: Scheduler lines that say nothing a reader acts on (each job's own lines stay).
BOOKKEEPING = re.compile(r"Select jobs to execute\.\.\.$|Execute \d+ jobs\.\.\.$|Write-protecting output file ")


class BookkeepingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not BOOKKEEPING.match(str(record.msg))


def quiet_terminal(logger: logging.Logger) -> "InterruptFilter":
    """Put the bookkeeping and interrupt filters on the logger's terminal handlers (every handler but
    a file's); with none, the interrupt filter on the logger itself. Returns the interrupt filter."""
    interrupt = InterruptFilter()
    terminals = [h for h in logger.handlers if not isinstance(h, logging.FileHandler)]
    for handler in terminals:
        handler.addFilter(BookkeepingFilter())
        handler.addFilter(interrupt)
    if not terminals:
        logger.addFilter(interrupt)
    return interrupt


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


def _written_since(paths, started: float):
    """(path, parsed JSON) of each file modified at or after `started`; unreadable ones are left out."""
    for path in sorted(paths):
        try:
            if path.stat().st_mtime >= started:
                yield path, read_json(path)
        except (OSError, ValueError):
            continue


def _label(record: dict) -> str:
    return progress.run_label(record.get("backend"), record.get("workload"), int(record.get("trial") or 0))


def interrupt_summary(started: float, root: Path | str = ".") -> str:
    """The few lines after an interrupt: the runs this invocation finished (with rates), the one it stopped,
    from the records under `root` (the workflow's directory) written since `started` (epoch seconds)."""
    root = Path(root)
    runs = root / paths.spec_runs_dir("*")  # results/runs/*/{backend}/{workload}/trial{n}/summary.json
    lines = ["Interrupted (Ctrl-C). Finished work is kept; the same command runs what is still missing."]
    for _path, summary in _written_since(runs.parent.glob(f"{runs.name}/*/*/trial*/summary.json"), started):
        lines.append(f"  finished: {_label(summary)}: {progress.rates_text(summary)}")
    for path, manifest in _written_since((root / paths.EVIDENCE_ROOT).glob("*/manifest.json"), started):
        if manifest.get("status") != "completed":
            lines.append(f"  stopped:  {_label(manifest)}: evidence kept in {path.parent} ({manifest.get('status')})")
    return "\n".join(lines)
