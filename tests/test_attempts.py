"""The attempts index (results/attempts.jsonl): torn lines, symbolic links, lines that are not events."""

from __future__ import annotations

import json

import pytest

from rl_pipeline_bench.evidence.attempts import EVENT_SCHEMA, append_event, read_attempts, read_events
from rl_pipeline_bench.cli import main
from rl_pipeline_bench.records.configfile import ConfigError


def test_a_torn_last_line_does_not_eat_the_next_event(tmp_path):
    index = tmp_path / "attempts.jsonl"
    append_event(index, "started", "run-a", suite="smoke")
    with index.open("a") as fh:  # a writer killed mid-line
        fh.write('{"schema": "rl-bench/attempt-event/v1", "event": "fin')
    append_event(index, "finished", "run-a", status="failed", error="boom")
    append_event(index, "started", "run-b", suite="smoke")
    events, problems = read_events(index)
    assert [(e["event"], e["run_id"]) for e in events] == [("started", "run-a"), ("finished", "run-a"),
                                                           ("started", "run-b")]
    assert len(problems) == 1 and f"{index} line 2 is not a JSON event" in problems[0], problems
    assert index.read_bytes().endswith(b"\n")
    attempts = {a.name: a for a in read_attempts(index)[0]}
    assert attempts["run-a"].status == "failed" and attempts["run-b"].status == "running"


def test_lines_that_are_not_events_are_reported_with_their_numbers(tmp_path, capsys):
    index = tmp_path / "attempts.jsonl"
    good = {"schema": EVENT_SCHEMA, "event": "started", "run_id": "run-a"}
    lines = [
        json.dumps(good),
        json.dumps({**good, "event": "deleted"}),              # 2: unknown event
        '{"schema": "%s", "event": "summarized", "run_id": "run-a", "valid": NaN}' % EVENT_SCHEMA,  # 3: NaN literal
        json.dumps({**good, "run_id": 7}),                      # 4: run id not a string
        '{"schema": "%s", "event": "finished", "run_id": "run-a", "x": Infinity}' % EVENT_SCHEMA,  # 5
        "[1, 2]",                                               # 6
    ]
    index.write_text("\n".join(lines) + "\n")
    events, problems = read_events(index)
    assert events == [good]
    assert [p.split(" line ")[1].split(" ")[0] for p in problems] == ["2", "3", "4", "5", "6"], problems
    assert "unknown event 'deleted'" in problems[0] and "NaN" in problems[1]
    assert main(["attempts", "list", "--index", str(index)]) == 0
    out = capsys.readouterr().out
    assert "run-a" in out and f"{index} line 3" in out  # the list says what it skipped


def test_the_index_never_follows_a_symbolic_link(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    index = tmp_path / "attempts.jsonl"
    index.symlink_to(target)
    with pytest.raises(ConfigError, match="is a symbolic link"):
        append_event(index, "started", "run-a")
    with pytest.raises(ConfigError, match="is a symbolic link"):
        read_events(index)
    assert target.read_text() == ""
    assert main(["attempts", "list", "--index", str(index)]) == 2


def test_a_fifo_in_place_of_the_index_is_refused_without_hanging(tmp_path):
    import os

    index = tmp_path / "attempts.jsonl"
    os.mkfifo(index)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_events(index)
