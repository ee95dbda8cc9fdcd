"""Mixed runs: one agent trained on several domains. A run on arith and tool_call goes through one epoch of every
stage on a tiny model (the environment replayed, so each domain's prompt can be checked): every row carries its
domain, each task is put to the agent in its own domain's prompt and graded by its own domain's scorer, and the
per-domain numbers of metrics.json add up to the epoch's. Then the config and `init` refuse what is ambiguous."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
from genenv_cli.catalogue.domains import get_domain
from genenv_cli.cli import app
from genenv_cli.core.errors import ConfigError
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_jsonl, read_parquet
from genenv_cli.stages import generate_tasks, rollout, score, update_agent, update_env
from genenv_cli.stages.generate_tasks import split_budget
from replay import ReplayEngine

runner = CliRunner()
N = itertools.count()
NAMES = ("arith", "tool_call")
SYSTEM = {"arith": "You write arithmetic exercises", "tool_call": "You write tasks for training a function-calling"}


def env_answer(conv, k) -> str:
    """A valid task in the format of whichever domain's environment prompt this is."""
    i = next(N)
    system = conv[0]["content"]
    if system.startswith(SYSTEM["arith"]):
        return f"EXERCISE: {311 + 7 * i} * ({i + 3} - {2 * i + 41})"
    assert system.startswith(SYSTEM["tool_call"]), system[:200]
    return (f"REQUEST: What is the weather in Townville{i} today?\nTOOLS: get_weather\n"
            f'CALLS: [{{"name": "get_weather", "arguments": {{"city": "Townville{i}"}}}}]')


def mixed_run(tmp_path: Path, model: Path, *extra: str) -> RunDir:
    root = tmp_path / "run"
    root.mkdir()
    sets = ["generate.tasks_per_epoch=9", "generate.variations=2", "generate.seed_share=0.5",
            "generate.max_rounds=3", "rollout.group_size=3", "rollout.max_new_tokens=12", "rollout.batch_size=16",
            "agent_update.batch_size=8", "env_update.kl_max=100", *extra]
    data = apply_overrides({"run": {"domain": "mixed", "domains": {"arith": 0.5, "tool_call": 0.5}},
                            "agent": {"model": str(model)}, "env": {"model": str(model)}}, sets)
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))
    return RunDir(root)


def test_split_budget_sums_to_the_total():
    assert split_budget(9, {"arith": 0.5, "tool_call": 0.5}) == {"arith": 5, "tool_call": 4}
    assert split_budget(10, {"a": 0.7, "b": 0.2, "c": 0.1}) == {"a": 7, "b": 2, "c": 1}
    for total in range(0, 40):
        assert sum(split_budget(total, {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}).values()) == total


