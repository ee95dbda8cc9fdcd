"""Property-based tests (hypothesis) for every parser of model or user text: each returns data or raises its
domain's own error, never anything else, within a bounded time and depth, whatever the text holds."""

from __future__ import annotations

import contextlib
import json
import math
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genenv_cli.catalogue.config import (
    SECTIONS,
    Config,
    ConfigError,
    _section_fields,
    apply_overrides,
    config_from_dict,
    load_config,
    parse_override,
)
from genenv_cli.core.callparse import CallParseError, parse_python_calls, parse_tool_calls
from genenv_cli.core.errors import InputError
from genenv_cli.core.jsonio import json_lines
from genenv_cli.domains.arith import ArithDomain, ArithError, evaluate_expression
from genenv_cli.domains.base import EnvContext, Reject, TaskVerdict
from genenv_cli.domains.tool_call import ToolCallDomain
from genenv_cli.families.api_bank import parsing as api_bank_parsing
from genenv_cli.families.api_bank import scoring as api_bank_scoring
from genenv_cli.families.bfcl.calls import DecodeError
from genenv_cli.families.bfcl.decode import decode_answer
from genenv_cli.rundir.datafiles import iter_jsonl

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMIT_S = 2.0  # no single parse may take more CPU seconds, whatever the input (CPU, not wall: a loaded machine)

# ---------------------------------------------------------------- strategies of model text

PIECES = ["[", "]", "(", ")", "{", "}", "-", "+", "~", "'", '"', ",", ":", "=", "9", "0", ".", "e", " ", "\n",
          "<tool_call>", "</tool_call>", '{"name": "f", "arguments": {', '"x": ', "f(", "x=", "get_weather",
          "```json\n", "```", "</think>", "<think>", "null", "true", "\\", "\x00", "é", "\ud7ff"]


@st.composite
def degenerate(draw) -> str:
    """Runs of one piece, as a model stuck in a loop writes them, inside the start of a plausible answer."""
    piece = draw(st.sampled_from(PIECES))
    n = draw(st.sampled_from([1, 2, 99, 100, 101, 513, 1024, 3000, 5001]))
    head = draw(st.sampled_from(["", "[f(x=", "<tool_call>", '<tool_call>{"name": "f", "arguments": {"x": ',
                                 "[Api(key='", "[get_weather(city=", "EXERCISE: ", "Answer: "]))
    tail = draw(st.sampled_from(["", ")]", "1)]", "}}</tool_call>", "')]", "]"]))
    return head + piece * n + tail


@st.composite
def nested(draw) -> str:
    """Brackets nested n deep around a value, as a call's argument or a whole answer."""
    opener, closer = draw(st.sampled_from([("[", "]"), ("(", ")"), ('{"a": ', "}"), ("-", ""), ("f(x=", ")")]))
    n = draw(st.sampled_from([1, 50, 101, 1000, 3000]))
    head, tail = draw(st.sampled_from([("", ""), ("[f(x=", ")]"), ("[Api(key='", "')]"), ("<tool_call>", "</tool_call>"),
                                       ('{"name": "f", "arguments": {"x": ', "}}")]))
    return head + opener * n + "1" + closer * n + tail


@st.composite
def jumbled(draw) -> str:
    return "".join(draw(st.lists(st.sampled_from(PIECES), max_size=60)))


MODEL_TEXT = st.one_of(st.text(max_size=200), jumbled(), degenerate(), nested())


def timed(fn, *args):
    t = time.process_time()
    try:
        return fn(*args)
    finally:
        assert time.process_time() - t < LIMIT_S, f"{fn.__name__} took {time.process_time() - t:.2f} CPU s"


def _is_data(value) -> bool:
    json.dumps(value, default=str)  # nested no deeper than json can write
    return True


# ---------------------------------------------------------------- the tool-call parsers

@FAST
@given(MODEL_TEXT)
@pytest.mark.slow
def test_tool_call_parser_returns_calls_or_its_error(text):
    try:
        calls = timed(parse_tool_calls, text)
    except CallParseError:
        return
    assert all(isinstance(c.name, str) and isinstance(c.arguments, dict) and _is_data(c.arguments) for c in calls)


@FAST
@given(MODEL_TEXT)
@pytest.mark.slow
def test_python_call_parser_returns_calls_or_its_error(text):
    try:
        calls = timed(parse_python_calls, text)
    except CallParseError:
        return
    assert all(isinstance(c.name, str) and _is_data(c.arguments) for c in calls)


@FAST
@given(MODEL_TEXT, st.sampled_from(["python", "java", "javascript"]))
def test_bfcl_decoder_returns_calls_or_its_error(text, language):
    try:
        calls, form = timed(decode_answer, text, language)
    except DecodeError:
        return
    assert form in ("tool_call", "prompt") and all(isinstance(c.name, str) for c in calls)


@FAST
@given(MODEL_TEXT)
def test_api_bank_parsers_return_calls_or_their_error(text):
    try:
        calls = timed(api_bank_parsing.parse_official, text)
        assert all(isinstance(c.name, str) for c in calls)
    except CallParseError:
        pass
    paper = timed(api_bank_parsing.parse_paper, text)  # ToolRL's reading never fails: unreadable text is no call
    assert isinstance(paper, list)


@FAST
@given(st.one_of(MODEL_TEXT, st.integers(), st.floats(), st.booleans(),
                 st.lists(MODEL_TEXT, max_size=3)), st.booleans())
def test_api_bank_value_comparison_never_raises(value, numeric):
    out = timed(api_bank_scoring._canon, value, numeric)
    assert _is_data(out)


