"""Owner-only log files whose records are scrubbed of secrets (run.log, eval logs)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .atomicfile import PRIVATE_MODE
from .redaction import is_secret_name, redact_text


def _redact_record(record: logging.LogRecord, secrets: dict[str, str]) -> None:
    """The one place a log record is scrubbed (message, traceback, stack); each record once."""
    if getattr(record, "rl_bench_redacted", False):
        return
    record.rl_bench_redacted = True
    record.msg = redact_text(record.getMessage(), secrets)
    record.args = None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact_text(record.exc_text, secrets)
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info, secrets)


class RedactingFilter(logging.Filter):
    """Scrubs records on the run's logger, before they reach run.log or propagate further.

    On the logger it runs once per record before every handler (console, job logs); on
    run.log's handler it catches records from child loggers, which skip the logger's
    filters. A record is redacted once; formatters use its scrubbed traceback as is.
    The secret-named variables are read once, when the run starts (reading the whole
    environment per record cost about 0.1 ms).
    """

    def __init__(self) -> None:
        super().__init__()
        self.secrets = {k: v for k, v in os.environ.items() if is_secret_name(k)}

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_record(record, self.secrets)
        return True


def private_log_handler(path: Path | str, fmt: str, redacting: logging.Filter | None = None) -> logging.FileHandler:
    """A handler on a new owner-only log file whose records are scrubbed (once, see `_redact_record`)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE))
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.addFilter(redacting or RedactingFilter())
    handler.setFormatter(logging.Formatter(fmt))
    return handler
