"""Every parser of model text reads in bounded, linear time: adversarial text (long runs of whitespace, backticks,
braces, brackets, quotes, reasoning and answer tags, nested fences), near the 256- and 512-token generation limits
and up to a megabyte, is parsed within a generous bound per call (PER_CALL_S, asserted with time.perf_counter).

The parsers: the call parser (genenv's <tool_call> and Python-call forms), every built-in domain's scorer (one
task per shape) and environment-output parser, and every benchmark's scorer (one sample per category, both
protocols) on its hand-written fixtures. Each earlier quadratic or cubic case has its own test, with the text that
showed it, under a pytest-timeout so that a regression fails instead of hanging. The hypothesis tests are
derandomized, so CI runs the same examples every time.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.domains import DOMAINS, get_domain
from genenv_cli.catalogue.suites import get_benchmark
from genenv_cli.core.callparse import parse_python_calls, parse_tool_calls, unfence
from genenv_cli.domains.arith import ArithDomain, read_answer
from genenv_cli.domains.base import EnvContext
from genenv_cli.families.alfworld.commands import parse_action
from genenv_cli.families.bamboogle.benchmark import _last_tag, extract_answer
from genenv_cli.families.bfcl.decode import decode_answer
from genenv_cli.families.travelplanner.plans import _balanced, _drop_think, extract_plan
from paths import FIXTURES

FIX = FIXTURES
# A megabyte parses in well under 0.2 s on an idle core (benchmarks/speed/parser_bounds.py records the times); the
# bound leaves room for a slow, shared CI machine.
PER_CALL_S = 1.0
MB = 1_000_000
# characters near the generation limits: the embedded tokenizer has a token of 81 spaces, so 256 tokens can be
# 20,000 blanks; 512 tokens (evaluate's default) twice that
SIZES = [255 * 4, 256 * 81, 512 * 81, 100_001, MB]
SLOW = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # ~95 parsers per example

PIECES = [" ", "\n", "\t", "`", "```", "```json\n", "```python\n", "{", "}", "[", "]", "(", ")", '"', "'", ",", ":",
          "\\", "-", "1", "1,", "a, ", "<think>", "</think>", "<answer>", "</answer>", "<response>", "<tool_call>",
          "</tool_call>", "<action>", "answer", "Answer: ", "[{", '{"plan":', "f(x=", "/*", "/[", "a<", "from a to "]
HEADS = ["", "```", "```json", "```python\n", "<tool_call>", "[f(x=", "[Api(key='", "Answer:", "answer", "<answer>",
         "<think>", "EXERCISE: 1 +", "REQUEST: r\nTOOLS: get_weather\nCALLS: ", "{", "[", "Action: ", "f(a="]
TAILS = ["", "x", "```", ")]", "}", "</answer>", "</think>", "]"]


@st.composite
def adversarial(draw) -> str:
    """A head, one or two pieces repeated to a size near a generation limit or up to a megabyte, a tail."""
    size = draw(st.sampled_from(SIZES))
    piece = draw(st.sampled_from(PIECES))
    other = draw(st.sampled_from(["", *PIECES]))
    unit = piece + other
    body = unit * max(1, size // len(unit))
    return draw(st.sampled_from(HEADS)) + body + draw(st.sampled_from(TAILS))


def bounded(fn, text, name=None):
    t = time.perf_counter()
    with contextlib.suppress(Exception):  # a parser's own error is a fine answer here; only the time is checked
        fn(text)
    took = time.perf_counter() - t
    assert took < PER_CALL_S, f"{name or getattr(fn, '__name__', fn)} took {took:.2f} s on {len(text):,} characters " \
                              f"starting {text[:40]!r}"


# ---------------------------------------------------------------- the parsers, each as one function of the text

@functools.cache
def domain_parsers() -> list[tuple[str, object]]:
    out = []
    for name in DOMAINS.builtins:
        dom = get_domain(name)
        shapes = {}
        for s in dom.seeds("train") + dom.seeds("validation"):
            shapes.setdefault(s.shape, s)
        for shape, s in sorted(shapes.items()):
            out.append((f"{name}.score[{shape}]", functools.partial(dom.score, s.payload)))
        first = next(iter(shapes.values()))
        ctx = EnvContext(first.id, first.shape, first.payload, None, None, [])
        out.append((f"{name}.parse_env_output", lambda t, d=dom, c=ctx: d.parse_env_output(t, c)))
    return out


BENCH_DATA = {"bfcl": FIX / "bfcl", "api-bank": FIX / "api_bank", "bamboogle": FIX / "bamboogle" / "bamboogle.csv",
              "travelplanner": FIX / "travelplanner", "alfworld": FIX / "alfworld" / "json_2.1.1"}


@functools.cache
def benchmark_parsers(cache: str) -> list[tuple[str, object]]:
    out = []
    for name, data in BENCH_DATA.items():
        for protocol in ("official", "paper"):
            bench = get_benchmark(name)
            bench.configure(Config(), None)
            loaded = bench.load(data=data, split=None, version=None, protocol=protocol, cache_dir=Path(cache))
            seen = {}
            for s in loaded.samples:
                seen.setdefault(s.category, s)
            for cat, s in sorted(seen.items()):
                out.append((f"{name}/{protocol}[{cat}]", lambda t, b=bench, s=s, p=protocol: b.score(s, t, p)))
    return out


CALL_PARSERS = [(f.__name__, f) for f in (parse_tool_calls, parse_python_calls, read_answer, extract_answer,
                                           extract_plan, parse_action)] + [
    (f"decode_answer[{lang}]", functools.partial(decode_answer, language=lang))
    for lang in ("python", "java", "javascript")]


@settings(SLOW, max_examples=60)
@given(adversarial())
@pytest.mark.slow
def test_the_text_parsers_read_a_megabyte_of_adversarial_text_within_the_bound(text):
    for name, fn in CALL_PARSERS:
        bounded(fn, text, name)


@SLOW
@given(adversarial())
@pytest.mark.slow
def test_every_domain_scores_and_parses_adversarial_text_within_the_bound(text):
    for name, fn in domain_parsers():
        bounded(fn, text, name)


@SLOW
@given(adversarial())
@pytest.mark.slow
def test_every_benchmark_scores_adversarial_text_within_the_bound(tmp_path_factory, text):
    for name, fn in benchmark_parsers(str(tmp_path_factory.getbasetemp() / "bench-cache")):
        bounded(fn, text, name)


# ---------------------------------------------------------------- the cases that were slow, one by one

CASES = {
    "fence and 2,000 spaces (33 s)": "```" + " " * 2_000 + "x",
    "fence and 20,000 spaces": "```" + " " * 20_000 + "x",
    "json fence and newlines": "```json" + "\n" * 50_000 + "}",
    "python fence and blanks": "```python\n" + " \t" * 20_000 + ")]",
    "answer and 20,000 spaces (32 s)": "answer" + " " * 20_000,
    "50,000 <think>": "<think>" * 50_000,
    "50,000 <answer>": "<answer>" * 50_000,
    "50,000 <action>": "<action>" * 50_000,
    "a megabyte of digits in runs": ("1" * 999 + "x") * 1_000,
    "signs and blanks": ("- " * 50 + "x") * 10_000,
    "unclosed plan brackets": "[{" * 200_000,
    "nested plan brackets": "[{" * 5_000 + "}]" * 5_000,
    "quotes in brackets": ("[{" + '""' * 1_000) * 250,
    "unclosed block comments": "f(a=" + "/*" * 50_000,
    "javascript regex classes": "f(a=" + "-/[" * 30_000,
    "java type arguments": "f(a=new " + "a<" * 50_000,
    "java nesting": "f(a=" + "(" * 99 + "x, " * 30_000 + ")" * 99 + ")",
    "long call list": "[" + "a, " * 300_000 + "</answer>",
    "exercise with a trailing run": "EXERCISE: 1 +" + " " * 50_000 + "+ 1 = ?",
    "a million empty lines": "\n" * MB + "Action: go to desk 1",
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("text", list(CASES.values()), ids=list(CASES))
@pytest.mark.slow
def test_the_slow_cases_parse_within_the_bound_in_every_parser(text, tmp_path_factory):
    for name, fn in CALL_PARSERS:
        bounded(fn, text, name)
    for name, fn in domain_parsers():
        bounded(fn, text, name)
    for name, fn in benchmark_parsers(str(tmp_path_factory.getbasetemp() / "bench-cache")):
        bounded(fn, text, name)


@pytest.mark.timeout(60)
def test_score_of_tool_call_rollouts_with_the_fence_completion_is_quick():
    """32 tool_call rollouts, one of them the fence and 20,000 spaces (score did not finish in 600 s)."""
    dom = get_domain("tool_call")
    task = dom.seeds("train")[0].payload
    comps = ['<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>'] * 31
    comps.append("```" + " " * 20_000 + "x")
    t = time.perf_counter()
    scores = dom.score_many([task] * 32, comps)
    assert time.perf_counter() - t < PER_CALL_S and scores[-1].reward == 0.0


# ---------------------------------------------------------------- the linear readings agree with the regexes

SHORT = settings(max_examples=400, deadline=None, derandomize=True, database=None)


def texts(alphabet: list[str]):
    return st.lists(st.sampled_from(alphabet), max_size=12).map("".join)


@SHORT
@given(texts(["`", "```", "json", "py", "python", " ", "\n", "x", "\u00a0", "{", "}"]))
def test_unfence_reads_what_the_fence_regex_read(text):
    text = text.strip()
    for langs, pattern in ((("json",), r"^```(?:json)?\s*(.*?)\s*```$"),
                           (("python", "py"), r"^```(?:python|py)?\s*(.*?)\s*```$")):
        m = re.match(pattern, text, re.DOTALL)
        assert unfence(text, langs) == (m.group(1).strip() if m else None)


@SHORT
@given(texts(["answer", "Answer", " ", "\n", ":", "=", "-", "1", ",", "x", "\t"]))
def test_arith_reads_the_answer_the_old_pattern_read(text):
    old = re.findall(r"answer\s*[:=]?\s*(-?\d[\d,]*)", text, re.IGNORECASE)
    raw = old[-1] if old else (re.findall(r"-?\d[\d,]*", text) or [None])[-1]
    try:
        want = None if raw is None else int(raw.replace(",", ""))
    except ValueError:
        want = None
    assert read_answer(text) == want


@SHORT
@given(texts(["EXERCISE: ", "1", " + ", " ", "=", "?", " = ?", "x"]))
def test_arith_reads_the_exercise_the_old_pattern_read(text):
    old = re.sub(r"\s*=\s*\??\s*$", "", text.replace("\n", " "))
    from genenv_cli.domains.arith import _TRAILING_EQUALS

    assert _TRAILING_EQUALS.sub("", text.replace("\n", " ")) == old
    ArithDomain()  # the domain still builds


@SHORT
@given(texts(["<answer>", "</answer>", "<answer", "a", " ", "\n", "<", ">"]))
def test_bamboogle_reads_the_tag_the_old_pattern_read(text):
    closed = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
    want = closed[-1].strip() if closed else (text[text.rfind("<answer>") + 8:].strip()
                                              if "<answer>" in text else None)
    assert _last_tag(text, "answer") == want


@SHORT
@given(texts(["[", "]", "{", "}", '"', "'", "\\", "a", " ", "<think>", "</think>"]))
def test_travelplanner_reads_the_spans_the_old_scan_read(text):
    assert _drop_think(text) == re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    for start, ch in enumerate(text):
        if ch in "[{":
            assert _balanced(text, start) == _old_balanced(text, start)


def _old_balanced(text: str, start: int) -> str | None:
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
        i += 1
    return None


@SHORT
@given(texts(["<action>", "</action>", "<ACTION>", "</Action>", "go to desk 1", " ", "\n"]))
def test_alfworld_reads_the_action_the_old_pattern_read(text):
    m = re.search(r"<action>(.*?)</action>", text, re.DOTALL | re.IGNORECASE)
    if m:
        from genenv_cli.families.alfworld.commands import _clean

        assert parse_action(text) == _clean(m.group(1))
