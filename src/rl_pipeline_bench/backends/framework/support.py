"""Framework support checks: can the installed ART/SkyRL express the contract? Asked before any lease.

Each framework backend has a `support` module whose checks hand one contract
setting to the installed framework and report a gap when the framework refuses
it or makes something else of it (`run_checks`). The framework lives in its own
environment (image or native prefix), so `bench preflight` runs that module there
(`check_in_python`, `check_in_image`) with the native configuration built on the
controller, and `refuse_gaps` turns gaps into one error naming every missing setting.

A check that raises, or whose result differs from the setting, is a gap named by its
setting. Every framework name a driver uses, public or private, is one such setting too
(`missing_names`): a rename in the framework is refused before the lease, not found at step 1. `python -m rl_pipeline_bench.backends.<name>.support [--report] NATIVE_CONFIG_JSON`
prints {"framework", "version", "gaps", "facts"} as one JSON line and exits 1 on gaps
(0 with --report).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable, Mapping

Check = Callable[..., "str | None"]


class SupportError(RuntimeError):
    """The installed framework cannot express the measurement contract, or could not be asked."""


def run_checks(framework: str, checks: Mapping[str, Check], settings: Mapping[str, str], native: dict[str, Any],
               *, workdir: bool = False) -> dict[str, Any]:
    """{framework, version, gaps: {point: 'setting: why'}, facts}; each check gets (native, [workdir,] facts)."""
    from importlib.metadata import PackageNotFoundError

    try:
        installed = version(framework)
    except PackageNotFoundError:
        return {"framework": framework, "version": None, "facts": {},
                "gaps": {"installed": f"{framework} is not installed for {sys.executable}; run the check in the "
                                      "backend's image or native prefix (RL_BENCH_ENV_ROOT)"}}
    gaps: dict[str, str] = {}
    facts: dict[str, Any] = {}
    for point, check in checks.items():
        with contextlib.ExitStack() as stack:
            args = [native]
            if workdir:
                args.append(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"rl-bench-{framework}-support-")))
            try:
                why = check(*args, facts)
            except Exception as exc:  # any refusal by the framework is the gap's reason
                why = f"{type(exc).__name__}: {exc}"
        if why:
            gaps[point] = f"{settings[point]}: {why}"
    return {"framework": framework, "version": installed, "gaps": gaps, "facts": facts}


def _instance_attribute(cls: type, attr: str) -> bool:
    """Whether instances of `cls` carry `attr` without the class having it: a dataclass or pydantic
    field, or an assignment `self.<attr> = ...` in the source of the class or one of its bases."""
    import dataclasses
    import inspect
    import re

    if dataclasses.is_dataclass(cls) and attr in {f.name for f in dataclasses.fields(cls)}:
        return True
    if attr in (getattr(cls, "model_fields", None) or {}):
        return True
    assigned = re.compile(rf"\bself\.{re.escape(attr)}\s*(:[^=\n]+)?=[^=]")
    for base in inspect.getmro(cls):
        try:
            if assigned.search(inspect.getsource(base)):
                return True
        except (OSError, TypeError):  # builtins and classes without source
            continue
    return False


def missing_names(names: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The framework names a driver uses that the installed framework lacks, each with why.

    names: {"module:Qualified.name": keywords the driver passes it}; a name resolves by importing
    the module and walking the attributes (the last may be an instance attribute, see
    `_instance_attribute`); the keywords must bind to its signature.
    """
    import importlib
    import inspect

    missing = []
    for name, keywords in names.items():
        module_name, _, qualname = name.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError as exc:
            missing.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        owner, parts = obj, qualname.split(".")
        for i, part in enumerate(parts):
            if hasattr(owner, part):
                owner = getattr(owner, part)
            elif i == len(parts) - 1 and isinstance(owner, type) and _instance_attribute(owner, part):
                owner = None  # an instance attribute: nothing more to check
            else:
                missing.append(f"{name}: {'.'.join([module_name, *parts[:i]])} has no {part!r}")
                break
        else:
            if keywords and owner is not None:
                try:
                    inspect.signature(owner).bind_partial(**dict.fromkeys(keywords))
                except (TypeError, ValueError) as exc:
                    missing.append(f"{name}: does not take {', '.join(keywords)} ({exc})")
    return missing


def support_main(check_support: Callable[[dict[str, Any]], dict[str, Any]], module: str,
                 argv: list[str] | None = None) -> int:
    """`python -m MODULE [--report] NATIVE_CONFIG_JSON`: print the result as one JSON line.

    Exits 1 on gaps, unless --report (used by preflight, which reads the answer either way).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    report = "--report" in argv
    argv = [a for a in argv if a != "--report"]
    if len(argv) != 1:
        print(f"usage: python -m {module} [--report] NATIVE_CONFIG_JSON", file=sys.stderr)
        return 2
    with contextlib.redirect_stdout(sys.stderr):  # the framework's own prints must not mix into the answer
        result = check_support(json.loads(argv[0]))
    print(json.dumps(result, default=str))
    return 1 if result["gaps"] and not report else 0


def support_command(backend: str, native: dict[str, Any], python: str = "python3") -> list[str]:
    return [python, "-m", f"rl_pipeline_bench.backends.{backend}.support", "--report", json.dumps(native)]


def _parse(backend: str, where: str, returncode: int, stdout: str, stderr: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise SupportError(
            f"{backend} support check in {where} gave no answer (exit {returncode}): {stderr.strip()[-2000:]}"
        ) from None
    result["checked_in"] = where
    return result


def check_in_python(backend: str, native: dict[str, Any], python: str | Path, env: Mapping[str, str] | None = None,
                    timeout: float = 600) -> dict[str, Any]:
    """Run the backend's support check with the interpreter of its environment (a native prefix)."""
    proc = subprocess.run(support_command(backend, native, str(python)), capture_output=True, text=True,
                          env=None if env is None else dict(env), timeout=timeout)
    return _parse(backend, f"interpreter {python}", proc.returncode, proc.stdout, proc.stderr)


def check_in_image(backend: str, native: dict[str, Any], image_id: str, client) -> dict[str, Any]:
    """Run the backend's support check inside its image (no network, no GPU)."""
    from docker.errors import ContainerError, DockerException

    try:
        out = client.containers.run(image_id, support_command(backend, native), remove=True, network_disabled=True,
                                    stdout=True, stderr=False)
    except ContainerError as exc:
        text = exc.stderr.decode(errors="replace") if exc.stderr else str(exc)
        raise SupportError(f"{backend} support check failed in image {image_id} (exit {exc.exit_status}): {text[-2000:]}") from exc
    except DockerException as exc:
        raise SupportError(f"could not run the {backend} support check in image {image_id}: {exc}") from exc
    return _parse(backend, f"image {image_id}", 0, out.decode(errors="replace"), "")


def refuse_gaps(backend: str, result: dict[str, Any]) -> None:
    """Raise SupportError naming every contract setting the installed framework lacks."""
    gaps = result.get("gaps") or {}
    if gaps:
        installed = f"{result.get('framework')} {result.get('version')}" if result.get("version") else \
            f"no {result.get('framework')}"
        raise SupportError(
            f"installed {installed} ({result.get('checked_in', 'here')}) cannot "
            f"express the measurement contract for {backend}; missing settings:\n  "
            + "\n  ".join(f"{point}: {why}" for point, why in gaps.items())
        )
