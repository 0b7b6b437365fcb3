"""The GPU machine's shell scripts: their exit status and the tools they point a user at."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "scripts" / "device").glob("*.sh"))


def _last_commands_of_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, command) of each command that ends a `{ ... }`, function body, `then`/`else` branch or loop."""
    lines = [(n, ln.strip()) for n, ln in enumerate(text.splitlines(), 1)]
    code = [(n, ln) for n, ln in lines if ln and not ln.startswith("#")]
    return [(n, ln) for (n, ln), (_, nxt) in zip(code, code[1:]) if re.match(r"^(\}|fi\b|done\b|else\b|elif\b)", nxt)]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_block_ends_in_a_test_and_list(script):
    """`[ x ] && cmd` as a block's last command makes the block return 1 when the test is false (probes_h200.sh did)."""
    bad = [(n, c) for n, c in _last_commands_of_blocks(script.read_text()) if re.match(r"^\[\[? .*\]\]? &&", c)]
    assert not bad, f"{script.name}: a block ends in a `[ ... ] &&` list: {bad}"


def test_the_check_itself_sees_such_a_block(tmp_path):
    body = 'f() {\n  echo ok\n  [ "$rc" -ne 0 ] && echo failed\n}\nrc=0\nf\n'
    assert _last_commands_of_blocks(body)[-1][1].startswith("[ ")
    script = tmp_path / "s.sh"
    script.write_text(body)
    assert subprocess.run(["bash", str(script)], capture_output=True).returncode == 1  # the defect, reproduced


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_name_only_tools_inside_the_project(script):
    assert "/work/" not in script.read_text(), f"{script.name} points at a path outside this repository"
    assert "device-wheels" not in script.read_text()


def test_wheel_script_is_shipped_and_valid_bash():
    wheels = REPO / "scripts" / "device" / "wheels.sh"
    assert wheels.is_file() and subprocess.run(["bash", "-n", str(wheels)]).returncode == 0
