"""The multi-turn tool experiment (experiments/multiturn_tool.py): its measures of tool use from played episodes,
and both arms end to end on the tiny model, resumed without replaying a finished epoch."""

from __future__ import annotations

import importlib
import json

import pytest


@pytest.fixture
def mt():
    return importlib.import_module("experiments.multiturn_tool")


def test_tool_use_and_call_validity_are_read_from_the_calculators_replies(mt):
    rows = [{"observations": '["calc(2 * 3) = 6"]', "reward": 1.0, "turns": 2, "end": "done"},
            {"observations": '["calc error: empty expression", "calc(1) = 1"]', "reward": 0.0, "turns": 3,
             "end": "turn_cap"},
            {"observations": "[]", "reward": 1.0, "turns": 1, "end": "done"},
            {"observations": "[]", "reward": 0.0, "turns": 1, "end": "done"}]
    m = mt.episode_measures(rows)
    assert (m["success"], m["tool_share"], m["calls"], m["parsed"], m["parse_share"]) == (0.5, 0.5, 3, 2, 0.6667)
    assert m["turns_mean"] == 1.75 and m["ends"] == {"done": 3, "turn_cap": 1}


@pytest.mark.slow
def test_both_arms_run_end_to_end_and_resume(mt, tiny_model, tmp_path):
    args = ["--seeds", "1", "--epochs", "1", "--tasks", "2", "--group", "2", "--tokens", "4", "--heldout", "3",
            "--model", str(tiny_model), "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"), "--base",
            "--set", "agent_update.batch_size=2"]
    rec = mt.main(args)
    arms = rec["summary"]["arms"]
    assert set(arms) == {"multi-turn", "single-turn"} and rec["base"]["heldout"]["calc"]["episodes"] == 3
    for arm in arms:
        run = json.loads((tmp_path / "out" / "calc" / f"{arm}-s1.json").read_text())
        assert len(run["rows"]) == 1 and run["rows"][0]["episodes"] == 4
        assert set(run["heldout"]) == {"calc", "arith"} and run["heldout"]["arith"]["calls"] == 0
    single = json.loads((tmp_path / "out" / "calc" / "single-turn-s1.json").read_text())["rows"][0]
    assert single["env_tokens"] == 0 and single["turns_mean"] == 1.0  # arith: one turn, no environment tokens
    assert (tmp_path / "out" / "calc.md").read_text().startswith("# Multi-turn GRPO")
    work = tmp_path / "work" / "calc" / "multi-turn-s1.json"
    before = work.stat().st_mtime_ns
    mt.main(args)  # finished: nothing is played again
    assert work.stat().st_mtime_ns == before
    # stopped before its evaluation: the rerun reloads the epoch's adapter and evaluates, replaying no epoch
    record = json.loads(work.read_text())
    played = record["rows"]
    del record["heldout"]
    work.write_text(json.dumps(record))
    mt.main(args)
    again = json.loads(work.read_text())
    assert again["rows"] == played and set(again["heldout"]) == {"calc", "arith"}
