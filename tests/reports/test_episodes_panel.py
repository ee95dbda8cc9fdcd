"""The report's episodes panel: turns per episode, why episodes ended and the calls' validity, read from a
multi-turn epoch's rollouts; a single-turn epoch shows no panel."""

from __future__ import annotations

import pytest

from episode_domains import NAME, register
from genenv_cli.actions.report import build_report
from genenv_cli.rundir import RunDir
from genenv_cli.stages import generate_tasks, rollout
from genenv_cli.views.report.episodes import episode_numbers
from stagekit import complete_as, jsonl


def _tasks(domain: str) -> list[dict]:
    out = []
    for i, (a, b) in enumerate([(1, 1), (1, 2), (2, 2), (1, 3)]):
        tid = f"e0001-seed-s{i}"
        out.append({"task_id": tid, "epoch": 1, "batch_id": tid, "source": "seed", "domain": domain,
                    "shape": "1op-1d", "payload": {"expression": f"{a} + {b}", "answer": a + b}, "parent_id": None,
                    "context": None, "env_prompt": None, "env_output": None, "env_model": None})
    return out


def _rolled(make_run, domain: str) -> RunDir:
    run = RunDir(make_run("rollout.group_size=2", "rollout.max_new_tokens=4", domain=domain))
    complete_as(run, generate_tasks, 1, {"tasks": jsonl(_tasks(domain)), "rejects": ""})
    rollout.run(run, run.load_config(), 1)
    return run


@pytest.fixture
def three_turns():
    register()
    yield
    from genenv_cli.catalogue.domains import DOMAINS

    DOMAINS.unregister(NAME)  # which also forgets the cached instance


def test_a_multi_turn_epoch_gets_the_panel(make_run, three_turns):
    run = _rolled(make_run, NAME)
    res = build_report(run, run.load_config(), None)
    ep = res["numbers"]["episodes"]["episodes"][0]
    # 4 tasks x 2 episodes, each three turns; two calculator replies each, all valid by calc's rule
    assert ep["episodes"] == 8 and ep["turns"] == {3: 8} and ep["turns_mean"] == 3.0
    assert ep["ends"] == {"done": 8, "turn_cap": 0, "context_overflow": 0}
    assert (ep["calls"], ep["calls_judged"], ep["calls_valid"], ep["calling_share"]) == (16, 16, 16, 1.0)
    page = res["html"].read_text()
    assert '<section id="episodes">' in page and "ended: done" in page
    assert any(p.name == "episodes.png" for p in res["pngs"])


def test_a_single_turn_epoch_has_no_panel(make_run):
    run = _rolled(make_run, "arith")
    res = build_report(run, run.load_config(), None)
    assert res["numbers"]["episodes"] is None
    assert '<section id="episodes">' not in res["html"].read_text()


def test_calls_are_judged_by_their_domain():
    rows = [{"domain": "calc", "turns": 3, "end": "turn_cap",
             "observations": '["calc(2 * 3) = 6", "calc error: empty expression", "calc(1) = 1"]'},
            {"domain": "calc", "turns": 1, "end": "done", "observations": "[]"},
            {"domain": "arith", "turns": 2, "end": "done", "observations": '["whatever"]'}]
    n = episode_numbers(rows)
    assert (n["calls"], n["calls_judged"], n["calls_valid"]) == (4, 3, 2)  # arith does not judge its replies
    assert n["valid_share"] == round(2 / 3, 4) and n["calling_share"] == round(2 / 3, 4)
    assert n["turns"] == {1: 1, 2: 1, 3: 1} and n["ends"]["turn_cap"] == 1