@pytest.mark.e2e
@pytest.mark.slow
def test_mixed_run_one_epoch_of_every_stage(tmp_path, tiny_model, monkeypatch):
    import genenv_cli.machinery.engines as engines
    import genenv_cli.machinery.grading as grading

    run = mixed_run(tmp_path, tiny_model)
    cfg = run.load_config()
    real_open = engines.open_engine
    replay = ReplayEngine(env_answer)
    monkeypatch.setattr(engines, "open_engine", lambda *a, **k: replay)
    generate_tasks.run(run, cfg, 1)
    monkeypatch.setattr(engines, "open_engine", real_open)
    assert len(replay.calls) >= 1 and len({id(c) for c in replay.calls}) == len(replay.calls)

    tasks = read_jsonl(run.file("tasks", 1), "tasks")
    by_domain = {name: [t for t in tasks if t["domain"] == name] for name in NAMES}
    assert len(tasks) == 9 and [len(by_domain[n]) for n in NAMES] == [5, 4]     # split by share, largest remainder
    for name, ts in by_domain.items():
        dom = get_domain(name)
        assert all(dom.check_payload(t["payload"]) is None for t in ts)
        env = [t for t in ts if t["source"] == "env"]
        assert env, name                      # the environment wrote tasks for both domains
        for t in env:                         # ... each from its own domain's prompt and its own domain's seeds
            assert t["batch_id"].startswith(f"e0001-{name}-b")
            assert t["env_prompt"][0]["content"].startswith(SYSTEM[name])
            assert any(s.id == t["parent_id"] for s in dom.seeds("train"))
        assert all(t["task_id"].startswith(f"e0001-seed-{name}-") for t in ts if t["source"] == "seed")

    # rollout: every task in its own domain's agent prompt
    seen: list[list[dict]] = []

    def spying_open(*a, **k):
        engine = real_open(*a, **k)
        inner = engine.generate

        def generate(conversations, params, on_progress=None, seeds=None):
            seen.extend(conversations)
            return inner(conversations, params, on_progress=on_progress, seeds=seeds)

        engine.generate = generate
        return engine

    monkeypatch.setattr(engines, "open_engine", spying_open)
    rollout.run(run, cfg, 1)
    monkeypatch.setattr(engines, "open_engine", real_open)
    assert seen == [get_domain(t["domain"]).agent_messages(t["payload"]) for t in tasks]

    # score: every pair graded by its own domain's scorer
    graded_by: dict[str, str] = {}
    real_grade = grading.grade_pairs

    def spying_grade(domain_name, payloads, task_ids, completions, **kw):
        for tid in task_ids:
            assert graded_by.setdefault(tid, domain_name) == domain_name
        return real_grade(domain_name, payloads, task_ids, completions, **kw)

    monkeypatch.setattr("genenv_cli.stages.score_grading.grade_pairs", spying_grade)
    score.run(run, cfg, 1)
    task_domain = {t["task_id"]: t["domain"] for t in tasks}
    assert graded_by == task_domain

    e = run.epoch_dir(1)
    rolls = read_parquet(e / "rollouts.parquet", "rollouts")
    scores = read_parquet(e / "scores.parquet", "scores")
    stats = read_parquet(e / "task_stats.parquet", "task_stats")
    agent = read_parquet(run.pool_partition("agent_train", 1), "agent_train")
    env_sft = read_parquet(run.pool_partition("env_sft", 1), "env_sft")
    for df in (rolls, scores, stats, agent, env_sft):
        assert df["domain"].null_count() == 0
        assert all(task_domain[tid] == d for tid, d in zip(df["task_id"], df["domain"], strict=True))
    assert set(env_sft["domain"]) == set(NAMES)
    # the rewards are what each task's own scorer gives
    completions = dict(zip(rolls["rollout_id"], rolls["completion"], strict=True))
    payloads = {t["task_id"]: t["payload"] for t in tasks}
    for row in scores.iter_rows(named=True):
        own = get_domain(row["domain"]).score(payloads[row["task_id"]], completions[row["rollout_id"]])
        assert (row["reward"], row["error"]) == (float(own.reward), own.error)

    update_agent.run(run, cfg, 1)
    update_env.run(run, cfg, 1)

    # metrics.json: the per-domain numbers add up to the epoch's
    m = json.loads(run.metrics_path(1).read_text())
    by = m["by_domain"]
    assert set(by) == set(NAMES)
    for key in ("tasks", "env_tasks", "seed_tasks", "rollouts", "env_batches"):
        assert sum(by[n][key] for n in NAMES) == m[key], key
    gen = json.loads(run.manifest_path(1, "generate-tasks").read_text())["counts"]
    for key in ("generations", "accepted"):
        assert sum(by[n][key] for n in NAMES) == gen[key], key
    assert sum(by[n]["successes"] for n in NAMES) == int(stats["successes"].sum())
    assert sum(by[n]["successes"] for n in NAMES) / m["rollouts"] == pytest.approx(m["success_rate"], abs=1e-4)
    assert sum(by[n]["in_band"] for n in NAMES) == int(stats["in_band"].sum())
    assert sum(by[n]["in_band"] for n in NAMES) / m["tasks"] == pytest.approx(m["band_share"], abs=1e-4)
    groups, informative = sum(by[n]["groups"] for n in NAMES), sum(by[n]["informative"] for n in NAMES)
    assert groups == m["tasks"] and informative / groups == pytest.approx(m["informative_share"], abs=1e-4)
    for n in NAMES:
        own = stats.filter(pl.col("domain") == n)
        assert by[n]["tasks"] == own.height == len(by_domain[n])
        assert by[n]["rollouts"] == scores.filter(pl.col("domain") == n).height == own.height * 3

    # status shows the breakdown; report has the per-domain section
    out = runner.invoke(app, ["status", "--run", str(run.root)])
    assert out.exit_code == 0, out.output
    assert "domains arith 50%, tool_call 50%" in out.output
    for n in NAMES:
        assert f"epoch 1 {n}: {by[n]['tasks']} tasks" in out.output
    from genenv_cli.actions.report import build_report

    res = build_report(run, cfg)
    nums = res["numbers"]["domains"]["domains"]
    assert [nums[n]["tasks"] for n in NAMES] == [[by[n]["tasks"]] for n in NAMES]
    assert "domains.png" in [p.name for p in res["pngs"]]

    # epoch 2: each domain's environment is told its own domain's agent statistics
    monkeypatch.setattr(engines, "open_engine", lambda *a, **k: replay)
    generate_tasks.run(run, cfg, 2)
    tasks2 = read_jsonl(run.file("tasks", 2), "tasks")
    for t in tasks2:
        if t["source"] == "env":
            stats_shown = t["context"]["stats"]
            assert stats_shown["tasks"] == len(by_domain[t["domain"]])
            assert t["parent_id"] in {p["task_id"] for p in by_domain[t["domain"]]} | \
                {s.id for s in get_domain(t["domain"]).seeds("train")}


