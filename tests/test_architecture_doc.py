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


def test_at_most_four_named_exceptions_to_the_layers():
    """Issue 19's bound: a lower layer imports a higher one in at most four named places."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers"]
    assert len(layers.get("ignore_imports", [])) <= 4, layers["ignore_imports"]
