"""No backend is named outside its own package: what a backend needs is declared on its descriptor.

The code outside `src/rl_pipeline_bench/backends/` (and the rules, Snakefile and
workflow scripts) may not branch on a backend's name: no string literal naming a
registered backend, no identifier or command-line flag built from one. Docstrings and
comments may mention a framework by name. The embedded backend's name, "reference",
is also an ordinary word here (an image reference, the paper's reference numbers,
reference data), so it is checked only as a config or manifest key being read.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rl_pipeline_bench import backends
from rl_pipeline_bench.paths import ROOT

PACKAGE = ROOT / "src" / "rl_pipeline_bench"
#: Registered names that are also ordinary words in this code base (see the module docstring).
ORDINARY_WORDS = {"reference"}


def _python_outside_backends() -> list[Path]:
    files = [p for p in PACKAGE.rglob("*.py") if "backends" not in p.relative_to(PACKAGE).parts]
    return files + sorted((ROOT / "workflow_scripts").glob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, (ast.arg, ast.keyword)):
        return node.arg
    return None


def backend_mentions(path: Path, name: str, root: Path = ROOT) -> list[str]:
    """Where `path`'s code names backend `name`: string literals (not docstrings), identifiers, flags."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    word = re.compile(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", re.IGNORECASE)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if word.search(node.value):
                found.append(f"{path.relative_to(root)}:{node.lineno}: string {node.value[:60]!r}")
        ident = _identifier(node)
        if ident and name in ident.lower().split("_"):
            found.append(f"{path.relative_to(root)}:{node.lineno}: identifier {ident}")
    return found


def _rules_text() -> list[tuple[Path, str]]:
    files = [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]
    return [(p, "\n".join(line.split("#", 1)[0] for line in p.read_text().splitlines())) for p in files]


@pytest.mark.parametrize("name", [n for n in backends.names() if n not in ORDINARY_WORDS])
def test_no_backend_name_outside_backends(name):
    found = [m for p in _python_outside_backends() for m in backend_mentions(p, name)]
    word = re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(name)}(?![A-Za-z0-9])", re.IGNORECASE)
    found += [f"{p.relative_to(ROOT)}: {m.group(0)}" for p, text in _rules_text() for m in word.finditer(text)]
    assert not found, f"backend {name!r} named outside backends/ (declare it on its descriptor instead):\n" + "\n".join(found)


def test_the_embedded_backends_section_is_not_read_by_name():
    """"reference" as a config or manifest key read outside backends/ (e.g. config["reference"])."""
    key = re.compile(r"""(\[|\.get\(|\bsetdefault\()\s*["']reference["']""")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in _python_outside_backends()
             for i, line in enumerate(p.read_text().splitlines(), 1) if key.search(line)]
    assert not found, found


def test_the_scan_finds_a_planted_backend_name(tmp_path):
    """The check is not blind: a literal, an identifier and a flag naming a backend are each found, in any case."""
    planted = tmp_path / "planted.py"
    planted.write_text('"""skyrl in a docstring is fine."""\n'
                       'if backend == "skyrl":\n    pass\n'
                       'def skyrl_compat_env(env):\n    return env\n'
                       'FLAG = "--skyrl-cuda-compat"\n'
                       'VARS = {"RL_BENCH_SKYRL_SOURCE": "the SkyRL tree"}\n')
    found = sorted(m.split(": ", 1)[1] for m in backend_mentions(planted, "skyrl", root=tmp_path))
    assert found == sorted(["string 'skyrl'", "identifier skyrl_compat_env", "string '--skyrl-cuda-compat'",
                            "string 'RL_BENCH_SKYRL_SOURCE'", "string 'the SkyRL tree'"])
