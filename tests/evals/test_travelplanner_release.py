"""TravelPlanner on the real release (../shared/data/travelplanner: the official repository's sandbox database,
train_ref_info.jsonl and std_travelplanner.jsonl): the training split's fields derived from the query text count
the official evaluator's 105 hard constraints, the 45 annotated reference plans pass every constraint, each
planted error fails the constraint it names, genenv's verdicts equal the official evaluator's recorded verdicts
plan by plan (experiments/results/travelplanner_official/plans.jsonl), `genenv evaluate` scores the release, and
the travelplanner domain's seeds come from it with the suite's prompts and verdicts. Skipped where the release
is absent (a user's clone)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from experiments.travelplanner_official import QUERY_FIELDS, RESULTS, genenv_verdict
from experiments.travelplanner_plants import PLANTS, cases
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.families.travelplanner.benchmark import TravelPlanner, sample_database
from genenv_cli.families.travelplanner.checks import COMMONSENSE, evaluate_plan, hard_total
from paths import ROOT

DATA = ROOT.parent / "shared" / "data" / "travelplanner"
pytestmark = [pytest.mark.skipif(not (DATA / "std_travelplanner.jsonl").is_file(),
                                 reason=f"the real TravelPlanner release is absent ({DATA}; a user's clone has none)"),
              pytest.mark.slow]  # about a minute on 2 cores: the slow tier, which CI runs


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    suite = TravelPlanner()
    data = suite.load(data=DATA, split=None, version=None, protocol="official",
                      cache_dir=tmp_path_factory.mktemp("cache"))
    return suite, data


@pytest.fixture(scope="module")
def all_cases(loaded):
    _, data = loaded
    dbs = {id(s.gold): sample_database(s) for s in data.samples}
    queries = [s.gold for s in data.samples]
    plans = [s.gold["annotated_plan"] for s in data.samples]
    return [(n, c, dbs[id(queries[n])]) for n, c in cases(queries, plans, lambda q: dbs[id(q)])]


def test_the_release_loads_as_the_training_split_with_derived_fields(loaded):
    _, data = loaded
    golds = [s.gold for s in data.samples]
    assert len(golds) == 45 and "train" in data.version and "flights from its reference information" in data.version
    assert [g["level"] for g in golds] == ["easy"] * 15 + ["medium"] * 15 + ["hard"] * 15
    # the official evaluator's train denominator for the hard constraints
    assert sum(hard_total(g["level"], g["local_constraint"]) for g in golds) == 105
    first, last = golds[0], golds[-1]
    assert (first["org"], first["dest"], first["days"], first["people_number"], first["budget"]) == \
        ("St. Petersburg", "Rockford", 3, 1, 1700)
    assert first["date"] == ["2022-03-16", "2022-03-17", "2022-03-18"]
    assert (last["org"], last["dest"], last["visiting_city_number"], last["people_number"]) == \
        ("Minneapolis", "Ohio", 3, 2)
    assert last["local_constraint"] == {"house rule": "pets", "cuisine": ["American", "Mediterranean", "Chinese",
                                                                          "Italian"],
                                        "room type": None, "transportation": "no flight"}
    # "a party of 5" is the group, not a house rule: that query's rule is its pets
    assert golds[40]["people_number"] == 5 and golds[40]["local_constraint"]["house rule"] == "pets"
    # flights come from each query's reference information
    assert [f["Flight Number"] for f in first["flights"]] == ["F3573659", "F3573120"]


def test_the_reference_plans_pass_every_constraint(loaded):
    suite, data = loaded
    for s in data.samples:
        cs, hard, _ = evaluate_plan(s.gold, s.gold["annotated_plan"], sample_database(s))
        assert all(ok for ok, _ in cs.values()), (s.id, cs)
        assert hard is not None and all(ok is not False for ok, _ in hard.values()), (s.id, hard)
    preds = [{"id": s.id, "output": "```json\n" + json.dumps(s.gold["annotated_plan"]) + "\n```"}
             for s in data.samples]
    verdicts = [suite.score(s, p["output"], "official") for s, p in zip(data.samples, preds, strict=True)]
    overall = suite.summarize(data.samples, verdicts, "official")["overall"]
    assert (overall["final_pass_rate"], overall["hard_passed"], overall["hard_total"]) == (100.0, 105, 105)
    assert overall["commonsense_passed"] == overall["commonsense_total"] == 360


def test_each_planted_error_fails_the_constraint_it_names(all_cases):
    failed: dict[str, int] = {}
    for n, c, db in all_cases:
        if c.constraint is None:
            continue
        v = genenv_verdict({k: c.query[k] for k in QUERY_FIELDS}, c.plan, db)
        value = v["commonsense"][c.constraint] if c.constraint in COMMONSENSE else (v["hard"] or {}).get(c.constraint)
        assert value is False, (n + 1, c.name, v)
        failed[c.name] = failed.get(c.name, 0) + 1
    assert set(failed) == set(PLANTS)
    # every query has a fake restaurant and accommodation; 17 reference plans fly
    assert failed["fake_restaurant"] == failed["fake_accommodation"] == 45 and failed["fake_flight"] == 17


def test_verdicts_equal_the_official_evaluators_recorded_ones(all_cases):
    """The official evaluator's verdicts, recorded by experiments/travelplanner_official.py on these plans."""
    recorded = [json.loads(x) for x in (RESULTS / "plans.jsonl").read_text().splitlines()]
    models = [r for r in recorded if r["case"].startswith("model:")]  # a model's plans, recorded with the plan
    recorded = [r for r in recorded if not r["case"].startswith("model:")]
    assert len(recorded) == len(all_cases) and len(recorded) + len(models) >= 200
    for (n, c, db), rec in zip(all_cases, recorded, strict=True):
        assert (rec["query"], rec["case"]) == (n + 1, c.name)
        assert genenv_verdict({k: c.query[k] for k in QUERY_FIELDS}, c.plan, db) == rec["official"], (n + 1, c.name)
    dbs = {(n + 1): db for n, c, db in all_cases if c.name == "reference"}
    queries = {(n + 1): c.query for n, c, _ in all_cases if c.name == "reference"}
    for rec in models:
        q = {k: queries[rec["query"]][k] for k in QUERY_FIELDS}
        assert genenv_verdict(q, rec["plan"], dbs[rec["query"]]) == rec["official"], (rec["query"], rec["case"])


