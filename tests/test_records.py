"""The record home: one version ledger, one reader/writer pair, one error shape for every input file."""

from __future__ import annotations

import json
import os
import re

import pytest

from rl_pipeline_bench.paths import ROOT
from rl_pipeline_bench.records.formats import LEDGER, PREFIX, schema_of
from rl_pipeline_bench.records.jsonfile import JsonFileError, read_json, read_record, write_record

SRC = ROOT / "src" / "rl_pipeline_bench"
VERSIONED = re.compile(r"[\"']" + re.escape(PREFIX) + r"[a-z0-9-]+/v[0-9]+[\"']")


def test_no_module_spells_a_record_version_of_its_own():
    """Every `rl-bench/KIND/vN` string is made from the ledger; a literal elsewhere is a second home."""
    found = [f"{p.relative_to(ROOT)}:{n}" for p in SRC.rglob("*.py") if p.name != "formats.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if VERSIONED.search(line)]
    assert found == []


def test_the_ledger_gives_each_kind_a_history_up_to_its_version():
    for kind, fmt in LEDGER.items():
        assert fmt.kind == kind and fmt.schema == f"{PREFIX}{kind}/v{fmt.version}"
        assert sorted(fmt.history) == list(range(1, fmt.version + 1)), kind
        assert fmt.holds and all(fmt.history.values()), kind


def test_write_then_read_a_record(tmp_path):
    path = tmp_path / "summary.json"
    written = write_record(path, "summary", {"schema": "forged", "valid": True})
    assert written["schema"] == schema_of("summary") == json.loads(path.read_text())["schema"]
    assert read_record(path, "summary") == written


class Refused(ValueError):
    """The caller's own error class, raised for every failure."""


@pytest.mark.parametrize("case, expected", [
    ("missing", "does not exist"),
    ("directory", "is a directory"),
    ("fifo", "not a regular file"),
    ("device", "not a regular file"),
    ("not json", "is not readable JSON"),
    ("nan", "non-standard JSON constant NaN"),
    ("deep", "nested too deeply"),
    ("list", "holds a list, not a JSON object"),
    ("other version", "this version reads only 'rl-bench/summary/v1'"),
    ("other kind", "is not a summary record (schema 'rl-bench/model/v1'"),
])
def test_every_failure_names_the_file_what_it_should_be_and_the_hint(tmp_path, case, expected):
    path = tmp_path / "input.json"
    if case == "directory":
        path.mkdir()
    elif case == "fifo":
        os.mkfifo(path)  # a reader that opened it would block forever
    elif case == "device":
        path = "/dev/zero"  # a reader that read it would never end
    elif case != "missing":
        path.write_text({"not json": "{", "nan": '{"schema": "rl-bench/summary/v1", "x": NaN}',
                         "deep": "[" * 100_000 + "]" * 100_000, "list": "[]",
                         "other version": '{"schema": "rl-bench/summary/v9"}',
                         "other kind": '{"schema": "rl-bench/model/v1"}'}[case])
    with pytest.raises(Refused) as err:
        read_record(path, "summary", "run summary", Refused, hint="Next: re-summarise it")
    message = str(err.value)
    assert message.startswith(f"run summary {path}") and expected in message, message
    assert message.endswith("Next: re-summarise it"), message


def test_a_third_party_file_may_carry_nan_but_a_record_may_not(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"x": NaN}')
    assert read_json(path, "model config")["x"] != read_json(path, "model config")["x"]  # NaN
    with pytest.raises(JsonFileError, match="non-standard JSON constant NaN"):
        read_json(path, "model config", strict=True)