@pytest.mark.parametrize("mode", ["static", "seeds", "frozen"])
def test_mixed_run_in_every_env_mode(tmp_path, tiny_model, monkeypatch, mode):
    from replay import patch_engine

    run = mixed_run(tmp_path, tiny_model, f"env.mode={mode}", "generate.static_variations=1")
    replay, opened = ReplayEngine(env_answer), []
    patch_engine(monkeypatch, replay)
    monkeypatch.setattr("genenv_cli.machinery.engines.open_engine", lambda *a, **k: opened.append(1) or replay)
    generate_tasks.run(run, run.load_config(), 1)
    tasks = read_jsonl(run.file("tasks", 1), "tasks")
    assert [sum(t["domain"] == n for t in tasks) for n in NAMES] == [5, 4]
    env = [t for t in tasks if t["source"] == "env"]
    if mode == "seeds":
        assert not env and not replay.calls
        return
    assert {t["domain"] for t in env} == set(NAMES)
    for t in env:
        assert t["env_prompt"][0]["content"].startswith(SYSTEM[t["domain"]])
    if mode == "static":   # one fixed set per domain, each of its own domain's tasks
        for n in NAMES:
            fixed = read_jsonl(run.root / "static" / n / "tasks.jsonl", "tasks")
            assert fixed and {t["domain"] for t in fixed} == {n}
        assert not (run.root / "static" / "tasks.jsonl").exists()
    else:
        assert len(opened) == 1 and len(replay.calls) == 2   # one engine serves both domains' batches


def test_single_domain_run_is_as_before(make_run):
    """No by_domain, no domain table in genenv.toml's digest: a single-domain run's manifests match the old ones."""
    run = RunDir(make_run())
    cfg = run.load_config()
    assert not cfg.run.mixed and cfg.run.shares() == {"tool_call": 1.0}
    # the digest of a single-domain run leaves the empty table out, as before the key existed
    assert cfg.digest(["run.domain", "run.domains", "run.seed"]) == cfg.digest(["run.domain", "run.seed"])


