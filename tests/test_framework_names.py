"""Every framework name a driver uses is one its support check resolves before the lease (issue 25, finding 7).

A framework backend's `support.DRIVER_NAMES` lists, as "module:qualified name", the
framework's names its run-time modules use; the support check (`driver_names`) resolves
each in the installed framework (tests/frameworks run it there). This test reads the
backend's modules' source: every name imported from the framework, and every attribute
reached from such an import, must be listed, so a name the driver starts using cannot
escape the check. Names reached only through instances (`model._get_output_dir()`) are
listed by hand; the source cannot say whose they are.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from rl_pipeline_bench import backends

FRAMEWORKS = [b.name for b in backends.registered() if b.framework]
PACKAGE = Path(backends.__file__).parent


def _framework_roots(names) -> set[str]:
    return {name.partition(":")[0].split(".")[0] for name in names}


def used_names(source: str, roots: set[str]) -> set[str]:
    """'module:name' for each framework import in `source`, and 'module:name.attr' for attributes reached from one."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> "module:qualname" (or "module:" for a module)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in roots:
            for alias in node.names:
                found.add(f"{node.module}:{alias.name}")
                bound[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in roots:
                    bound[alias.asname or alias.name.split(".")[0]] = f"{alias.name.split('.')[0]}:"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            base = bound[node.value.id]
            found.add(f"{base}{node.attr}" if base.endswith(":") else f"{base}.{node.attr}")
    return found


@pytest.mark.parametrize("backend", FRAMEWORKS)
def test_every_framework_name_the_backend_uses_is_checked_before_the_lease(backend):
    listed = importlib.import_module(f"rl_pipeline_bench.backends.{backend}.support").DRIVER_NAMES
    roots = _framework_roots(listed)
    used: dict[str, str] = {}
    for path in sorted((PACKAGE / backend).glob("*.py")):
        if path.name == "support.py":  # the checks themselves
            continue
        for name in used_names(path.read_text(), roots):
            used.setdefault(name, path.name)
    assert used, f"no {backend} framework name found in its modules: the scan is blind"
    unlisted = sorted(f"{name} ({where})" for name, where in used.items() if name not in listed)
    assert not unlisted, f"{backend}: names used but not in support.DRIVER_NAMES:\n  " + "\n  ".join(unlisted)


def test_the_scan_finds_imports_and_attributes():
    source = ("import art\nfrom art.megatron import MegatronBackend\n"
              "def run():\n    art.TrainableModel(x=1)\n    MegatronBackend._get_service(None)\n    other.thing\n")
    assert used_names(source, {"art"}) == {"art:TrainableModel", "art.megatron:MegatronBackend",
                                           "art.megatron:MegatronBackend._get_service"}
