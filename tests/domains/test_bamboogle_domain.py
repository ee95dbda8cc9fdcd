"""The `bamboogle` domain: the answer-chain check that keeps wrong gold answers out (and the hand-checked sample
docs/domains.md reports), its reader of the official formats, and its hop-type shapes. The contract every domain
keeps (seeds self-consistent, gold scores 1, the score equal to `genenv evaluate --bench bamboogle`'s verdict
item for item) is test_domain_contract.py."""

import json

import pytest

from domain_cases import seed_context
from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import Reject
from genenv_cli.families.bamboogle.benchmark import Bamboogle
from genenv_cli.families.bamboogle.domain import shape_of
from paths import FIXTURES

DOMAIN = "bamboogle"


def rec(q="What is the capital of the country where the Acropolis is located?", a="Athens",
        f1="The Acropolis is located in Greece.", f2="The capital of Greece is Athens.", b="Greece"):
    return json.dumps({"Question": q, "Answer": a, "Facts": [f1, f2], "Bridge": b})


def test_builtin_seeds_carry_two_fact_chains(dom):
    seeds = dom.seeds("train") + dom.seeds("validation")
    assert len(seeds) >= 20
    for s in seeds:
        assert len(s.payload["facts"]) == 2 and s.payload["bridge"], s.id
        assert dom.score(s.payload, "<answer> I don't know </answer>").reward == 0.0


def test_env_output_good_item(dom):
    payload, shape = dom.parse_env_output("```json\n" + rec() + "\n```", seed_context(dom))
    assert shape == "place" and payload["answer"] == ["Athens"] and payload["bridge"] == "Greece"
    assert dom.score(payload, "The Acropolis is in Greece. <answer>Athens</answer>").reward == 1.0
    assert dom.score(payload, "<answer>Sparta</answer>").reward == 0.0


@pytest.mark.parametrize("text, reason", [
    ("Athens", "parse: no JSON object"),
    (json.dumps({"Question": "Where is the Acropolis located today?"}), "Answer"),
    (json.dumps({"Question": "What is the capital of Greece today?", "Answer": "Athens"}), "Facts and Bridge"),
    (rec(a="Sparta"), "not stated in the second fact"),
    (rec(q="What is the capital of Greece, home of the Acropolis?"), "names the bridge"),
    (rec(a="Greece", f2="Greece is a country whose capital is Athens."), "the answer is the bridge"),
    (rec(f1="The Acropolis of Athens is in Greece."), "already in the first fact"),
    (rec(b="Italy"), "must appear in both facts"),
    (rec(q="In what year was the capital of the country of the Acropolis founded?"), "asks for a date"),
    (rec(f1="Greece exists.", f2="Athens is the capital of Greece."), "at least four words"),
])
def test_env_output_broken_items_are_rejected_with_reasons(dom, text, reason):
    with pytest.raises(Reject) as exc:
        dom.parse_env_output(text, seed_context(dom))
    assert reason in str(exc.value)


def test_hand_checked_sample_wrong_gold_rate(dom):
    """The numbers docs/domains.md reports: 30 environment-style items whose gold answers were checked by hand."""
    rows = [json.loads(x) for x in (FIXTURES / "bamboogle_env" / "hand_checked.jsonl").read_text().splitlines()]
    accepted = {True: 0, False: 0}
    through = []
    for r in rows:
        try:
            dom.parse_env_output(r["output"], seed_context(dom))
        except Reject:
            continue
        accepted[r["gold_correct"]] += 1
        if not r["gold_correct"]:
            through.append(r["kind"])
    assert sum(r["gold_correct"] for r in rows) == 15 and len(rows) == 30
    assert accepted[True] == 15
    assert accepted[False] == 4 and sorted(through) == ["false fact"] * 3 + ["question off the chain"]


@pytest.mark.parametrize("name", ["bamboogle.csv", "bamboogle.json", "test.jsonl"])
def test_read_seeds_reads_every_official_format(dom, name):
    loaded = Bamboogle().load(data=FIXTURES / "bamboogle" / name, split=None, version=None, protocol="official",
                              cache_dir=FIXTURES)
    tasks = dom.read_seeds(FIXTURES / "bamboogle" / name)
    assert [dom.agent_messages(t.payload) for t in tasks] == [s.messages for s in loaded.samples]


def test_read_seeds_names_the_bad_line(dom, tmp_path):
    bad = tmp_path / "test.jsonl"
    lines = (FIXTURES / "bamboogle" / "test.jsonl").read_text().splitlines()
    bad.write_text("\n".join(lines[:2] + ['{"question": "Who?", "golden_answers": ["x"]'] + lines[2:]) + "\n")
    with pytest.raises(InputError, match=r"test.jsonl, line 3"):
        dom.read_seeds(bad)


def test_shapes_are_hop_types():
    assert shape_of("Who wrote the play?", ["Shakespeare"]) == "person"
    assert shape_of("In what year was the author born?", ["1775"]) == "date"
    assert shape_of("How many strings does it have?", ["six"]) == "number"
    assert shape_of("What is the capital of the country?", ["Lima"]) == "place"
    assert shape_of("What is the currency of the country?", ["yen"]) == "other"
