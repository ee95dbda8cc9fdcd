"""Messages that say what happened: full reject reasons, generations cut at generate.max_new_tokens, episodes scored
as played, each update's own advice, the settings that make a group differ, the report's complete epochs, one
vocabulary for episode ends, max_new_tokens said per turn, and no internal lines in a stage's output."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

from typer.testing import CliRunner

from genenv_cli.catalogue.config import Config, apply_overrides, config_from_dict, render_config
from genenv_cli.cli import app
from genenv_cli.rundir import RunDir
from replay import ReplayEngine, patch_engine


def test_a_reject_reason_keeps_the_format_every_generation_was_refused_for():
    from genenv_cli.core.reject_reasons import top_reasons

    rejects = [{"reason": "parse: no 'EXERCISE:' line"}] * 3 + [{"reason": "parse: unexpected character 'x'"},
                                                               {"reason": "parse: unexpected character 'y'"}]
    assert top_reasons(rejects) == [["parse: no 'EXERCISE:' line", 3], ["parse: unexpected character '…'", 2]]


def test_a_long_reason_is_shortened_at_its_end_and_never_inside_a_quote():
    from genenv_cli.core.reject_reasons import shorten, top_reasons

    reason = "invalid: " + "the tool call names an argument the tool does not declare, " * 2 + "in '" + "x" * 40 + "'"
    said = top_reasons([{"reason": reason}])[0][0]
    assert said.startswith("invalid: the tool call names an argument") and said.endswith(" …")
    assert "'" not in said and len(said) <= 160
    assert shorten("short 'quoted' text") == "short 'quoted' text"


class Cut(ReplayEngine):
    """A replayed environment whose every other generation runs to the token limit."""

    def generate(self, conversations, params, on_progress=None, seeds=None):
        out = super().generate(conversations, params, on_progress, seeds)
        for i, gens in enumerate(out):
            for k, g in enumerate(gens):
                if (i + k) % 2:
                    gens[k] = dataclasses.replace(g, finish_reason="length")
        return out


def _arith_run(root: Path, *sets: str) -> RunDir:
    root.mkdir()
    data = apply_overrides({"run": {"domain": "arith"}, "agent": {"model": "embedded"}, "env": {"model": "embedded"}},
                           ["generate.tasks_per_epoch=4", "generate.variations=2", "generate.seed_share=0.0",
                            "generate.max_rounds=1", "generate.max_new_tokens=16", *sets])
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))
    return RunDir(root)


def test_generate_tasks_says_how_many_generations_stopped_at_the_token_limit(tmp_path, monkeypatch):
    from genenv_cli.core.ui import UI
    from genenv_cli.stages import generate_tasks

    numbers = itertools.count(11)
    patch_engine(monkeypatch, Cut(lambda conv, k: f"EXERCISE: {next(numbers)} + {next(numbers)}"))
    run = _arith_run(tmp_path / "run")
    import io

    err = io.StringIO()
    result = generate_tasks.run(run, run.load_config(), 1, ui=UI(stream=err, out=io.StringIO()))
    counts = result.manifest["counts"]
    assert counts["truncated"] == counts["generations"] // 2 > 0
    line = generate_tasks.summary(counts, {})
    assert f"{counts['truncated']} of {counts['generations']} generations stopped at generate.max_new_tokens" in line
    assert "generate.max_new_tokens (= 16 tokens)" in err.getvalue()


def test_score_says_episodes_were_rewarded_as_played_not_zero_graded():
    from genenv_cli.stages import score

    line = score.summary({"rollouts": 8, "graded_distinct": 0, "episodes_scored": 8}, {})
    assert line.startswith("8 rollouts (8 episodes, rewarded as played)") and "0 distinct" not in line


def test_each_update_gives_its_own_advice():
    from genenv_cli.views.status_table import _update_note

    one = {"state": "done", "counts": {"steps": 1, "samples_used": 6}}
    env, agent = _update_note("update-env", one, Config()), _update_note("update-agent", one, Config())
    assert "rollout.group_size" not in env and "environment generations" in env and "curriculum.k_min" in env
    assert "rollout.group_size" in agent


def test_all_equal_groups_name_the_settings_that_make_a_group_differ():
    from genenv_cli.views.status_table import _update_note

    cfg = config_from_dict(apply_overrides({"run": {"domain": "calc"}}, ["rollout.group_size=2"]), "test")
    st = {"state": "done", "counts": {"steps": 0, "samples_used": 0,
                                      "skipped_by_reason": {"all-equal group": 4}}}
    note = _update_note("update-agent", st, cfg)
    assert "no GRPO group had rewards that differ (skipped groups: 4 all-equal group)" in note
    assert "rollout.group_size (now 2; at K = 2 both samples must differ)" in note
    assert "rollout.temperature" in note and "for calc: an episode's reward is its end" in note


def test_the_report_says_which_epochs_are_complete(tmp_path):
    from genenv_cli.catalogue.stages import available, epoch_stages
    from genenv_cli.views.report.build import _epochs_text, complete_epochs

    run = _arith_run(tmp_path / "run")
    for s in [s for s in epoch_stages() if available(s)]:
        run.manifest_path(1, s).parent.mkdir(parents=True, exist_ok=True)
        run.manifest_path(1, s).write_text("{}")
    run.manifest_path(2, "generate-tasks").parent.mkdir(parents=True)
    run.manifest_path(2, "generate-tasks").write_text("{}")
    assert complete_epochs(run, [1, 2]) == [1]
    run.metrics_path(3).parent.mkdir(parents=True)
    run.metrics_path(3).write_text("{}")        # an epoch kept as results alone: complete
    assert complete_epochs(run, [1, 2, 3]) == [1, 3]
    assert _epochs_text([1, 2], [1]) == "1-2 (1 complete; epoch 2 not finished)"


def test_alfworld_episodes_end_in_the_training_episodes_words():
    from genenv_cli.domains.base import END_DONE, END_TURN_CAP
    from genenv_cli.families.alfworld.benchmark import ALFWorld  # noqa: N814

    assert ALFWorld._episode_verdict(True, ["go to desk 1"], None, 5).end == END_DONE
    assert ALFWorld._episode_verdict(False, ["look"] * 5, None, 5).end == END_TURN_CAP
    assert ALFWorld._episode_verdict(False, ["look"], 1, 5).end == "actions_ended"


def test_max_new_tokens_says_per_turn_where_it_is_set():
    from genenv_cli.catalogue.config import render_config

    text = render_config(Config())
    assert "Longest agent answer, in tokens, per turn" in text
    assert "one task, written in one turn" in text


def test_an_episode_that_hit_the_turn_cap_keeps_an_observation_per_action():
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.rundir.schemas import SCHEMAS

    calc = get_domain("calc")
    payload = calc.seeds("train")[0].payload
    episode = calc.start_episode(payload)
    while episode.prompt() is not None:
        episode.advance("calc(1 + 1)")
    assert episode.end == "turn_cap" and len(episode.observations) == len(episode.actions) == calc.max_turns
    said = {c.name: c.doc for c in SCHEMAS["rollouts"].columns}["observations"]
    assert "one per action for one stopped at the turn cap (`turn_cap`)" in said


def test_an_update_keeps_its_internal_lines_in_the_log(make_run, tiny_model):
    from stagekit import agent_pool

    run = RunDir(make_run("agent_update.learning_rate=0.01"))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 0.0, 0.0]})
    r = CliRunner().invoke(app, ["update-agent", "--epoch", "1", "--run", str(run.root)])
    assert r.exit_code == 0, r.output
    assert "trainable-parameter digest" not in r.stderr and "accelerate: NO" not in r.stderr
    log = (run.logs_dir() / "update-agent.log").read_text()
    assert "rank 0 trainable-parameter digest" in log and "(accelerate: NO," in log


def test_rollout_says_how_many_answers_stopped_at_its_token_limit():
    from genenv_cli.stages import rollout

    line = rollout.summary({"rollouts": 24, "tasks": 4, "completion_tokens": 300, "truncated": 5}, {})
    assert line.endswith("5 of 24 stopped at rollout.max_new_tokens")
