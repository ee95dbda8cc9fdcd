"""The `bfcl` domain: its environment parser (each broken item rejected for its reason), the structure of its
seed set and the official files it reads. The contract every domain keeps (seeds self-consistent, gold scores 1,
the score equal to `genenv evaluate --bench bfcl`'s verdict item for item) is test_domain_contract.py."""

import json
import shutil

import pytest

import paths
from domain_cases import seed_context
from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import Reject

DOMAIN = "bfcl"
FIXTURES = paths.FIXTURES / "bfcl"

WEATHER = {"name": "get_weather", "description": "Weather in a city.",
           "parameters": {"type": "dict", "properties": {"city": {"type": "string", "description": "City."},
                                                         "days": {"type": "integer", "description": "Days."}},
                          "required": ["city"]}}


def item(question="What is the weather in Rome for the next 2 days?", truth=None, functions=None):
    return json.dumps({"question": [[{"role": "user", "content": question}]], "function": functions or [WEATHER],
                       "ground_truth": truth if truth is not None else [{"get_weather": {"city": ["Rome"], "days": [2]}}]})


def test_builtin_seeds_cover_every_shape_and_refusing_is_right_only_when_nothing_fits(dom):
    seeds = dom.seeds("train") + dom.seeds("validation")
    assert len(seeds) >= 20 and {s.shape for s in seeds} == set(dom.shapes)
    for s in seeds:
        assert dom.score(s.payload, "I cannot help with that.").reward == (1.0 if s.shape == "irrelevance" else 0.0)


def test_env_output_good_items(dom):
    payload, shape = dom.parse_env_output("Here it is:\n```json\n" + item() + "\n```", seed_context(dom))
    assert shape == "simple" and payload["category"] == "simple_python"
    assert dom.score(payload, "[get_weather(city='Rome', days=2)]").reward == 1.0
    assert dom.score(payload, "[get_weather(city='Rome', days=3)]").reward == 0.0
    two = item("Weather in Rome and in Oslo?", [{"get_weather": {"city": ["Rome"]}}, {"get_weather": {"city": ["Oslo"]}}])
    assert dom.parse_env_output(two, seed_context(dom))[1] == "parallel"
    none = item("Who wrote Hamlet?", [])
    assert dom.parse_env_output(none, seed_context(dom))[1] == "irrelevance"


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
        dom.parse_env_output(text, seed_context(dom))
    assert reason in str(exc.value)


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
