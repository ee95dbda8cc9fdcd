"""The paper protocol (`--protocol paper`, the GenEnv paper's Table 1 "BFCL" column): `multi_turn_long_context`
(200 dialogues, 734 turns in v4) with each turn scored on its own.

The messages for turn k: BFCL's system prompt (prompts.py) with the documents of the dialogue's
`involved_classes` (from `multi_turn_func_doc/`); then for each earlier turn j < k its user message(s) and one
assistant message holding turn j's ground-truth calls in BFCL syntax (`[cd(folder='document'),
mkdir(dir_name='temp')]`, positional arguments written as keywords; `[]` for a turn whose ground truth is
empty); then turn k's user message(s). No execution results are in the history: they exist only in BFCL's
simulated backends (which also hold the "long context", so this decomposition does not see it). The answer is
decoded as the official protocol decodes it (`decode.decode_answer`) and compared with turn k's
ground-truth calls (parsed from BFCL's call strings as data; positional arguments are named in the order of
the function document's parameters). Match rule: the same multiset of calls -- same function name (a `Class.`
prefix is dropped), same arguments after dropping those equal to the documented default ("None" meaning
None), numbers compared by value (1 == 1.0), tuples as lists, strings exactly. A turn with empty ground truth
passes when the answer holds no call. `ordered` in the per-sample scores also requires the same order.
Accuracy = correct turns / turns. Paper numbers for reference: GenEnv 7B 41.8, Qwen2.5-7B-Instruct 7.0.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.evals.base import EvalSample, Verdict
from genenv_cli.families.bfcl.calls import BCall, DecodeError, json_safe
from genenv_cli.families.bfcl.categories import MULTI_TURN_DOCS, PAPER_CATEGORY, file_name
from genenv_cli.families.bfcl.decode import decode_answer, decode_python, positional_value
from genenv_cli.families.bfcl.prompts import annotate_functions, system_prompt
from genenv_cli.families.bfcl.release_files import (
    _check_answer,
    _check_question,
    _read_records,
    _read_records_docs,
)


def load_multi_turn(root: Path, version: str, read: list[Path]) -> list[EvalSample]:
    """One sample per turn of every multi_turn_long_context dialogue (its files are added to `read`)."""
    qpath = root / file_name(PAPER_CATEGORY, version)
    apath = root / "possible_answer" / file_name(PAPER_CATEGORY, version)
    if not apath.is_file():
        raise InputError(f"missing ground truth {apath} for {qpath}")
    questions = _read_records(qpath)
    answers = {}
    for where, rec in _read_records(apath):
        _check_answer(where, rec, multi_turn=True)
        answers[rec["id"]] = (where, rec["ground_truth"])
    read += [qpath, apath]
    docs_cache: dict[str, list[dict]] = {}
    samples = []
    for where, rec in questions:
        _check_question(where, rec, need_functions=False)
        functions = _class_functions(root, where, rec, docs_cache, read)
        if rec["id"] not in answers:
            raise InputError(f"{where}: id {rec['id']} has no ground truth in {apath}")
        answer_at, truth = answers[rec["id"]]
        if len(truth) != len(rec["question"]):
            raise InputError(f"{answer_at} (id {rec['id']}): {len(truth)} ground-truth turns for "
                             f"{len(rec['question'])} question turns")
        gold_turns = _gold_turns(answer_at, rec["id"], truth, {f["name"]: f for f in functions})
        samples += _turn_samples(rec, functions, truth, gold_turns, version)
    return samples


def _class_functions(root: Path, where: str, rec: dict, docs_cache: dict[str, list[dict]],
                     read: list[Path]) -> list[dict]:
    """The function documents of the API classes a dialogue involves (each class's file read once, into
    `docs_cache`, and added to `read`)."""
    classes = rec.get("involved_classes")
    if not isinstance(classes, list) or not all(c in MULTI_TURN_DOCS for c in classes):
        raise InputError(f"{where} (id {rec['id']}): \"involved_classes\" must list BFCL "
                         f"API classes ({', '.join(MULTI_TURN_DOCS)})")
    functions: list[dict] = []
    for cls in classes:
        if cls not in docs_cache:
            dpath = root / "multi_turn_func_doc" / MULTI_TURN_DOCS[cls]
            if not dpath.is_file():
                raise InputError(f"missing function documents {dpath} (needed by {rec['id']})")
            docs_cache[cls] = [r for _, r in _read_records_docs(dpath)]
            read.append(dpath)
        functions += docs_cache[cls]
    return functions


def _gold_turns(answer_at: str, rec_id: str, truth: list[list[str]], by_name: dict[str, dict]) -> list[list[BCall]]:
    """Each turn's ground-truth calls, decoded and named against the dialogue's functions."""
    gold_turns = []
    for k, turn in enumerate(truth):
        calls = []
        for s in turn:
            try:
                parsed = decode_python(s)
            except DecodeError as exc:
                raise InputError(f"{answer_at} (id {rec_id}), turn {k}: cannot parse "
                                 f"ground-truth call {s!r} ({exc})") from None
            calls += [_named(c, by_name) for c in parsed]
        gold_turns.append(calls)
    return gold_turns


def _turn_samples(rec: dict, functions: list[dict], truth: list, gold_turns: list[list[BCall]],
                  version: str) -> list[EvalSample]:
    """One sample per turn of a dialogue; each turn's history holds the earlier turns answered with their gold
    calls."""
    shown = annotate_functions(functions, "python")
    head = system_prompt(shown, version)
    history: list[dict[str, str]] = [{"role": "system", "content": head}]
    samples = []
    for k, turn_msgs in enumerate(rec["question"]):
        user = [{"role": m["role"], "content": m["content"]} for m in turn_msgs]
        if user and user[0]["role"] == "system":  # BFCL merges a question system message
            history[0]["content"] += "\n\n" + user.pop(0)["content"]
        messages = history + user
        samples.append(EvalSample(
            id=f"{rec['id']}#turn{k}", category=PAPER_CATEGORY, messages=copy.deepcopy(messages),
            gold={"calls": [c.to_json() for c in gold_turns[k]], "ground_truth": truth[k]},
            tools=shown,
            meta={"functions": functions, "language": "python", "version": version,
                  "bfcl_id": rec["id"], "turn": k, "tools_in_prompt": True}))
        history = messages + [{"role": "assistant", "content": render_calls(gold_turns[k])}]
    return samples



def _named(call: BCall, docs: dict[str, dict]) -> BCall:
    """The call with its function name resolved (`Class.method` -> `method` when only the method is
    documented) and positional arguments named in the order of the document's parameters."""
    name = call.name
    if name not in docs and "." in name and name.rsplit(".", 1)[1] in docs:
        name = name.rsplit(".", 1)[1]
    args = dict(call.args)
    if call.positional:
        props = list(((docs.get(name) or {}).get("parameters") or {}).get("properties") or {})
        for i, node in enumerate(call.positional):
            key = props[i] if i < len(props) else f"<positional {i}>"
            if key in args:
                key = f"<positional {i}>"
            args[key] = positional_value(node)
    return BCall(name, args)


