"""`genenv init --seeds FILE`: base tasks from the benchmark's own files, copied into the run, split recorded;
bad records named by file and line with nothing written; and one tiny-model epoch on the bfcl domain."""

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.families.bamboogle.domain import BamboogleDomain
from genenv_cli.rundir.datafiles import read_jsonl
from paths import FIXTURES

runner = CliRunner()
SMALL = ["generate.tasks_per_epoch=6", "generate.variations=2", "generate.seed_share=0.5", "generate.max_new_tokens=24",
         "generate.max_rounds=1", "rollout.group_size=2", "rollout.max_new_tokens=12", "rollout.batch_size=16"]


def invoke(*args, ok=True):
    result = runner.invoke(app, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output + str(result.exception)
    return result


def bfcl_copy(tmp_path: Path, *cats: str) -> list[Path]:
    src = tmp_path / "bfcl"
    (src / "possible_answer").mkdir(parents=True)
    out = []
    for cat in cats:
        name = f"BFCL_v4_{cat}.json"
        shutil.copy(FIXTURES / "bfcl" / name, src / name)
        if (FIXTURES / "bfcl" / "possible_answer" / name).exists():
            shutil.copy(FIXTURES / "bfcl" / "possible_answer" / name, src / "possible_answer" / name)
        out.append(src / name)
    return out


@pytest.mark.slow
def test_bfcl_seeds_are_copied_split_drawn_and_an_epoch_runs_without_the_originals(tmp_path, tiny_model):
    files = bfcl_copy(tmp_path, "simple_python", "parallel", "multiple")
    run = tmp_path / "run"
    sets = [x for s in SMALL for x in ("--set", s)]
    out = invoke("init", run, "--domain", "bfcl", "--seeds", files[0], "--seeds", files[1], "--seeds", files[2],
                 "--agent-model", tiny_model, "--env-model", tiny_model, "--set", "run.seed=7", *sets).output
    assert "train" in out and "validation" in out
    manifest = json.loads((run / "seeds" / "manifest.json").read_text())
    assert manifest["split"].startswith("drawn with run.seed=7") and sum(manifest["counts"].values()) == 8
    assert (run / "seeds" / "files" / "0" / "possible_answer" / files[0].name).is_file()
    assert 'seeds = "seeds/seeds.jsonl"' in (run / "genenv.toml").read_text()
    seeds = [json.loads(x) for x in (run / "seeds" / "seeds.jsonl").read_text().splitlines()]
    assert {s["shape"] for s in seeds} == {"simple", "parallel", "multiple"}
    shutil.rmtree(tmp_path / "bfcl")  # the run needs none of the original files now

    invoke("generate-tasks", "--run", run, "--epoch", "1", "--quiet")
    tasks = read_jsonl(run / "epochs" / "0001" / "tasks.jsonl", "tasks")
    train = {s["id"]: s["payload"] for s in seeds if s["split"] == "train"}
    seeded = [t for t in tasks if t["source"] == "seed"]
    assert seeded and all(t["domain"] == "bfcl" and t["payload"] in train.values() for t in seeded)
    invoke("rollout", "--run", run, "--epoch", "1", "--quiet")
    invoke("score", "--run", run, "--epoch", "1", "--quiet")
    scores = pl.read_parquet(run / "epochs" / "0001" / "scores.parquet")
    assert scores.height == len(tasks) * 2 and scores["reward"].is_between(0.0, 1.0).all()
    stats = pl.read_parquet(run / "epochs" / "0001" / "task_stats.parquet")
    assert set(stats["shape"].to_list()) <= {"simple", "multiple", "parallel", "parallel_multiple", "irrelevance"}


def test_a_malformed_record_names_file_and_line_and_writes_nothing(tmp_path):
    (files,) = [bfcl_copy(tmp_path, "simple_python")]
    lines = files[0].read_text().splitlines()
    files[0].write_text("\n".join(lines[:2] + ['{"id": "simple_python_9", "question": [[{"role": "user"}]], "function": []}']
                                  + lines[2:]) + "\n")
    run = tmp_path / "run"
    result = invoke("init", run, "--domain", "bfcl", "--seeds", files[0], ok=False)
    assert result.exit_code != 0
    assert f"{files[0]}, line 3" in result.output
    assert not (run / "genenv.toml").exists() and not (run / "seeds").exists()


def test_own_seed_format_keeps_the_stated_split(tmp_path):
    src = tmp_path / "mine.jsonl"
    src.write_text('{"id": "a1", "split": "train", "expression": "2 + 3", "answer": 5}\n'
                   '{"id": "a2", "split": "validation", "expression": "4 * 4", "answer": 16}\n'
                   '{"id": "a3", "split": "train", "expression": "9 - 7", "answer": 2}\n')
    invoke("init", tmp_path / "run", "--domain", "arith", "--seeds", src)
    manifest = json.loads((tmp_path / "run" / "seeds" / "manifest.json").read_text())
    assert manifest["split"] == "stated in the seed files" and manifest["counts"] == {"train": 2, "validation": 1}
    from genenv_cli.catalogue.config import load_config
    from genenv_cli.domains.seedfiles import domains_for_run
    from genenv_cli.evals.heldout.benchmark import HeldOut

    held = HeldOut()
    cfg = load_config(tmp_path / "run" / "genenv.toml")
    held.configure(cfg, tmp_path / "run", domains=domains_for_run(cfg, tmp_path / "run"))
    loaded = held.load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path)
    assert [s.id for s in loaded.samples] == ["a2"]  # the held-out set is the run's own validation split
    src.write_text('{"id": "a1", "split": "train", "shape": "weird", "expression": "2 + 3", "answer": 5}\n')
    assert "shape 'weird'" in invoke("init", tmp_path / "run3", "--domain", "arith", "--seeds", src, ok=False).output
    src.write_text('{"id": "a1", "split": "train", "expression": "2 + 3", "answer": 6}\n')
    result = invoke("init", tmp_path / "run2", "--domain", "arith", "--seeds", src, ok=False)
    assert f"{src}, line 1" in result.output and "answer 6 is wrong" in result.output


