"""The `bamboogle` domain: Bamboogle records in the official formats, the answer-chain check that keeps wrong gold
answers out (and the hand-checked sample docs/domains.md reports), and its score agreeing with `genenv evaluate
--bench bamboogle` item for item."""

import json
from pathlib import Path

import pytest

from genenv_cli.domains import get_domain
from genenv_cli.domains.bamboogle import shape_of
from genenv_cli.domains.base import EnvContext, Reject
from genenv_cli.errors import InputError
from genenv_cli.evals.bamboogle.benchmark import Bamboogle

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def dom():
    return get_domain("bamboogle")


def ctx(dom):
    s = dom.seeds("train")[0]
    return EnvContext(s.id, s.shape, s.payload, None, None, [])


def rec(q="What is the capital of the country where the Acropolis is located?", a="Athens",
        f1="The Acropolis is located in Greece.", f2="The capital of Greece is Athens.", b="Greece"):
    return json.dumps({"Question": q, "Answer": a, "Facts": [f1, f2], "Bridge": b})


def test_builtin_seeds_carry_checked_chains_and_gold_scores_one(dom):
    seeds = dom.seeds("train") + dom.seeds("validation")
    assert len(seeds) >= 20 and dom.seeds("validation")
    for s in seeds:
        assert dom.check_payload(s.payload) is None, s.id
        answer = s.payload["answer"][0]
        assert dom.score(s.payload, f"<answer> {answer} </answer>").reward == 1.0
        assert dom.score(s.payload, "<answer> I don't know </answer>").reward == 0.0


def test_env_output_good_item(dom):
    payload, shape = dom.parse_env_output("```json\n" + rec() + "\n```", ctx(dom))
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
        dom.parse_env_output(text, ctx(dom))
    assert reason in str(exc.value)


def test_hand_checked_sample_wrong_gold_rate(dom):
    """The numbers docs/domains.md reports: 30 environment-style items whose gold answers were checked by hand."""
    rows = [json.loads(x) for x in (FIXTURES / "bamboogle_env" / "hand_checked.jsonl").read_text().splitlines()]
    accepted = {True: 0, False: 0}
    through = []
    for r in rows:
        try:
            dom.parse_env_output(r["output"], ctx(dom))
        except Reject:
            continue
        accepted[r["gold_correct"]] += 1
        if not r["gold_correct"]:
            through.append(r["kind"])
    assert sum(r["gold_correct"] for r in rows) == 15 and len(rows) == 30
    assert accepted[True] == 15
    assert accepted[False] == 4 and sorted(through) == ["false fact"] * 3 + ["question off the chain"]


@pytest.mark.parametrize("name", ["bamboogle.csv", "bamboogle.json", "test.jsonl"])
def test_domain_score_equals_the_suite_verdict_item_for_item(dom, name):
    suite = Bamboogle()
    loaded = suite.load(data=FIXTURES / "bamboogle" / name, split=None, version=None, protocol="official",
                        cache_dir=FIXTURES)
    tasks = dom.read_seeds(FIXTURES / "bamboogle" / name)
    assert len(tasks) == len(loaded.samples)
    for t, sample in zip(tasks, loaded.samples, strict=True):
        assert dom.sample(t.payload).messages == sample.messages
        gold = sample.gold[0]
        outs = [f"<answer>{gold}</answer>", f"The answer is {gold}", gold.upper(), f"<answer>{gold} and more</answer>",
                "<answer>no idea</answer>", "", f"<think>{gold}</think> wrong", f"<answer>the {gold}.</answer>"]
        for out in outs:
            assert dom.score(t.payload, out).reward == float(suite.score(sample, out, "official").correct), out


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