# ---------------------------------------------------------------- the domains' parsers and scorers

TOOL_CALL = ToolCallDomain()
TOOL_TASK = TOOL_CALL.seeds("train")[0].payload
ARITH = ArithDomain()
CTX = EnvContext(parent={"expression": "1 + 2", "answer": 3}, parent_id="p", parent_shape="1op-1d", parent_p=None,
                 stats=None, frontier=[])


@FAST
@given(MODEL_TEXT)
def test_tool_call_scorer_gives_a_score_for_any_completion(text):
    s = timed(TOOL_CALL.score, TOOL_TASK, text)
    assert isinstance(s, TaskVerdict) and 0.0 <= s.reward <= 1.0 and not (s.reward == 1.0 and s.error)


@FAST
@given(st.one_of(MODEL_TEXT, st.builds(lambda x: f"REQUEST: a request here\nTOOLS: get_weather\nCALLS: {x}", MODEL_TEXT)))
def test_tool_call_environment_parser_returns_a_task_or_a_reject(text):
    ctx = EnvContext(parent=TOOL_TASK, parent_id="p", parent_shape="single", parent_p=None, stats=None, frontier=[])
    try:
        payload, shape = timed(TOOL_CALL.parse_env_output, text, ctx)
    except Reject:
        return
    assert TOOL_CALL.check_payload(payload) is None and isinstance(shape, str)


ARITH_TEXT = st.one_of(MODEL_TEXT, st.lists(st.sampled_from(["1", "23", "(", ")", "-", "+", "*", " ", "999999"]),
                                            max_size=80).map("".join))


@FAST
@given(ARITH_TEXT)
def test_arith_parser_returns_a_value_or_its_error(text):
    try:
        value, ops, digits = timed(evaluate_expression, text)
    except ArithError:
        return
    assert isinstance(value, int) and ops >= 0 and digits >= 1


@FAST
@given(ARITH_TEXT)
def test_arith_environment_parser_and_scorer(text):
    try:
        payload, shape = timed(ARITH.parse_env_output, "EXERCISE: " + text, CTX)
        assert ARITH.check_payload(payload) is None
    except Reject:
        pass
    s = timed(ARITH.score, {"expression": "1 + 2", "answer": 3}, text)
    assert s.reward in (0.0, 1.0)


# ---------------------------------------------------------------- JSONL readers

LINES = st.lists(st.one_of(st.binary(max_size=40), MODEL_TEXT.map(str.encode).map(lambda b: b.replace(b"\n", b" ")),
                           st.builds(lambda d: json.dumps(d).encode(), st.dictionaries(st.text(max_size=8),
                                                                                      st.integers(), max_size=3))),
                 max_size=6)


@FAST
@given(LINES)
def test_jsonl_readers_return_records_or_name_the_line(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("jsonl") / "f.jsonl"
    path.write_bytes(b"\n".join(lines))
    try:
        got = timed(lambda: list(json_lines(path, "anything")))
        assert all(isinstance(where, str) and where.startswith(str(path)) for where, _ in got)
    except InputError as exc:
        assert str(path) in str(exc) and ", line " in str(exc)
    try:
        timed(lambda: list(iter_jsonl(path, "tasks")))
    except InputError as exc:
        assert str(path) in str(exc)


# ---------------------------------------------------------------- config values

KEYS = [(sec, key) for sec in SECTIONS for key in _section_fields(sec)]
VALUES = st.one_of(st.integers(min_value=-(10**30), max_value=10**30), st.floats(allow_nan=True, allow_infinity=True),
                   st.booleans(), st.text(max_size=20), st.lists(st.text(max_size=5), max_size=3), st.none())


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(KEYS), VALUES)
def test_config_values_are_accepted_valid_or_refused_by_name(key, value):
    section, name = key
    try:
        cfg = config_from_dict({section: {name: value}}, "test")
    except ConfigError as exc:
        assert f"{section}.{name}" in str(exc)
        return
    got = getattr(getattr(cfg, section), name)
    if isinstance(got, float):
        assert math.isfinite(got)
    meta = _section_fields(section)[name].metadata
    if isinstance(got, int | float) and not isinstance(got, bool):
        assert got >= meta.get("min", -math.inf) and got <= meta.get("max", math.inf)


@FAST
@given(st.text(max_size=80))
def test_set_overrides_parse_or_are_refused(text):
    try:
        section, key, _ = parse_override(text)
    except ConfigError:
        return
    with contextlib.suppress(ConfigError):
        assert isinstance(config_from_dict(apply_overrides({}, [text]), "--set"), Config)


@FAST
@given(st.one_of(st.binary(max_size=200), MODEL_TEXT.map(str.encode),
                 st.builds(lambda k, v: f"[curriculum]\n{k} = {v}\n".encode(),
                           st.sampled_from(["alpha", "lam", "k_min", "beta"]),
                           st.sampled_from(["nan", "inf", "-inf", "1e400", "[[[[1]]]]", "1" * 5000, '"x"', "0.5"]))))
def test_config_files_load_or_are_refused(tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("cfg") / "genenv.toml"
    path.write_bytes(blob)
    try:
        cfg = timed(load_config, path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    assert 0.0 <= cfg.curriculum.alpha <= 1.0 and math.isfinite(cfg.curriculum.lam)


@pytest.mark.parametrize("deep", ["[" * 5000, "a = " + "[" * 5000 + "]" * 5000])
def test_deep_toml_is_refused(tmp_path, deep):
    path = tmp_path / "genenv.toml"
    path.write_text(deep)
    with pytest.raises(ConfigError, match=str(Path(path))):
        load_config(path)
