"""generate-tasks on the benchmark-family domains with a replayed environment: items in the benchmark's format
are accepted with their shape, self-inconsistent ones are rejected with the reason, and the environment's prompt
shows the example item in the benchmark's format."""

import itertools
import json

import pytest

from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import read_jsonl
from genenv_cli.stages import generate_tasks
from replay import ReplayEngine, patch_engine
from travel_item import ITEM as TP_ITEM

N = itertools.count()

FN = {"name": "get_weather", "description": "Weather in a city.",
      "parameters": {"type": "dict", "properties": {"city": {"type": "string", "description": "City."}},
                     "required": ["city"]}}
API = {"name": "QueryStock", "description": "Stock price.",
       "input_parameters": {"stock_code": {"type": "str", "description": "Code."}}, "output_parameters": {}}


def good(domain: str) -> str:
    i = next(N)
    if domain == "bfcl":
        return json.dumps({"question": [[{"role": "user", "content": f"What is the weather in Town{i} today?"}]],
                           "function": [FN], "ground_truth": [{"get_weather": {"city": [f"Town{i}"]}}]})
    if domain == "api-bank":
        return json.dumps({"apis": [API], "dialogue": [{"role": "User", "text": f"Price of stock S{i} please."},
                                                       {"role": "API", "api_name": "QueryStock",
                                                        "param_dict": {"stock_code": f"S{i}"}}]})
    if domain == "alfworld":
        return json.dumps({"task_type": "pick_and_place_simple",
                           "observation": f"You see a shelf {i + 1} and a desk 1.\nYour task is to: put a pen in desk.",
                           "trajectory": [{"action": f"go to shelf {i + 1}", "observation": "You see a pen 1."}],
                           "admissible_commands": [f"take pen 1 from shelf {i + 1}", "go to desk 1", "look"],
                           "action": f"take pen 1 from shelf {i + 1}"})
    if domain == "travelplanner":
        budget = 900 + 100 * i  # differently worded queries: templated ones are near duplicates of each other
        query = [f"Please plan a 3-day trip for one person from Tulsa to Omaha on a budget of ${budget:,}.",
                 f"I live in Tulsa and want to spend 3 days in Omaha in early April; I can afford ${budget:,}.",
                 f"Solo traveller, leaving Tulsa: a three-day visit to Omaha, with ${budget:,} at most."][i % 3]
        return json.dumps(dict(TP_ITEM, budget=budget, query=query))
    return json.dumps({"Question": f"What is the capital of the country where landmark number {i} stands?",
                       "Answer": "Athens", "Facts": [f"Landmark number {i} stands in Greece.",
                                                     "The capital of Greece is Athens."], "Bridge": "Greece"})


BAD = {"bfcl": ('{"question": "What is the weather in Rome?", "function": [], "ground_truth": []}', "invalid"),
       "api-bank": ('{"apis": [], "dialogue": [{"role": "User", "text": "hello there"}]}', "invalid"),
       "bamboogle": ('{"Question": "What is the capital of Greece?", "Answer": "Sparta", "Facts": '
                     '["The Acropolis is in Greece.", "The capital of Greece is Athens."], "Bridge": "Greece"}',
                     "invalid"),
       "alfworld": ('{"task_type": "pick_and_place_simple", "observation": "Your task is to: put a pen in desk.", '
                    '"trajectory": [], "admissible_commands": ["go to desk 1", "look"], "action": "go to shelf 1"}',
                    "invalid"),
       "travelplanner": (json.dumps(dict(TP_ITEM, visiting_city_number=2)), "invalid: a 3-day trip visits 1")}
FORMAT = {"bfcl": '"ground_truth"', "api-bank": '"dialogue"', "bamboogle": '"Question"',
          "alfworld": '"admissible_commands"', "travelplanner": '"visiting_city_number"'}


@pytest.mark.parametrize("domain", ["bfcl", "api-bank", "bamboogle", "travelplanner", "alfworld"])
def test_generate_tasks_accepts_consistent_items_and_rejects_the_rest(make_run, monkeypatch, domain):
    root = make_run("generate.tasks_per_epoch=6", "generate.seed_share=0.5", "generate.variations=2",
                    "generate.max_rounds=3", domain=domain)
    engine = ReplayEngine(lambda conv, k: good(domain) if k == 0 else "Here you go:\n" + BAD[domain][0])
    patch_engine(monkeypatch, engine)
    run = RunDir(root)
    result = generate_tasks.run(run, run.load_config(), 1)
    tasks = read_jsonl(root / "epochs/0001/tasks.jsonl", "tasks")
    rejects = read_jsonl(root / "epochs/0001/tasks.rejects.jsonl", "rejects")
    env = [t for t in tasks if t["source"] == "env"]
    assert len(tasks) == 6 and len(env) == 3 and result.manifest["counts"]["accepted"] >= 3
    from genenv_cli.catalogue.domains import get_domain

    dom = get_domain(domain)
    assert all(t["domain"] == domain and t["shape"] in dom.shapes and dom.check_payload(t["payload"]) is None
               for t in tasks)
    assert rejects and all(r["reason"].startswith(BAD[domain][1]) for r in rejects)
    prompt = env[0]["env_prompt"]
    assert prompt[0]["role"] == "system" and "Aim for an item" in prompt[0]["content"]
    assert "Example item:\n{" in prompt[-1]["content"] and FORMAT[domain] in prompt[-1]["content"]
