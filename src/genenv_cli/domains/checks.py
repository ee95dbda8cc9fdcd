"""The domain contract: what every domain, built in or a plugin, must keep. `genenv domains check NAME` runs it on
any registered domain with the answers the domain declares (`gold_answer`, `wrong_answer`, `render_task`), and
the project's own test (tests/domains/test_domain_contract.py) runs the same functions on every built-in domain,
with the test answers its registry row names (`domains/answers/`: more answers, and the benchmarks' hand-written
files).

The clauses, one function each (a failure raises `ContractFailure`, an AssertionError, with what is wrong):

- `check_seeds`: both splits present, unique ids, known shapes, each seed passing the domain's own check, a
  non-item refused by it, a stable data fingerprint;
- `check_answers`: the right answer to every item scores 1 (valid, no error) and a wrong one 0 with a reason,
  one by one and in `score_many`;
- `check_env_output`: an item written as the environment writes it reads back as the same well-formed item;
  text with no item is a parse failure (`Reject("parse: ...")`);
- `check_prompts`: the agent's and the environment's prompts (for the contexts of epoch 1 and of a later epoch)
  are chat messages;
- `check_fingerprints`: the code and prompts that shape a stage's output can be fingerprinted;
- `check_episodes` (multi-turn domains): the environment's first observation is chat messages, the right answer
  given at every turn ends an episode within `max_turns` with reward 1, and the wrong one earns none;
- `check_suite` (benchmark-family domains, given the benchmark's files): for every item, the agent's prompt is
  the suite's prompt and the reward is the suite's verdict on right, wrong, empty and malformed answers.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv_cli.domains.base import Domain, EnvContext, Reject

Payload = dict[str, Any]
MIN_GRADED = 3  # items with a right answer the contract grades at least


class ContractFailure(AssertionError):
    """A clause of the domain contract does not hold; the message says which item and what."""


class ContractSkip(Exception):
    """A clause that cannot be checked for this domain (the message says why)."""


@dataclass(frozen=True)
class SuiteData:
    """Files the domain's `evaluate` suite loads (`data`, `split`, under the domain's protocol)."""
    data: Path
    split: str | None = None


@dataclass(frozen=True)
class DomainCase:
    """How to write a domain's answers and items, for the contract."""

    gold: Callable[[Payload], str | None]    # the right answer; None where the item carries none to write
    wrong: Callable[[Payload], str]          # an answer that must score 0
    env_text: Callable[[Any, Payload], str]  # (domain, payload) -> the item as the environment writes it
    answers: Callable[[Payload], list[str]] = lambda p: []  # more answers whose score must equal the suite's
    suite_data: tuple[SuiteData, ...] = ()   # benchmark files in the official format (family domains)
    pair: Callable[[Any, Any], Payload] | None = None  # (domain, suite sample) -> the domain's item for it
    # (payload, answer) -> the reason the domain refuses an answer its suite accepts, where it documents one
    stricter: Callable[[Payload, str], str | None] = lambda p, out: None


def declared_case(dom: Domain) -> DomainCase:
    """The case a domain declares through its own methods (what `genenv domains check` uses)."""
    return DomainCase(gold=dom.gold_answer, wrong=dom.wrong_answer, env_text=lambda d, p: d.render_task(p))


def _require(ok: Any, message: Any) -> None:
    if not ok:
        raise ContractFailure(str(message))


def seed_context(dom: Domain) -> EnvContext:
    """The environment's context for a new item varied from the domain's first training seed."""
    s = dom.seeds("train")[0]
    return EnvContext(s.id, s.shape, s.payload, None, None, [])


def all_seeds(dom: Domain) -> list[Any]:
    return dom.seeds("train") + dom.seeds("validation")


# ---------------------------------------------------------------- the clauses