def _canon(value: Any) -> Any:
    """A value as this protocol compares it: numbers by value (1 == 1.0), tuples as lists, strings exactly.
    Not API-Bank's `_canon`, which reads every value as text the way API-Bank's tool manager does; the two
    benchmarks' rules differ, so each keeps its own."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in value.items()}
    return repr(value)


def _call_key(call: BCall, docs: dict[str, dict]) -> str:
    props = ((docs.get(call.name) or {}).get("parameters") or {}).get("properties") or {}
    args = {}
    for key, value in call.args.items():
        spec = props.get(key)
        if isinstance(spec, dict) and "default" in spec:
            default = None if spec["default"] == "None" else spec["default"]
            if _canon(value) == _canon(default):
                continue
        args[str(key)] = _canon(value)
    return json.dumps([call.name, args], sort_keys=True, default=repr)


def render_calls(calls: list[BCall]) -> str:
    """Calls in BFCL's answer syntax: `[f(a=1, b='x'), g()]`."""
    return "[" + ", ".join(f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.args.items())})"
                           for c in calls) + "]"


def _score_turn(sample: EvalSample, output: str) -> Verdict:
    """One turn: the answer's calls against the turn's ground truth, as a multiset (and in order, `ordered`)."""
    docs = {f["name"]: f for f in sample.meta["functions"]}
    gold = [BCall(c["name"], c["arguments"]) for c in sample.gold["calls"]]
    try:
        calls, _ = decode_answer(output, "python")
        calls = [_named(c, docs) for c in calls]
        parsed: Any = [c.to_json() for c in calls]
        why = ""
    except DecodeError as exc:
        calls, parsed, why = [], None, str(exc)
    want = [_call_key(c, docs) for c in gold]
    got = [_call_key(c, docs) for c in calls]
    correct = Counter(want) == Counter(got)
    ordered = want == got
    if correct:
        reason = ""
    elif not calls and why:
        reason = f"no call decoded ({why}); expected {len(gold)} call(s)"
    else:
        missing = list((Counter(want) - Counter(got)).elements())
        extra = list((Counter(got) - Counter(want)).elements())
        parts = []
        if missing:
            parts.append("missing " + "; ".join(_show(k) for k in missing))
        if extra:
            parts.append("unexpected " + "; ".join(_show(k) for k in extra))
        reason = ", ".join(parts)
    return Verdict(correct, json_safe(parsed), reason, {"accuracy": float(correct), "ordered": float(ordered)})


def _show(key: str) -> str:
    name, args = json.loads(key)
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