@pytest.mark.parametrize("run_keys, message", [
    ({"domain": "mixed"}, "needs two domains or more"),
    ({"domain": "mixed", "domains": {"arith": 1.0}}, "needs two domains or more"),
    ({"domain": "mixed", "domains": {"arith": 0.5, "nope": 0.5}}, "unknown domain 'nope'"),
    ({"domain": "mixed", "domains": {"arith": 0.6, "tool_call": 0.6}}, "sum to 1.2; they must sum to 1"),
    ({"domain": "mixed", "domains": {"arith": 0.0, "tool_call": 1.0}}, "a share must be a number above 0"),
    ({"domain": "mixed", "domains": {"arith": -0.5, "tool_call": 1.5}}, "a share must be a number above 0"),
    ({"domain": "mixed", "domains": {"arith": "half", "tool_call": 0.5}}, "must be a table of domain name -> share"),
    ({"domain": "arith", "domains": {"arith": 0.5, "tool_call": 0.5}}, 'sets run.domain = "mixed"'),
    ({"domain": "mixed", "domains": {"arith": 0.5, "tool_call": 0.5}, "seeds": "seeds/seeds.jsonl"},
     "`run.seeds` is for single-domain runs"),
    ({"domain": "mixed", "domains": {"arith": 0.5, "tool_call": 0.5}, "domain_seeds": {"bfcl": "x.jsonl"}},
     "not one of the run's domains"),
    ({"domain": "arith", "domain_seeds": {"arith": "x.jsonl"}}, "`run.domain_seeds` is for mixed runs"),
])
def test_config_refuses_an_ambiguous_mix(run_keys, message):
    with pytest.raises(ConfigError, match=None) as info:
        config_from_dict({"run": run_keys}, "genenv.toml")
    assert message in str(info.value)


def test_config_mixed_run_round_trips():
    cfg = config_from_dict({"run": {"domain": "mixed", "domains": {"tool_call": 0.25, "api-bank": 0.75}}}, "t")
    assert cfg.run.shares() == {"api-bank": 0.75, "tool_call": 0.25}
    again = config_from_dict(__import__("tomllib").loads(render_config(cfg)), "t")
    assert again.run.domains == cfg.run.domains and again.run.mixed


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_init_mixed_run_with_shares_and_seeds(tmp_path):
    seeds = tmp_path / "arith_seeds.jsonl"
    seeds.write_text("".join(json.dumps({"id": f"m{i}", "split": "train" if i else "validation",
                                         "expression": f"{i} + {i + 10}", "answer": 2 * i + 10}) + "\n"
                             for i in range(6)))
    root = tmp_path / "run"
    out = invoke("init", root, "--domain", "arith=0.6", "--domain", "tool_call", "--seeds", f"arith={seeds}")
    assert out.exit_code == 0, out.output
    cfg = RunDir(root).load_config()
    assert cfg.run.mixed and cfg.run.shares() == pytest.approx({"arith": 0.6, "tool_call": 0.4})
    assert cfg.run.domain_seeds == {"arith": "seeds/arith/seeds.jsonl"} and cfg.run.seeds == ""
    assert (root / "seeds" / "arith" / "manifest.json").is_file()
    from genenv_cli.domains.seedfiles import domains_for_run

    doms = domains_for_run(cfg, root)
    assert [s.id for s in doms["arith"].seeds("train")] == [f"m{i}" for i in range(1, 6)]
    assert doms["tool_call"].seeds("train") == get_domain("tool_call").seeds("train")   # built-in


def test_init_equal_shares_by_default(tmp_path):
    out = invoke("init", tmp_path / "run", "--domain", "arith", "--domain", "tool_call", "--domain", "bfcl")
    assert out.exit_code == 0, out.output
    assert RunDir(tmp_path / "run").load_config().run.shares() == pytest.approx(
        {"arith": 1 / 3, "bfcl": 1 / 3, "tool_call": 1 / 3})


@pytest.mark.parametrize("args, message", [
    (["--domain", "arith", "--domain", "tool_call", "--seeds", "x.jsonl"], "say which one a seed file is for"),
    (["--domain", "arith", "--domain", "tool_call", "--seeds", "bfcl=x.jsonl"], "say which one a seed file is for"),
    (["--domain", "arith", "--domain", "nope"], "unknown domain `nope`"),
    (["--domain", "arith=0.7", "--domain", "tool_call=0.7"], "sum to 1.4"),
    (["--domain", "arith=1", "--domain", "tool_call"], "leaving nothing for tool_call"),
    (["--domain", "arith=x", "--domain", "tool_call"], "the share must be a number"),
    (["--domain", "arith=0.5"], "a share is for a run on several domains"),
    (["--domain", "arith", "--domain", "arith"], "given twice"),
])
def test_init_refuses_an_ambiguous_mix(tmp_path, args, message):
    out = invoke("init", tmp_path / "run", *args)
    assert out.exit_code != 0 and message in " ".join(out.output.split()), out.output
    assert not (tmp_path / "run" / "genenv.toml").exists()


