"""The `bench` command line: a thin dispatcher over per-area command modules.

Each `rl_pipeline_bench.commands.<area>` module exposes `register(subparsers)`;
keeping areas apart lets runs, summaries, leases and provenance evolve separately.
A call imports only the module of its own command (`COMMAND_MODULES`): importing
every area (config validation, leases, NVML) cost about a second per `bench` process,
and the workflow starts one per job. Help and unknown commands load them all.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands
from .paths import ROOT  # noqa: F401  (re-exported: the seed's Kubernetes one-liner imports it)

#: The module under commands/ that registers each subcommand (tests/test_cli.py checks it
#: against the modules). A command missing here still works: its parser loads every module.
COMMAND_MODULES = {
    "attempts": "attempts",
    "build": "provenance",
    "eval": "eval",
    "gpus": "gpus",
    "lease": "lease",
    "mlflow": "mlflow",
    "paper": "report",
    "plan": "run",
    "preflight": "provenance",
    "probe": "probe",
    "provenance": "provenance",
    "report": "report",
    "run": "run",
    "schema": "schema",
    "snapshot": "provenance",
    "spec": "spec",
    "summarize": "summarize",
    "summarize-run": "summarize",
    "write-plan": "run",
}


def __getattr__(name: str):
    """`from rl_pipeline_bench.cli import recipe_manifest, source_manifest` (the seed's one-liner), loaded on use."""
    if name in ("recipe_manifest", "source_manifest"):
        from .provenance import recipes as provenance

        return getattr(provenance, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def command_modules(argv: list[str] | None = None) -> list[str]:
    """The command modules a parser for `argv` needs: the command's own, or all of them."""
    every = sorted(info.name for info in pkgutil.iter_modules(commands.__path__))
    if argv and argv[0] in COMMAND_MODULES:
        return [COMMAND_MODULES[argv[0]]]
    return every


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with every command (no argv) or only what `argv`'s command needs."""
    parser = argparse.ArgumentParser(prog="bench", description="RL Systems Bench controller")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in command_modules(argv):
        importlib.import_module(f"{commands.__name__}.{name}").register(sub)
    return parser


def _debug_flag(argv: list[str]) -> tuple[bool, list[str]]:
    """`bench --debug COMMAND ...`: the flag before the command, taken off so the command's parser never sees it."""
    debug = False
    while argv[:1] == ["--debug"]:
        debug, argv = True, argv[1:]
    return debug, argv


def describe_error(exc: BaseException) -> str:
    """One line naming what went wrong, for a person: the project's own errors already say it;
    a file error names the file; anything else is named by its type."""
    if isinstance(exc, OSError) and exc.filename is not None:
        also = f" -> {exc.filename2}" if exc.filename2 is not None else ""
        return f"{exc.filename}{also}: {exc.strerror or exc}"
    text = str(exc).strip()
    if type(exc).__module__.startswith(__package__) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def command_name(argv: list[str]) -> str:
    """`bench CMD [ACTION]` as typed, for error lines: the command and, where it has actions, the action."""
    words = ["bench", *argv[:1]]
    if len(argv) > 1 and not argv[1].startswith("-") and argv[0] in _WITH_ACTIONS:
        words.append(argv[1])
    return " ".join(words)


#: Commands whose second word is an action (`bench spec check`), named in their error lines.
_WITH_ACTIONS = frozenset({"attempts", "eval", "lease", "mlflow", "paper", "probe", "spec"})


def _report_failure(command: str, exc: BaseException, debug: bool) -> None:
    import traceback

    from .records.redaction import redact_text  # a message may quote a --set value or a URL with credentials

    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    named = type(exc).__module__.startswith(__package__) or (isinstance(exc, OSError) and exc.filename is not None)
    hint = "" if debug or named else " (`bench --debug ...` shows the traceback)"
    print(f"{command}: {redact_text(describe_error(exc))}{hint}", file=sys.stderr)


def _quiet_stdout() -> None:
    """The reader of stdout went away (`bench plan | head`): drop what is still buffered instead of failing at exit."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _exit_now_if_threads_run(code: int) -> None:
    """After Ctrl-C a run's own threads (a backend's rollout, a library's pool) may still be inside native
    code; finalizing the interpreter around them can abort the process (SIGABRT, "terminate called
    without an active exception") instead of exiting 130. Everything the run keeps is written by then
    (the evidence writer finishes before the interrupt reaches here), so leave at once."""
    import os
    import threading

    if any(t is not threading.main_thread() and t.is_alive() for t in threading.enumerate()):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run one `bench` command; every failure ends here as one line on stderr.

    Exit codes: the command's own, 2 for an error (its traceback only with `--debug`),
    130 on Ctrl-C, 141 when stdout's reader closed the pipe (as a shell reports SIGPIPE).
    """
    debug, argv = _debug_flag(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser(argv)
    parser.add_argument("--debug", action="store_true", help="on failure, print the traceback too")
    command = command_name(argv)
    try:
        args = parser.parse_args(argv)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            raise  # argparse's usage errors and --help: already printed
        message = str(exc.code)
        print(message if message.startswith("bench") else f"{command}: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        _exit_now_if_threads_run(130)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except Exception as exc:
        _report_failure(command, exc, debug)
        return 2


if __name__ == "__main__":
    sys.exit(main())
