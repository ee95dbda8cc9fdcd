"""The `alfworld` suite on ALFWorld's real games (alfworld 0.4.2's TextWorld environment): the evaluation games the
suite collects, the stored walkthroughs winning through genenv's episode loop and through `score` (official
protocol) and scoring every step (paper protocol), `genenv evaluate` on real game files, and the scripted engine
(games.py) against the real one.

CI runs these in `nox -s alfworld` (the alfworld extra builds from source there). They play a fixed sample, every
SAMPLE_EVERY-th of the 274 evaluation games in sorted order (12 games, about 3 loads of 3-5 s each); the whole set
is `python -m experiments.alfworld_checks` (`nox -s alfworld -- DIR`), recorded in experiments/results/alfworld/.
Skipped, with the reason, where alfworld is not installed or ../shared/data is absent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from alfworld_real import need_alfworld
from genenv_cli.cli import app
from genenv_cli.families.alfworld.domain import EVAL_GAMES
from genenv_cli.families.alfworld.game_files import collect_games

pytestmark = [pytest.mark.alfworld, pytest.mark.slow]
SPLITS = ("valid_seen", "valid_unseen")
SAMPLE_EVERY = 23
SAMPLE = range(0, 274, SAMPLE_EVERY)
runner = CliRunner()


def games(valid: Path) -> list[tuple[str, object]]:
    return [(split, ref) for split in SPLITS for ref in collect_games(valid / "json_2.1.1" / split)]


def test_the_suite_collects_the_274_evaluation_games_the_import_refuses(alfworld_valid):
    found = {split: sorted(ref.id.rsplit("/", 1)[0] for s, ref in games(alfworld_valid) if s == split)
             for split in SPLITS}
    assert {k: len(v) for k, v in found.items()} == {"valid_seen": 140, "valid_unseen": 134}
    assert found == json.loads(EVAL_GAMES.read_text())["splits"]


@pytest.mark.parametrize("index", SAMPLE)
def test_the_walkthrough_wins_through_the_episode_loop_and_score_and_scores_every_step(alfworld_valid, index):
    need_alfworld()
    from experiments.alfworld_checks import check_game

    split, ref = games(alfworld_valid)[index]
    rec = check_game(split, ref, agreement=False)
    assert rec["loop"] == {"won": True, "steps": len(ref.expert_plan), "end": "done", "reason": ""}, rec
    assert rec["score"]["won"] and rec["score"]["steps"] == len(ref.expert_plan), rec
    assert rec["paper"] == {"steps": len(ref.expert_plan), "correct": len(ref.expert_plan)}, rec


def test_the_scripted_engine_agrees_with_the_real_one_where_it_can_express_the_game(alfworld_valid):
    """Every 5th of the evaluation games whose receptacles each have a place of their own (51 of 274; the scripted
    engine does not model receptacles sharing one), over the walkthrough: the observations and `won` agree at every
    step, the admissible commands at 90% of them or more (the scripted engine lets any receptacle take any object;
    ALFWorld's `canContain` does not: `move pillow 1 to sidetable 2` is offered by the scripted engine only)."""
    need_alfworld()
    from genenv_cli.families.alfworld.agreement import NotExpressible, compare, shared_places

    own_places = [ref for _, ref in games(alfworld_valid) if not shared_places(ref.path)]
    assert len(own_places) == 51
    expressed, steps, agree, same_set = [], 0, 0, 0
    for ref in own_places[::5]:
        try:
            a = compare(ref.path)
        except NotExpressible:
            continue
        expressed.append(a.game)
        steps += a.steps
        agree += a.all_three
        same_set += a.admissible_set
        assert a.steps == len(ref.expert_plan) + 1 and a.won == a.steps and a.observation == a.steps, a
        assert all(not d.get("admissible_only_real") for d in a.differences), a   # never fewer commands offered
    assert len(expressed) >= 8, expressed
    assert same_set == agree and agree >= 0.9 * steps, (agree, steps)


def _two_games(valid: Path, dest: Path) -> list[str]:
    """Two valid_unseen games copied into dest/json_2.1.1/valid_unseen; their walkthroughs."""
    plans = []
    for _, ref in [g for g in games(valid) if g[0] == "valid_unseen"][:40:39]:
        trial = ref.path.parent
        shutil.copytree(trial, dest / "json_2.1.1" / "valid_unseen" / trial.parent.name / trial.name)
        plans.append(ref.expert_plan)
    return plans


def test_evaluate_scores_walkthroughs_on_real_game_files_under_both_protocols(alfworld_valid, tmp_path,
                                                                              monkeypatch):
    need_alfworld()
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    plans = _two_games(alfworld_valid, data)
    export = tmp_path / "paper.jsonl"
    out = runner.invoke(app, ["evaluate", "--bench", "alfworld", "--data", str(data), "--protocol", "paper",
                              "--export", str(export)])
    assert out.exit_code == 0, out.output
    steps = [json.loads(line) for line in export.read_text().splitlines()]
    assert len(steps) == sum(map(len, plans))
    preds = {"paper": [{"id": s["id"], "output": f"ACTION: {s['gold']}"} for s in steps],
             "official": [{"id": s["id"].split("#")[0], "output": "\n".join(
                 s2["gold"] for s2 in steps if s2["id"].split("#")[0] == s["id"].split("#")[0])}
                 for s in steps if s["id"].endswith("#step0")]}
    for protocol, rows in preds.items():
        path = tmp_path / f"{protocol}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out = runner.invoke(app, ["evaluate", "--bench", "alfworld", "--data", str(data), "--protocol", protocol,
                                  "--predictions", str(path), "--json"])
        assert out.exit_code == 0, out.output
        result = json.loads(next(p for p in Path("evals", "alfworld").glob(f"pred-{protocol}*.json")
                                 if not p.name.endswith(".samples.jsonl")).read_text())
        assert result["headline"]["value"] == 100.0, result["headline"]
        assert result["n"] == len(rows) and "alfworld 0.4.2" in result["version"]


def test_the_import_refuses_the_evaluation_splits(alfworld_valid, tmp_path):
    for source in (alfworld_valid, alfworld_valid / "json_2.1.1" / "valid_unseen"):
        out = runner.invoke(app, ["init", str(tmp_path / "run"), "--domain", "alfworld", "--seeds", str(source)])
        assert out.exit_code != 0 and "ALFWorld evaluation games" in out.output, out.output
        assert not (tmp_path / "run" / "seeds").exists()