def check_seeds(dom: Domain) -> str:
    train, val = dom.seeds("train"), dom.seeds("validation")
    _require(train and val, f"both splits need seeds: {len(train)} train, {len(val)} validation")
    _require(all(s.split == "train" for s in train) and all(s.split == "validation" for s in val),
             "seeds(split) returned seeds of another split")
    ids = [s.id for s in train + val]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    _require(not dup, f"seed ids must be unique across both splits; repeated: {dup[:5]}")
    _require(dom.shapes, "the domain names no shapes (its `shapes` tuple)")
    unknown = sorted({s.shape for s in train + val} - set(dom.shapes))
    _require(not unknown, f"seeds have shapes the domain does not name in `shapes`: {unknown[:5]}")
    for s in train + val:
        problem = dom.check_payload(s.payload)
        _require(problem is None, f"seed {s.id}: check_payload refuses it: {problem}")
    _require(dom.check_payload("not an item") is not None and dom.check_payload([]) is not None,
             "check_payload must refuse what is not an item (a string, a list)")
    fp = dom.data_fingerprint()
    _require(isinstance(fp, str) and len(fp) >= 8 and fp == dom.data_fingerprint(),
             f"data_fingerprint() must be a stable string of 8 characters or more, got {fp!r}")
    return f"{len(train)} train and {len(val)} validation seeds, shapes {', '.join(sorted({s.shape for s in train + val}))}"


def check_answers(dom: Domain, case: DomainCase, items: list[Payload]) -> str:
    graded = [(p, g) for p in items if (g := case.gold(p)) is not None]
    if not graded:
        raise ContractSkip("gold_answer gives None for every item, so the scorer's right answers are not checked")
    _require(len(graded) >= MIN_GRADED, f"only {len(graded)} items carry a right answer (gold_answer); the contract "
                                        f"grades at least {MIN_GRADED}")
    for p, gold in graded:
        s = dom.score(p, gold)
        _require((s.reward, s.valid, s.error) == (1.0, True, None),
                 f"the right answer {gold!r} scores reward {s.reward}, valid {s.valid}, error {s.error!r}; expected "
                 f"1.0, True, None (item {_short(p)})")
    for p in items:
        wrong = case.wrong(p)
        s = dom.score(p, wrong)
        _require(s.reward == 0.0 and s.error, f"the wrong answer {wrong!r} scores reward {s.reward}, error "
                                              f"{s.error!r}; expected 0.0 with a reason (item {_short(p)})")
        _require(0.0 <= s.partial <= 1.0, f"partial credit {s.partial} is outside [0, 1] (item {_short(p)})")
    payloads = [p for p, _ in graded] + items
    answers = [g for _, g in graded] + [case.wrong(p) for p in items]
    _require(dom.score_many(payloads, answers) == [dom.score(p, a) for p, a in zip(payloads, answers, strict=True)],
             "score_many differs from score, answer by answer")
    return f"{len(graded)} right answers score 1, {len(items)} wrong ones 0"


def check_env_output(dom: Domain, case: DomainCase) -> str:
    ctx = seed_context(dom)
    seeds = all_seeds(dom)
    for s in seeds:
        text = case.env_text(dom, s.payload)
        try:
            payload, shape = dom.parse_env_output(text, ctx)
        except Reject as exc:
            raise ContractFailure(f"seed {s.id} written as the environment writes it ({text[:120]!r}) is rejected: "
                                  f"{exc}") from None
        problem = dom.check_payload(payload)
        _require(problem is None, f"seed {s.id}: parse_env_output gave an item check_payload refuses: {problem}")
        _require(shape in dom.shapes, f"seed {s.id}: parse_env_output gave shape {shape!r}, not one of `shapes`")
        _require(dom.exact_key(payload) == dom.exact_key(s.payload),
                 f"seed {s.id}: written and read back it is another item (exact_key {dom.exact_key(payload)!r}, "
                 f"expected {dom.exact_key(s.payload)!r})")
    for text in ("", "I would rather not write one today.", "{" * 50):
        try:
            dom.parse_env_output(text, ctx)
        except Reject as exc:
            _require(str(exc).startswith("parse: "), f"text with no item ({text!r}) is rejected as {str(exc)!r}; a "
                                                     f"reason that starts with 'parse: ' is expected")
        else:
            raise ContractFailure(f"text with no item ({text!r}) was accepted as an item")
    return f"{len(seeds)} seeds written as the environment writes them read back; text with no item is refused"


