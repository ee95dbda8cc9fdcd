"""The example plugin's multi-turn domain (`examples/unitconv/genenv_unitconv/tool.py`), registered by one row as a
plugin is: it passes the domain contract, its episodes look a factor up and then answer, and the rollout stage plays
it as episodes whose observation tokens the agent mask leaves out of the loss."""

from __future__ import annotations

import json
import shutil

import pytest

from genenv_cli.catalogue.domains import DOMAINS, get_domain
from genenv_cli.domains.base import END_DONE, END_TURN_CAP, DomainEpisode
from genenv_cli.domains.checks import run_contract
from paths import ROOT

EXAMPLE = ROOT / "examples" / "unitconv" / "genenv_unitconv"


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    shutil.copytree(EXAMPLE, tmp_path / "genenv_unitconv", ignore=shutil.ignore_patterns("__pycache__"))
    DOMAINS.register("unitconv-tool", "genenv_unitconv.tool:UnitConvToolDomain")
    yield get_domain("unitconv-tool")
    DOMAINS.unregister("unitconv-tool")


def test_the_example_environment_passes_the_contract_and_plays_episodes(plugin):
    assert plugin.episodic and plugin.max_turns == 3
    assert [(r.name, r.status) for r in run_contract(plugin)] == [
        ("seeds", "ok"), ("answers", "ok"), ("environment output", "ok"), ("prompts", "ok"), ("fingerprints", "ok"),
        ("episodes", "ok")]
    task = {"value": 3, "unit": "km", "to": "m", "answer": 3000}
    e = DomainEpisode(plugin.environment(task), plugin.max_turns)
    e.advance("factor(km, m)")
    e.advance("Answer: 3000")
    assert (e.observations, e.end, e.verdict.reward) == (["1 km = 1000 m"], END_DONE, 1.0)
    e = DomainEpisode(plugin.environment(task), plugin.max_turns)
    for action in ("factor(km, kg)", "factor(km, parsec)", "factor(km, m)"):
        e.advance(action)
    assert e.observations[:2] == ["factor error: km is a length and kg a mass", "factor error: unknown unit 'parsec'"]
    assert e.end == END_TURN_CAP and e.verdict.reward == 0.0


def test_the_rollout_stage_plays_the_plugin_as_episodes(plugin, tiny_model):
    from genenv_cli.machinery.engines import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve
    from genenv_cli.stages.rollout_episodes import play_tasks

    engine = HFEngine(resolve(str(tiny_model)), device="cpu", dtype="float32")
    tasks = [{"domain": "unitconv-tool", "payload": s.payload} for s in plugin.seeds("validation")[:3]]
    rows = [r for task_rows in play_tasks(engine, {"unitconv-tool": plugin}, tasks,
                                          SamplingParams(max_new_tokens=6, n=2, seed=1), [0, 2, 4])
            for r in task_rows]
    for r in rows:
        assert len(r["agent_mask"]) == len(r["completion_token_ids"]) == len(r["logprobs"])
        assert r["turns"] == len(json.loads(r["actions"])) and r["end"] in (END_DONE, END_TURN_CAP)
        assert r["turns"] == 1 or 0 in r["agent_mask"]   # a second turn follows the environment's tokens
