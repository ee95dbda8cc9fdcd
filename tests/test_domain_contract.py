"""The contract every registered domain keeps, one parametrised test per clause over `DOMAINS` (the answers and
files each domain needs are its row in tests/domain_cases.py):

- its built-in seeds are self-consistent: both splits present, unique ids, known shapes, each passing the
  domain's own check;
- the right answer to every item scores 1 (valid) and a wrong one 0, one by one and in `score_many`;
- an item written as the environment writes it reads back as a well-formed item; text with no item is
  rejected as a parse failure;
- its prompts are chat messages;
- where the domain is built on a benchmark's `evaluate` suite: for every item of the benchmark's hand-written
  files in the official format (and every built-in seed), the agent's prompt is the suite's prompt and the
  domain's reward on right, wrong, empty and malformed answers is the suite's verdict.

The domain-specific rules (each broken item rejected for its own reason, the seed-file readers, the shape
names) stay in tests/test_<domain>_domain.py."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from domain_cases import CASES, Payload, seed_context
from genenv_cli.domains import DOMAINS, get_domain
from genenv_cli.domains.base import Reject
from genenv_cli.domains.family import FamilyDomain

NAMES = sorted(DOMAINS.names())
FAMILY = [n for n in NAMES if isinstance(get_domain(n), FamilyDomain)]


def test_every_registered_domain_has_a_row_and_the_family_ones_their_files():
    missing = sorted(set(NAMES) - set(CASES))
    assert not missing, f"add a row to tests/domain_cases.py for the domain(s) {missing}"
    assert set(CASES) == set(NAMES), "tests/domain_cases.py has rows for domains that are not registered"
    for name in FAMILY:
        assert CASES[name].suite_data and CASES[name].pair, f"{name}: its benchmark's files are the contract's data"
        assert all(d.data.exists() for d in CASES[name].suite_data), name


def _seeds(name: str) -> list[Any]:
    dom = get_domain(name)
    return dom.seeds("train") + dom.seeds("validation")


@functools.cache
def _suite_pairs(name: str) -> list[tuple[Payload, Any]]:
    """(the domain's item, the suite's own sample) for every sample the suite loads from the domain's files."""
    import tempfile

    dom, case = get_domain(name), CASES[name]
    cache = Path(tempfile.mkdtemp(prefix="genenv-contract-"))
    out = []
    for d in case.suite_data:
        loaded = dom.suite.load(data=d.data, split=d.split, version=None, protocol=dom.protocol, cache_dir=cache)
        out += [(case.pair(dom, s), s) for s in loaded.samples]
    return out


def _items(name: str) -> list[Payload]:
    """Every item the contract is checked on: the built-in seeds, and the benchmark files' items."""
    builtin = [s.payload for s in _seeds(name)]
    return builtin + [p for p, _ in _suite_pairs(name)] if name in FAMILY else builtin


@pytest.mark.parametrize("name", NAMES)
def test_builtin_seeds_are_self_consistent(name):
    dom = get_domain(name)
    train, val = dom.seeds("train"), dom.seeds("validation")
    assert train and val, "both splits have seeds"
    assert all(s.split == "train" for s in train) and all(s.split == "validation" for s in val)
    ids = [s.id for s in train + val]
    assert len(set(ids)) == len(ids), "seed ids are unique (and no seed is in both splits)"
    assert dom.shapes and {s.shape for s in train + val} <= set(dom.shapes)
    for s in train + val:
        assert dom.check_payload(s.payload) is None, (s.id, dom.check_payload(s.payload))
    assert dom.check_payload("not an item") is not None and dom.check_payload([]) is not None
    assert dom.data_fingerprint() == get_domain(name).data_fingerprint() and len(dom.data_fingerprint()) >= 8


@pytest.mark.parametrize("name", NAMES)
def test_the_right_answer_scores_one_and_a_wrong_one_zero(name):
    dom, case = get_domain(name), CASES[name]
    items = _items(name)
    graded = [(p, case.gold(p)) for p in items]
    graded = [(p, g) for p, g in graded if g is not None]
    assert len(graded) >= 3, "the contract is checked on some right answers"
    for p, gold in graded:
        s = dom.score(p, gold)
        assert (s.reward, s.valid, s.error) == (1.0, True, None), (p, gold, s)
    for p in items:
        s = dom.score(p, case.wrong(p))
        assert s.reward == 0.0 and s.error, (p, case.wrong(p))
        assert 0.0 <= s.partial <= 1.0
    payloads = [p for p, _ in graded] + items
    answers = [g for _, g in graded] + [case.wrong(p) for p in items]
    assert dom.score_many(payloads, answers) == [dom.score(p, a) for p, a in zip(payloads, answers, strict=True)]


@pytest.mark.parametrize("name", NAMES)
def test_what_the_environment_writes_reads_back_and_no_item_is_a_parse_failure(name):
    dom, case = get_domain(name), CASES[name]
    ctx = seed_context(dom)
    for s in _seeds(name):
        payload, shape = dom.parse_env_output(case.env_text(dom, s.payload), ctx)
        assert dom.check_payload(payload) is None and shape in dom.shapes, s.id
        assert dom.exact_key(payload) == dom.exact_key(s.payload), s.id   # the same item, by the dedup key
    for text in ("", "I would rather not write one today.", "{" * 50):
        with pytest.raises(Reject, match="^parse: "):
            dom.parse_env_output(text, ctx)


def _is_chat(messages: Any) -> bool:
    # the last turn is the user's or, in API-Bank's format, the system's API result: never the model's own
    return (isinstance(messages, list) and bool(messages) and messages[-1]["role"] != "assistant"
            and all(set(m) == {"role", "content"} and isinstance(m["content"], str) and m["content"]
                    and m["role"] in ("system", "user", "assistant") for m in messages))


@pytest.mark.parametrize("name", NAMES)
def test_prompts_are_chat_messages(name):
    dom = get_domain(name)
    seeds = _seeds(name)
    for s in seeds[:: max(1, len(seeds) // 10)]:
        assert _is_chat(dom.agent_messages(s.payload)), s.id
    assert _is_chat(dom.env_messages(seed_context(dom)))


@pytest.mark.parametrize("name", FAMILY)
def test_score_equals_the_suites_verdict_item_for_item(name):
    """The domain's reward means what "correct" means in `genenv evaluate --bench <its suite>`: on the suite's
    own samples of the benchmark files (prompt and verdict) and on the built-in seeds (verdict)."""
    dom, case = get_domain(name), CASES[name]
    pairs = _suite_pairs(name)
    assert len(pairs) >= 3
    for payload, sample in pairs:
        assert dom.sample(payload).messages == sample.messages, sample.id
    checked = 0
    for payload, sample in pairs + [(s.payload, dom.sample(s.payload)) for s in _seeds(name)]:
        gold = case.gold(payload)
        for out in ([gold] if gold is not None else []) + [case.wrong(payload), "", *case.answers(payload)]:
            verdict = dom.suite.score(sample, out, dom.protocol)
            stricter = case.stricter(payload, out)   # where the domain documents that it asks more of an answer
            mine = dom.score(payload, out)
            assert mine.reward == float(verdict.correct and stricter is None), (sample.id, out, verdict.reason)
            assert mine.error == (stricter or (None if verdict.correct else verdict.reason or "wrong")), (sample.id, out)
            checked += 1
    assert checked >= 5 * len(pairs)