def is_chat(messages: Any) -> bool:
    """Chat messages ending before the model's turn (the last is the user's or, in API-Bank's format, the
    system's API result): a non-empty list of {role, content} with non-empty string contents."""
    return (isinstance(messages, list) and bool(messages) and isinstance(messages[-1], dict)
            and messages[-1].get("role") != "assistant"
            and all(isinstance(m, dict) and set(m) == {"role", "content"} and isinstance(m["content"], str)
                    and m["content"] and m["role"] in ("system", "user", "assistant") for m in messages))


def check_prompts(dom: Domain) -> str:
    from genenv_cli.domains.fingerprints import fixed_contexts

    seeds = all_seeds(dom)
    for s in seeds[:: max(1, len(seeds) // 10)]:
        _require(is_chat(dom.agent_messages(s.payload)), f"agent_messages of seed {s.id} are not chat messages "
                                                         f"(a list of {{role, content}}, not ending with the assistant)")
    contexts = fixed_contexts(dom)
    for ctx in contexts:
        _require(is_chat(dom.env_messages(ctx)), f"env_messages for a context varying {ctx.parent_id} "
                                                 f"({'with' if ctx.stats else 'without'} statistics) are not chat "
                                                 f"messages")
    return f"agent and environment prompts are chat messages ({len(contexts)} environment contexts)"


def check_episodes(dom: Domain, case: DomainCase, items: list[Payload]) -> str:
    """A multi-turn domain's environment: the first observation is chat messages; the right answer, given at every
    turn, ends the episode within `max_turns` with reward 1; the wrong one never earns a reward; and every
    observation before the end is text."""
    played = 0
    for p in items[:: max(1, len(items) // 20)]:
        for answer, reward in ((case.gold(p), 1.0), (case.wrong(p), 0.0)):
            if answer is None:
                continue
            episode = dom.start_episode(p)
            try:
                _require(is_chat(episode.prompt()), f"the first observation of item {_short(p)} is not chat messages")
                while episode.prompt() is not None:
                    episode.advance(answer)
                _require(episode.verdict is not None and episode.verdict.reward == reward,
                         f"the answer {answer!r}, given at every turn, ends as {episode.end!r} with reward "
                         f"{getattr(episode.verdict, 'reward', None)}; expected {reward} (item {_short(p)})")
                _require(reward == 0.0 or episode.end == "done", f"the right answer {answer!r} did not end the "
                         f"episode within max_turns = {dom.max_turns} (item {_short(p)})")
            finally:
                episode.close()
            played += 1
    return f"{played} episodes: the right answer ends one with reward 1, the wrong one earns none"


def check_fingerprints(dom: Domain) -> str:
    from genenv_cli.domains.fingerprints import (
        agent_prompt_fingerprint,
        code_fingerprint,
        env_prompt_fingerprint,
    )

    files = dom.code_files()
    _require(files and all(f.is_file() for f in files), f"code_files() must name the domain's source files, got "
                                                        f"{[str(f) for f in files]}")
    return (f"code {code_fingerprint(dom)} ({', '.join(f.name for f in files)}), environment prompt "
            f"{env_prompt_fingerprint(dom)}, agent prompt {agent_prompt_fingerprint(dom)}")


def suite_pairs(dom: Any, case: DomainCase, cache: Path | None = None) -> list[tuple[Payload, Any]]:
    """(the domain's item, the suite's own sample) for every sample the suite loads from the case's files."""
    cache = cache or Path(tempfile.mkdtemp(prefix="genenv-contract-"))
    out = []
    for d in case.suite_data:
        loaded = dom.suite.load(data=d.data, split=d.split, version=None, protocol=dom.protocol, cache_dir=cache)
        out += [(case.pair(dom, s), s) for s in loaded.samples]
    return out


def check_suite(dom: Any, case: DomainCase, pairs: list[tuple[Payload, Any]]) -> str:
    """The domain's reward means what "correct" means in `genenv evaluate --bench <its suite>`: on the suite's own
    samples of the benchmark files (prompt and verdict) and on the built-in seeds (verdict)."""
    if not case.suite_data:
        raise ContractSkip("no benchmark files given: the prompt and verdict are compared with the suite's in the "
                           "project's tests")
    _require(len(pairs) >= MIN_GRADED, f"the benchmark files give {len(pairs)} samples; at least {MIN_GRADED} needed")
    for payload, sample in pairs:
        _require(dom.sample(payload).messages == sample.messages, f"{sample.id}: the agent's prompt differs from the "
                                                                  f"suite's")
    checked = 0
    for payload, sample in pairs + [(s.payload, dom.sample(s.payload)) for s in all_seeds(dom)]:
        gold = case.gold(payload)
        for out in ([gold] if gold is not None else []) + [case.wrong(payload), "", *case.answers(payload)]:
            verdict = dom.suite.score(sample, out, dom.protocol)
            stricter = case.stricter(payload, out)   # where the domain documents that it asks more of an answer
            mine = dom.score(payload, out)
            _require(mine.reward == float(verdict.correct and stricter is None),
                     f"{sample.id}: reward {mine.reward} for {out[:80]!r}, the suite says {verdict.correct} "
                     f"({verdict.reason})")
            _require(mine.error == (stricter or (None if verdict.correct else verdict.reason or "wrong")),
                     f"{sample.id}: reason {mine.error!r} for {out[:80]!r}, the suite's is {verdict.reason!r}")
            checked += 1
    _require(checked >= 5 * len(pairs), f"only {checked} answers compared for {len(pairs)} samples")
    return f"{len(pairs)} benchmark samples: the suite's prompt and verdict ({checked} answers)"


def _short(payload: Any) -> str:
    text = repr(payload)
    return text if len(text) <= 120 else text[:117] + "..."


# ---------------------------------------------------------------- all of it, for `genenv domains check`

@dataclass(frozen=True)
class CheckResult:
    name: str
    status: str   # ok | fail | skip
    detail: str


def run_contract(dom: Domain, case: DomainCase | None = None) -> list[CheckResult]:
    """Every clause on `dom` with `case` (default: the one the domain declares), each caught: a clause that fails,
    or a domain method that raises, is one failed line, and the others still run."""
    from genenv_cli.core.plugin_guard import PluginError
    from genenv_cli.domains.family import FamilyDomain

    case = case or declared_case(dom)
    results: list[CheckResult] = []

    def run(name: str, clause: Callable[[], str]) -> None:
        try:
            results.append(CheckResult(name, "ok", clause()))
        except ContractSkip as exc:
            results.append(CheckResult(name, "skip", str(exc)))
        except ContractFailure as exc:
            results.append(CheckResult(name, "fail", str(exc)))
        except NotImplementedError as exc:
            results.append(CheckResult(name, "fail", f"{exc} (docs/domains.md, \"Writing a domain\")"))
        except PluginError as exc:  # the domain's code under `genenv domains check`'s guard: already says whose
            results.append(CheckResult(name, "fail", str(exc)))
        except Exception as exc:  # noqa: BLE001 - a plugin's bug is a failed clause, reported with its type
            results.append(CheckResult(name, "fail", f"raised {type(exc).__name__}: {str(exc)[:300]}"))

    run("seeds", lambda: check_seeds(dom))
    if results[-1].status != "ok":
        return results  # every other clause works on the seeds
    run("answers", lambda: check_answers(dom, case, [s.payload for s in all_seeds(dom)]))
    run("environment output", lambda: check_env_output(dom, case))
    run("prompts", lambda: check_prompts(dom))
    run("fingerprints", lambda: check_fingerprints(dom))
    if dom.episodic:
        run("episodes", lambda: check_episodes(dom, case, [s.payload for s in all_seeds(dom)]))
    if isinstance(getattr(dom, "wrapped", dom), FamilyDomain):  # a GuardedDomain is its domain's
        run("benchmark suite", lambda: check_suite(dom, case, suite_pairs(dom, case) if case.suite_data else []))
    return results
