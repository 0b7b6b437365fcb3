"""docs/architecture.md draws the layers of the import-linter contract; the two must agree."""

from __future__ import annotations

import re
import tomllib

from rl_pipeline_bench.paths import ROOT


def test_architecture_doc_lists_the_contracts_layers():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    want = [" | ".join(m.strip() for m in layer.split(":")) for layer in layers]
    doc = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"<!-- layers: begin -->\n```\n(.*?)```\n<!-- layers: end -->", doc, re.S)
    assert block, "docs/architecture.md lost its layers block"
    assert block.group(1).splitlines() == want


def test_the_import_contracts_have_no_exceptions():
    """No lower module imports a higher one and no circle is excused: neither contract has ignore_imports."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert [c.get("ignore_imports", []) for c in contracts] == [[] for _ in contracts]


def test_the_wings_table_names_every_top_level_module_and_the_root_keeps_at_most_a_dozen():
    import pkgutil

    import rl_pipeline_bench

    found = {m.name for m in pkgutil.iter_modules(rl_pipeline_bench.__path__)}
    flat = {m.name for m in pkgutil.iter_modules(rl_pipeline_bench.__path__) if not m.ispkg}
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc[doc.index("## Wings"):doc.index("## Validation layers")]
    named = set(re.findall(r"`(\w+)/?`", table))
    assert found - {"templates"} <= named, sorted(found - named)
    assert len(flat) <= 12, sorted(flat)
