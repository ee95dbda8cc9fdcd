"""generate-tasks with a replayed environment: parsing, rejects, duplicates, batches, counts, seed share."""

import itertools
import json
import re

from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_jsonl
from genenv_cli.stages import generate_tasks
from replay import ReplayEngine, patch_engine

CITIES = (f"City{i}" for i in itertools.count())


def env_answer(conv, k):
    parent = re.search(r"Example task:\nREQUEST: (.*)\n", conv[-1]["content"]).group(1)
    if k == 0:
        city = next(CITIES)
        return (f"REQUEST: What is the weather like in {city} right now, in celsius?\nTOOLS: get_weather\n"
                f'CALLS: [{{"name": "get_weather", "arguments": {{"city": "{city}"}}}}]')
    if k == 1:
        return f'REQUEST: {parent}\nTOOLS: get_weather\nCALLS: []'       # a copy of the parent request
    if k == 2:
        return "Sure! Here is a great task for you."                    # no format at all
    return 'REQUEST: Book me a spaceship to Mars tomorrow\nTOOLS: book_spaceship\nCALLS: []'


def test_batches_rejects_and_counts(make_run, monkeypatch):
    root = make_run("generate.tasks_per_epoch=8", "generate.seed_share=0.25", "generate.variations=4",
                    "generate.max_rounds=3")
    engine = ReplayEngine(env_answer)
    patch_engine(monkeypatch, engine)
    run = RunDir(root)
    cfg = run.load_config()
    result = generate_tasks.run(run, cfg, 1)
    tasks = read_jsonl(root / "epochs/0001/tasks.jsonl", "tasks")
    rejects = read_jsonl(root / "epochs/0001/tasks.rejects.jsonl", "rejects")
    c = result.manifest["counts"]
    assert len(tasks) == 8
    seeds = [t for t in tasks if t["source"] == "seed"]
    env = [t for t in tasks if t["source"] == "env"]
    assert len(seeds) == 2 and len(env) == 6
    # 6 env tasks wanted, n = 4 per context -> 2 batches; round 1 gives 1 valid task of 4 per batch,
    # round 2 asks 3 more per batch (1 valid each), round 3 asks 2 more: 1 valid each -> 3 per batch
    assert c["rounds"] == 3
    assert c["generations"] == 2 * 4 + 2 * 3 + 2 * 2
    assert c["accepted"] == 6
    assert c["rejected_duplicate"] == 2 + 2 + 2       # every k == 1 copies the parent
    assert c["rejected_parse"] == 2 + 2               # k == 2 in rounds 1 and 2
    assert c["rejected_invalid"] == 2                 # k == 3 in round 1
    assert len(rejects) == c["rejected_duplicate"] + c["rejected_parse"] + c["rejected_invalid"]
    assert c["valid_generation_rate"] == round(6 / 18, 4)
    assert {t["batch_id"] for t in env} == {"e0001-b0000", "e0001-b0001"}
    for t in env:
        assert t["env_output"].startswith("REQUEST:") and t["env_prompt"][0]["role"] == "system"
        assert t["context"]["parent_id"] == t["parent_id"] and t["env_model"] == cfg.env.model
    assert all(r["reason"] for r in rejects)
    assert all(r["domain"] == "tool_call" for r in rejects)  # a mixed run's rejects say whose prompt wrote them
    assert any(r["reason"].startswith("duplicate of") for r in rejects)


def test_shortfall_is_filled_with_seeds_and_said(make_run, monkeypatch):
    root = make_run("generate.tasks_per_epoch=6", "generate.seed_share=0.5", "generate.max_rounds=1")
    patch_engine(monkeypatch, ReplayEngine(lambda conv, k: "nonsense"))
    run = RunDir(root)
    result = generate_tasks.run(run, run.load_config(), 1)
    c = result.manifest["counts"]
    assert c["tasks"] == 6 and c["env_tasks"] == 0 and c["seed_fill"] == 3
    assert c["valid_generation_rate"] == 0.0


def test_seeds_mode_uses_no_environment(make_run, monkeypatch):
    root = make_run("env.mode=seeds", "generate.tasks_per_epoch=5")

    def boom(*a, **k):
        raise AssertionError("seeds mode must not open a model")

    monkeypatch.setattr("genenv_cli.machinery.engines.open_engine", boom)
    run = RunDir(root)
    result = generate_tasks.run(run, run.load_config(), 1)
    tasks = read_jsonl(root / "epochs/0001/tasks.jsonl", "tasks")
    assert result.manifest["counts"]["seed_tasks"] == 5 and all(t["source"] == "seed" for t in tasks)
    assert len({t["task_id"] for t in tasks}) == 5


def test_near_duplicates_are_rejected(make_run, monkeypatch):
    root = make_run("generate.tasks_per_epoch=2", "generate.seed_share=0.0", "generate.variations=2",
                    "generate.near_duplicate=0.5")
    answers = iter([
        'REQUEST: What is the weather in Lisbon today please tell me\nTOOLS: get_weather\nCALLS: [{"name": "get_weather", "arguments": {"city": "Lisbon"}}]',
        'REQUEST: What is the weather in Lisbon today please tell me now\nTOOLS: get_weather\nCALLS: [{"name": "get_weather", "arguments": {"city": "Lisbon"}}]',
    ])
    patch_engine(monkeypatch, ReplayEngine(lambda conv, k: next(answers)))
    run = RunDir(root)
    result = generate_tasks.run(run, run.load_config(), 1)
    rejects = read_jsonl(root / "epochs/0001/tasks.rejects.jsonl", "rejects")
    assert result.manifest["counts"]["rejected_duplicate"] == 1
    assert rejects[0]["reason"] == "near duplicate of e0001-b0000-v0"
    json.dumps(rejects)
