"""genenv evaluate: listing, running a tiny model, scoring predictions, exporting, episodes, held-out success."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from paths import FIXTURES

runner = CliRunner()
FIX = FIXTURES


def invoke(*args, ok=True):
    r = runner.invoke(app, list(args))
    if ok:
        assert r.exit_code == 0, r.output + str(r.exception)
    return r


def test_list_shows_every_benchmark():
    rows = json.loads(invoke("evaluate", "--list", "--json").stdout)
    assert {r["name"] for r in rows} >= {"bfcl", "api-bank", "alfworld", "bamboogle", "travelplanner", "heldout"}
    assert all(r["sources"] for r in rows)
    assert "bfcl" in invoke("evaluate", "--list").stdout


@pytest.mark.slow
def test_tiny_model_end_to_end_writes_results(make_run, tiny_model):
    run = make_run()
    out = invoke("evaluate", "--bench", "bamboogle", "--data", str(FIX / "bamboogle" / "bamboogle.csv"),
                 "--model", str(tiny_model), "--run", str(run), "--set", "evaluate.max_new_tokens=8", "--json")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    result = json.loads(Path(summary["path"]).read_text())
    assert result["bench"] == "bamboogle" and result["n"] == 6 and result["epoch"] is None
    assert result["headline"]["name"] == "em" and 0.0 <= result["headline"]["value"] <= 100.0
    assert result["data_fingerprint"] and result["model"]["path"] == str(tiny_model)
    lines = Path(summary["path"].replace(".json", ".samples.jsonl")).read_text().splitlines()
    rec = json.loads(lines[0])
    assert len(lines) == 6 and set(rec) >= {"id", "output", "parsed", "correct", "reason"}


def test_predictions_are_scored_without_a_model(tmp_path, make_run):
    run = make_run()
    exported = tmp_path / "inputs.jsonl"
    invoke("evaluate", "--bench", "bamboogle", "--data", str(FIX / "bamboogle" / "bamboogle.csv"), "--export",
           str(exported), "--run", str(run))
    items = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [i["id"] for i in items] == [str(k) for k in range(6)] and items[0]["messages"]
    preds = tmp_path / "preds.jsonl"
    gold = [i["gold"] if isinstance(i["gold"], str) else i["gold"][0] for i in items]
    # five right, the last one wrong
    preds.write_text("".join(json.dumps({"id": i["id"], "output": f"<answer>{a}</answer>"}) + "\n"
                             for i, a in zip(items, gold[:5] + ["nobody knows"], strict=True)))
    out = invoke("evaluate", "--bench", "bamboogle", "--data", str(FIX / "bamboogle" / "bamboogle.csv"),
                 "--predictions", str(preds), "--run", str(run), "--json")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["model_tag"] == "pred-preds" and summary["headline"]["value"] == pytest.approx(500 / 6)


def test_bad_predictions_name_the_line(tmp_path, make_run):
    run = make_run()
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "0", "output": "x"}\n{"id": "1", "output": 5}\n')
    r = invoke("evaluate", "--bench", "bamboogle", "--data", str(FIX / "bamboogle" / "bamboogle.csv"),
               "--predictions", str(preds), "--run", str(run), ok=False)
    assert r.exit_code == 2 and "p.jsonl, line 2" in r.stderr
    preds.write_text('{"id": "nope", "output": "x"}\n')
    r = invoke("evaluate", "--bench", "bamboogle", "--data", str(FIX / "bamboogle" / "bamboogle.csv"),
               "--predictions", str(preds), "--run", str(run), ok=False)
    assert "not bamboogle sample ids" in r.stderr


def test_no_data_offline_is_a_clear_error(make_run):
    r = invoke("evaluate", "--bench", "bamboogle", "--model", "x", "--run", str(make_run()), ok=False)
    assert r.exit_code == 2 and "--data" in r.stderr and "GENENV_OFFLINE" in r.stderr
    r = invoke("evaluate", "--bench", "bfcll", ok=False)
    assert "Did you mean `bfcl`" in r.stderr


@pytest.mark.slow
def test_alfworld_episodes_with_a_tiny_model(make_run, tiny_model):
    run = make_run()
    out = invoke("evaluate", "--bench", "alfworld", "--data", str(FIX / "alfworld"), "--model", str(tiny_model),
                 "--run", str(run), "--limit", "2", "--set", "evaluate.max_steps=2", "--set",
                 "evaluate.max_new_tokens=6", "--json")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    result = json.loads(Path(summary["path"]).read_text())
    assert result["n"] == 2 and result["headline"]["name"] == "success_rate"
    samples = [json.loads(x) for x in Path(summary["path"].replace(".json", ".samples.jsonl")).read_text().splitlines()]
    assert all(s["scores"]["steps"] == 2.0 and "2-step limit" in s["reason"] for s in samples)


@pytest.mark.slow
def test_heldout_success_on_the_domain_validation_split(make_run, tiny_model):
    run = make_run()
    out = invoke("evaluate", "--bench", "heldout", "--run", str(run), "--model", str(tiny_model), "--limit", "5",
                 "--set", "evaluate.max_new_tokens=6", "--json")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    result = json.loads(Path(summary["path"]).read_text())
    assert result["n"] == 5 and result["headline"]["name"] == "success_rate"
    assert set(result["summary"]["categories"]) <= {"single", "conversion", "multiple", "parallel", "no_tool"}


@pytest.mark.slow
def test_a_result_made_with_other_settings_is_not_overwritten_silently(make_run, tiny_model):
    """The same file name with other settings: refused before any model is loaded, naming what differs; --label
    writes beside it, --force replaces it, the same settings replace it saying so. The answer length defaults to
    what the benchmark needs: for heldout, the run's rollout.max_new_tokens."""
    run = Path(make_run(domain="arith"))
    base = ["evaluate", "--bench", "heldout", "--epoch", "0", "--limit", "3", "--run", str(run), "--json"]
    first = json.loads(invoke(*base).stdout.strip().splitlines()[-1])
    path = Path(first["path"])
    result = json.loads(path.read_text())
    assert result["sampling"]["max_new_tokens"] == 12  # rollout.max_new_tokens of the test runs (tiny.SMALL)
    before = path.read_bytes()
    refused = invoke(*base, "--set", "evaluate.max_new_tokens=20", "--set", "evaluate.temperature=0.5", ok=False)
    assert refused.exit_code == 2 and path.read_bytes() == before
    assert (f"{path} holds an evaluation made with other settings (evaluate.temperature 0.0 → 0.5, "
            f"evaluate.max_new_tokens 12 → 20). Pass --force to replace it, or --label NAME") in refused.output
    assert "loading" not in refused.output  # refused before the model was loaded
    beside = json.loads(invoke(*base, "--set", "evaluate.max_new_tokens=20", "--label", "long").stdout.splitlines()[-1])
    assert Path(beside["path"]).name == path.name.replace(".json", ".long.json") and path.read_bytes() == before
    assert json.loads(Path(beside["path"]).read_text())["sampling"]["max_new_tokens"] == 20
    invoke(*base, "--set", "evaluate.max_new_tokens=20", "--force")
    assert json.loads(path.read_text())["sampling"]["max_new_tokens"] == 20
    again = invoke(*base[:-1], "--set", "evaluate.max_new_tokens=20")
    assert "replacing" in again.output and "(made with the same settings)" in again.output
    assert "--label 'a b'" in invoke(*base, "--label", "a b", ok=False).output