def test_files_written_before_the_domain_column_still_read(tmp_path):
    """A run's rollouts, scores, task_stats and pools from before `domain` existed: read as null (the run's
    domain), by the full reader and by the footer check alike."""
    from genenv_cli.rundir.datafiles import check_parquet, frame
    from genenv_cli.rundir.schemas import SCHEMAS

    row = {"task_id": "t1", "batch_id": "t1", "source": "seed", "shape": "single", "attempts": 2, "successes": 1,
           "p_task": 0.5, "mean_reward": 0.5, "p_batch": 0.5, "r_env": 1.0, "filtered": False, "in_band": True,
           "informative": True, "prompt_tokens": 10}
    old = frame([row], "task_stats").drop("domain")
    path = tmp_path / "task_stats.parquet"
    old.write_parquet(path)
    check_parquet(path, "task_stats")
    df = read_parquet(path, "task_stats")
    assert df.columns == SCHEMAS["task_stats"].names() and df["domain"].to_list() == [None]
    assert [k for k, s in SCHEMAS.items() for c in s.columns if c.late and c.name == "domain"] == [
        "rejects", "rollouts", "scores", "task_stats", "agent_train", "env_sft"]


def test_heldout_on_a_mixed_run_scores_each_domain_by_its_own_rules(tmp_path):
    from genenv_cli.catalogue.config import load_config
    from genenv_cli.domains.seedfiles import domains_for_run
    from genenv_cli.evals.heldout.benchmark import HeldOut

    invoke_init = CliRunner().invoke(app, ["init", str(tmp_path / "run"), "--domain", "arith", "--domain", "tool_call"])
    assert invoke_init.exit_code == 0, invoke_init.output
    held = HeldOut()
    cfg = load_config(tmp_path / "run" / "genenv.toml")
    held.configure(cfg, tmp_path / "run", domains=domains_for_run(cfg, tmp_path / "run"))
    samples = held.load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path).samples
    for name in NAMES:
        own = [s for s in samples if s.meta["domain"] == name]
        seeds = get_domain(name).seeds("validation")
        assert [s.id for s in own] == [f"{name}/{t.id}" for t in seeds]
        assert [s.category for s in own] == [f"{name}/{t.shape}" for t in seeds]
        assert own[0].messages == get_domain(name).agent_messages(seeds[0].payload)
    arith = next(s for s in samples if s.meta["domain"] == "arith")
    tool = next(s for s in samples if s.meta["domain"] == "tool_call")
    right = f"ANSWER: {arith.gold['answer']}"
    assert held.score(arith, right, "official").correct
    # another domain's scorer would not take an arith answer: each sample is graded by its own domain
    assert not held.score(tool, right, "official").correct
    verdicts = [held.score(s, right if s is arith else "", "official") for s in samples]
    summary = held.summarize(samples, verdicts, "official")
    assert summary["domains"]["arith"] == {"success_rate": 100.0 / len([s for s in samples if s.meta["domain"] == "arith"]),
                                           "n": len([s for s in samples if s.meta["domain"] == "arith"])}
    tool_seeds = get_domain("tool_call").seeds("validation")  # an empty answer is never right, not even where no tool fits
    no_call_right = sum(get_domain("tool_call").score(t.payload, "").reward >= 1.0 for t in tool_seeds)
    assert summary["domains"]["tool_call"] == {"success_rate": 100.0 * no_call_right / len(tool_seeds),
                                               "n": len(tool_seeds)}
    assert summary["overall"]["n"] == len(samples)
