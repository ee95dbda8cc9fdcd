"""The `bfcl` domain: hand-written BFCL items in the official format, its self-consistency check, its environment
parser, and its score agreeing with `genenv evaluate --bench bfcl` item for item."""

import json
import shutil
from pathlib import Path

import pytest

from genenv_cli.domains import get_domain
from genenv_cli.domains.base import EnvContext, Reject
from genenv_cli.domains.bfcl import gold_answer
from genenv_cli.errors import InputError
from genenv_cli.evals.bfcl import BFCL
from genenv_cli.plaintext import plain_answer_problem

FIXTURES = Path(__file__).parent / "fixtures" / "bfcl"
CATS = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple", "live_multiple",
        "live_parallel", "live_parallel_multiple", "live_irrelevance", "simple_javascript", "simple_java"]

WEATHER = {"name": "get_weather", "description": "Weather in a city.",
           "parameters": {"type": "dict", "properties": {"city": {"type": "string", "description": "City."},
                                                         "days": {"type": "integer", "description": "Days."}},
                          "required": ["city"]}}


@pytest.fixture(scope="module")
def dom():
    return get_domain("bfcl")


def ctx(dom):
    s = dom.seeds("train")[0]
    return EnvContext(s.id, s.shape, s.payload, None, None, [])


def item(question="What is the weather in Rome for the next 2 days?", truth=None, functions=None):
    return json.dumps({"question": [[{"role": "user", "content": question}]], "function": functions or [WEATHER],
                       "ground_truth": truth if truth is not None else [{"get_weather": {"city": ["Rome"], "days": [2]}}]})


def test_builtin_seeds_are_self_consistent_and_gold_scores_one(dom):
    seeds = dom.seeds("train") + dom.seeds("validation")
    assert len(seeds) >= 20 and dom.seeds("validation")
    assert {s.shape for s in seeds} == set(dom.shapes)
    for s in seeds:
        assert dom.check_payload(s.payload) is None, s.id
        assert dom.score(s.payload, gold_answer(s.payload)).reward == 1.0, s.id
        assert dom.score(s.payload, "I cannot help with that.").reward == (1.0 if s.shape == "irrelevance" else 0.0)


def test_env_output_good_items(dom):
    payload, shape = dom.parse_env_output("Here it is:\n```json\n" + item() + "\n```", ctx(dom))
    assert shape == "simple" and payload["category"] == "simple_python"
    assert dom.score(payload, "[get_weather(city='Rome', days=2)]").reward == 1.0
    assert dom.score(payload, "[get_weather(city='Rome', days=3)]").reward == 0.0
    two = item("Weather in Rome and in Oslo?", [{"get_weather": {"city": ["Rome"]}}, {"get_weather": {"city": ["Oslo"]}}])
    assert dom.parse_env_output(two, ctx(dom))[1] == "parallel"
    none = item("Who wrote Hamlet?", [])
    assert dom.parse_env_output(none, ctx(dom))[1] == "irrelevance"


@pytest.mark.parametrize("text, reason", [
    ("no json here", "parse: no JSON object"),
    ('{"question": "Weather in Rome please?", "function": []}', "parse: the item has no ground_truth"),
    (item(truth=[{"get_weather": {"city": ["Rome"], "days": ["two"]}}]), "documented as integer"),
    (item(truth=[{"get_weather": {"city": [["Rome"]]}}]), "documented as string"),
    (item(truth=[{"get_weather": {"city": ["Rome"], "hours": [3]}}]), "has no parameter 'hours'"),
    (item(truth=[{"get_weather": {"days": [3]}}]), "required parameter get_weather.city"),
    (item(truth=[{"get_forecast": {"city": ["Rome"]}}]), "no function document defines"),
    (item(truth=[{"get_weather": {"city": "Rome"}}]), "must list its allowed values"),
    (item(question="Hi?"), "at least 8 characters"),
    (item(functions=[{"name": "f", "parameters": {"properties": {"x": {"type": "integer"}}, "required": ["y"]}}],
          truth=[{"f": {"x": [1]}}]), "not documented"),
])
def test_env_output_broken_items_are_rejected_with_reasons(dom, text, reason):
    with pytest.raises(Reject) as exc:
        dom.parse_env_output(text, ctx(dom))
    assert reason in str(exc.value)


def _outputs(sample, payload):
    gold = gold_answer(payload)
    outs = [gold, "", "I can't do that.", "[unknown_function(x=1)]", gold.replace("[", "").replace("]", ""),
            '<tool_call>{"name": "x", "arguments": {}}</tool_call>']
    if payload["ground_truth"]:
        name = next(iter(payload["ground_truth"][0]))
        outs.append(f"[{name}()]")
        outs.append(gold + ", " + gold)
        outs.append(gold.replace("'", '"').upper())
    return outs


def test_domain_score_equals_the_suite_verdict_item_for_item(dom):
    suite = BFCL()
    loaded = suite.load(data=FIXTURES, split=",".join(CATS), version=None, protocol="official", cache_dir=FIXTURES)
    assert len(loaded.samples) >= 20
    checked = 0
    for sample in loaded.samples:
        payload = dom.seed_from_sample(sample).payload
        assert dom.sample(payload).messages == sample.messages, sample.id
        for out in _outputs(sample, payload):
            correct = suite.score(sample, out, "official").correct
            if not payload["ground_truth"]:  # training asks more of "no call": a plain-text answer (docs/domains.md)
                correct = correct and plain_answer_problem(out) is None
            assert dom.score(payload, out).reward == float(correct), (sample.id, out)
            checked += 1
    assert checked > 150


def test_read_seeds_reads_the_official_files_and_names_bad_lines(dom, tmp_path):
    tasks = dom.read_seeds(FIXTURES / "BFCL_v4_parallel.json")
    assert [t.shape for t in tasks] == ["parallel"] * len(tasks) and all(t.split == "" for t in tasks)
    bad = tmp_path / "BFCL_v4_simple_python.json"
    lines = (FIXTURES / "BFCL_v4_simple_python.json").read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1][:40]] + lines[2:]) + "\n")
    (tmp_path / "possible_answer").mkdir()
    shutil.copy(FIXTURES / "possible_answer" / bad.name, tmp_path / "possible_answer" / bad.name)
    with pytest.raises(InputError, match=r"BFCL_v4_simple_python.json, line 2"):
        dom.read_seeds(bad)