def test_a_flight_of_another_query_is_not_in_this_querys_sandbox(loaded):
    """Without the flights table a query sees only its reference information's flights."""
    _, data = loaded
    s1, s5 = data.samples[0], data.samples[4]
    plan = json.loads(json.dumps(s1.gold["annotated_plan"]))
    other = s5.gold["flights"][0]
    plan[0]["transportation"] = plan[0]["transportation"].replace("F3573659", other["Flight Number"])
    assert sample_database(s5).flight_in_sandbox(other["Flight Number"], other["OriginCityName"],
                                                 other["DestCityName"])
    assert not sample_database(s1).flights(other["Flight Number"])
    cs, _, _ = evaluate_plan(s1.gold, plan, sample_database(s1))
    assert cs["is_valid_information_in_sandbox"][0] is False


def test_evaluate_scores_the_release(tmp_path, loaded):
    _, data = loaded
    preds = tmp_path / "refs.jsonl"
    preds.write_text("".join(json.dumps({"id": s.id, "output": "```json\n" + json.dumps(s.gold["annotated_plan"])
                                         + "\n```"}) + "\n" for s in data.samples))
    out = subprocess.run([sys.executable, "-m", "genenv_cli", "evaluate", "--bench", "travelplanner", "--data",
                          str(DATA), "--predictions", str(preds), "--json"], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["n"] == 45 and summary["headline"] == {"name": "final_pass_rate", "value": 100.0}


def test_the_domain_seeds_are_the_training_queries_with_the_suites_prompts_and_verdicts(loaded, tmp_path,
                                                                                      monkeypatch):
    from genenv_cli.catalogue.domains import get_domain

    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    suite, data = loaded
    res = CliRunner().invoke(app, ["init", str(tmp_path / "run"), "--domain", "travelplanner", "--seeds", str(DATA)])
    assert res.exit_code == 0, res.output
    imported = [json.loads(x) for x in (tmp_path / "run" / "seeds" / "seeds.jsonl").read_text().splitlines()]
    assert len(imported) == 45
    dom = get_domain("travelplanner")
    seeds = dom.read_seeds(DATA)
    assert len(seeds) == 45 and dom.seed_skips == []
    for task, s in zip(seeds, data.samples, strict=True):
        assert task.id == f"travelplanner-{s.gold['level']}-{s.id}"
        item = dom.sample(task.payload)
        assert item.messages == s.messages
        out = "```json\n" + json.dumps(s.gold["annotated_plan"]) + "\n```"
        mine, theirs = suite.score(item, out, "official"), suite.score(s, out, "official")
        assert mine.correct and theirs.correct and mine.scores == theirs.scores, task.id
        broken = json.loads(json.dumps(s.gold["annotated_plan"]))
        broken[1]["lunch"] = "Genenv Phantom Diner, " + broken[1]["current_city"].split(" to ")[-1]
        out = "```json\n" + json.dumps(broken) + "\n```"
        assert suite.score(item, out, "official").scores == suite.score(s, out, "official").scores, task.id