def test_the_same_seed_gives_the_same_split_and_rerun_needs_force(tmp_path):
    src = FIXTURES / "bamboogle" / "bamboogle.csv"
    invoke("init", tmp_path / "a", "--domain", "bamboogle", "--seeds", src, "--set", "run.seed=3")
    invoke("init", tmp_path / "b", "--domain", "bamboogle", "--seeds", src, "--set", "run.seed=3")
    assert (tmp_path / "a" / "seeds" / "seeds.jsonl").read_bytes() == (tmp_path / "b" / "seeds" / "seeds.jsonl").read_bytes()
    assert "already exists" in invoke("init", tmp_path / "a", "--domain", "bamboogle", "--seeds", src, ok=False).output
    invoke("init", tmp_path / "a", "--domain", "bamboogle", "--seeds", src, "--force", "--validation-share", "0.5")
    assert json.loads((tmp_path / "a" / "seeds" / "manifest.json").read_text())["counts"] == {"train": 3, "validation": 3}


class NoSeeds(BamboogleDomain):
    name = "no-seeds"
    seed_file = ""


def test_a_domain_without_builtin_seeds_requires_seeds(tmp_path, monkeypatch):
    from genenv_cli.catalogue.domains import DOMAINS

    DOMAINS.register("no-seeds", "test_seeds_init:NoSeeds")
    try:
        result = invoke("init", tmp_path / "run", "--domain", "no-seeds", ok=False)
    finally:
        DOMAINS.unregister("no-seeds")
    assert result.exit_code != 0 and "--seeds FILE is required" in result.output
    assert not (tmp_path / "run" / "genenv.toml").exists()
    with pytest.raises(Exception, match="--seeds FILE"):
        NoSeeds().seeds("train")


@pytest.mark.parametrize("domain", ["bfcl", "api-bank", "bamboogle", "travelplanner", "alfworld"])
def test_init_works_out_of_the_box_with_builtin_seeds(tmp_path, domain):
    invoke("init", tmp_path / domain, "--domain", domain)
    assert not (tmp_path / domain / "seeds").exists()


def test_items_that_fail_their_own_check_are_left_out_with_reasons(tmp_path):
    (src,) = bfcl_copy(tmp_path, "simple_python")
    answers = src.parent / "possible_answer" / src.name
    rows = [json.loads(x) for x in answers.read_text().splitlines()]
    name = next(iter(rows[1]["ground_truth"][0]))
    rows[1]["ground_truth"][0][name]["no_such_param"] = [1]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = invoke("init", tmp_path / "run", "--domain", "bfcl", "--seeds", src).output
    assert "1 items left out" in out
    manifest = json.loads((tmp_path / "run" / "seeds" / "manifest.json").read_text())
    assert [s["id"] for s in manifest["skipped"]] == [rows[1]["id"]]
    # BFCL's own rule decides: an undocumented parameter given without "" allowed cannot be left out
    assert "Unexpected parameter: 'no_such_param'" in manifest["skipped"][0]["reason"]
    assert sum(manifest["counts"].values()) == len(rows) - 1
    (rel,) = bfcl_copy(tmp_path / "b", "live_relevance")
    result = invoke("init", tmp_path / "run2", "--domain", "bfcl", "--seeds", rel, ok=False)
    assert result.exit_code != 0 and "none of its" in result.output and not (tmp_path / "run2" / "seeds").exists()
