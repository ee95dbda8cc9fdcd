"""Scoring one answer. Official: The official evaluator executes the API on its database and calls the API's own
`check_api_call_correctness(result, ground_truth_result)`. The API implementations (databases, a sentence
embedding model for ToolSearcher, web services) are not run here; the call is judged by its arguments, using
the rule each API's check applies to its inputs (its output being a deterministic function of them):
name equal; the set of parameter names equal to the gold `param_dict`'s (a missing one raises "missing
required positional argument", an unknown one "invalid parameter name"); each value equal after the tool
manager's typing (quoting does not matter: `room_count=2` == `room_count='2'`; values of int/float parameters
compare as numbers, others as text, `'007'` != `'7'`; list parameters compared as lists; strings stripped)
unless the API's check is more lenient, in which case its rule is applied (table `_RULES`): free-text
content/meeting topics pass when the word sets' Jaccard overlap is > 0.5 (lower-cased for reminders); names,
receivers, symptoms, stock codes, user ids and keywords compare case-insensitively; dates/times compare after
the check's `format_check` (zero-padded year, parsed with `%Y-%m-%d` / `%Y-%m-%d %H:%M:%S`);
QueryHistoryToday compares month-day only; Calculator formulas ignore spaces; scene devices compare as a set
by lower-cased name; values the check ignores are not compared (Delete* check only the time, RecordHealthData
ignores `health_data`). DeleteMeeting's official check reads a `time` key the API does not have (a KeyError
the evaluator counts as wrong); here its sibling DeleteAgenda's rule is applied to `start_time`.
Level 3 applies the level-3 APIs' checks (`lv3_apis/*.py`): exact inputs, except AddMeeting's topic (word
overlap), Calculator's formula (spaces) and EmailReminder's content (ignored).
ToolSearcher (judged officially by which tool the embedding search returns) passes when the keyword words
(camel case split, lower-cased) overlap the gold keywords' with Jaccard > 0.5, or contain every word of the
tool the gold search returned (`AddAgenda` -> "add agenda").
Metric: API-call accuracy per level and overall (micro over all API calls), as `evaluator.py` prints it.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from typing import Any

from genenv_cli.core.callparse import Call, CallParseError, load_json, parse_literal
from genenv_cli.evals.base import EvalSample, Verdict
from genenv_cli.families.api_bank.parsing import parse_official, parse_paper

# Per-API value rules, from each API's check_api_call_correctness (apis/*.py). Default: "exact".
_RULES: dict[str, dict[str, str]] = {
    "AddAgenda": {"content": "words"},
    "ModifyAgenda": {"content": "words"},
    "QueryAgenda": {"content": "words"},
    "DeleteAgenda": {"content": "any", "location": "any"},
    "AddMeeting": {"meeting_topic": "words"},
    "ModifyMeeting": {"meeting_topic": "words"},
    "QueryMeeting": {"meeting_topic": "words"},
    "DeleteMeeting": {"meeting_topic": "any", "end_time": "any", "location": "any", "attendees": "any"},
    "AddReminder": {"content": "words_ci"},
    "ModifyReminder": {"content": "words_ci"},
    "QueryReminder": {"content": "words_ci"},
    "DeleteReminder": {"content": "any"},
    "AddScene": {"name": "ci", "devices": "devices"},
    "ModifyScene": {"name": "ci", "devices": "devices"},
    "DeleteScene": {"name": "ci"},
    "QueryScene": {"name": "ci"},
    "AppointmentRegistration": {"date": "date"},
    "QueryRegistration": {"date": "date"},
    "ModifyRegistration": {"new_appointment_date": "date"},
    "TimedSwitch": {"name": "ci", "time": "datetime"},
    "CancelTimedSwitch": {"name": "ci", "time": "datetime"},
    "Calculator": {"formula": "nospace"},
    "Dictionary": {"keyword": "ci_underscore"},
    "Wiki": {"keyword": "ci_underscore"},
    "PlayMusic": {"music_name": "ci"},
    "SearchEngine": {"keyword": "ci"},
    "EmergencyKnowledge": {"symptom": "ci"},
    "SymptomSearch": {"symptom": "ci"},
    "QueryHealthData": {"user_id": "ci", "start_time": "datetime", "end_time": "datetime"},
    "RecordHealthData": {"user_id": "ci", "time": "datetime", "health_data": "any"},
    "QueryStock": {"stock_code": "ci", "date": "date"},
    "QueryHistoryToday": {"date": "monthday"},
    "SendEmail": {"receiver": "ci"},
    "Translate": {"src_lang": "ci", "tgt_lang": "ci"},
    "ToolSearcher": {"keywords": "toolsearch"},
}
# Level 3 runs other API implementations (lv3_apis/*.py); their checks compare inputs exactly except these.
_RULES_LV3: dict[str, dict[str, str]] = {
    "AddMeeting": {"meeting_topic": "words"},
    "Calculator": {"formula": "nospace"},
    "EmailReminder": {"content": "any"},
    "ToolSearcher": {"keywords": "toolsearch"},
}


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _canon(value: Any, numeric: bool = False) -> Any:
    """The tool manager's view of a value: the `[Name(k=v)]` regex reads every value as text (quoted or not),
    list parameters are parsed, and only int/float parameters are converted to numbers. Not BFCL's `_canon`
    (bfcl/multi_turn.py), which compares numbers by value and strings exactly as BFCL's executable checks do:
    the two benchmarks' official rules differ, so each keeps its own."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        return float(value) if numeric else str(value)
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in "[{" and s[-1:] in "]}":
            try:  # bounded readers: a model's thousand brackets or signs stay a string, never a crash
                return _canon(load_json(s, "argument"))
            except CallParseError:
                try:
                    return _canon(parse_literal(s, "argument"))
                except CallParseError:
                    return s
        if numeric and _NUMBER.match(s):
            return float(s)
        return s
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in value.items()}
    return value


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else json.dumps(value) if isinstance(value, list | dict) else str(
        value).strip()


def _norm_date(value: Any, fmt: str) -> str | None:
    s = _text(value)
    parts = s.split("-")
    if len(parts) == 3 and len(parts[0]) != 4:
        parts[0] = parts[0].zfill(4)
        s = "-".join(parts)
    try:
        return _dt.datetime.strptime(s, fmt).strftime(fmt)
    except ValueError:
        return None


def _month_day(value: Any) -> str | None:
    """QueryHistoryToday's filter_date_format: month-day of `%Y-%m-%d` or `%m-%d`."""
    full = _norm_date(value, "%Y-%m-%d")
    if full is not None:
        return full[5:]
    try:
        return _dt.datetime.strptime(_text(value), "%m-%d").strftime("%m-%d")
    except ValueError:
        return None


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _kw_words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", _CAMEL.sub(" ", text).lower()))


def _devices(value: Any) -> Any:
    items = _canon(value)
    if not isinstance(items, list) or not all(isinstance(d, dict) for d in items):
        return items
    out = [{**d, "name": _text(d.get("name", "")).lower(), "description": _text(d.get("description", ""))}
           for d in items]
    return sorted(out, key=lambda d: d["name"])


def _value_ok(rule: str, gold: Any, pred: Any, gold_call: dict[str, Any], numeric: bool = False) -> bool:
    if rule == "any":
        return True
    if rule in ("words", "words_ci"):
        want, got = _text(gold), _text(pred)
        if rule == "words_ci":
            want, got = want.lower(), got.lower()
        return _jaccard(set(want.split(" ")), set(got.split(" "))) > 0.5
    if rule == "ci":
        return _text(gold).lower() == _text(pred).lower()
    if rule == "ci_underscore":
        return _text(gold).replace("_", " ").strip().lower() == _text(pred).replace("_", " ").strip().lower()
    if rule == "nospace":
        return _text(gold).replace(" ", "") == _text(pred).replace(" ", "")
    if rule in ("date", "datetime", "monthday"):
        norm = {"date": lambda v: _norm_date(v, "%Y-%m-%d"), "datetime": lambda v: _norm_date(v, "%Y-%m-%d %H:%M:%S"),
                "monthday": _month_day}[rule]
        want, got = norm(gold), norm(pred)
        if want is None:  # the gold itself is not in the format: compare as written
            return _canon(gold, numeric) == _canon(pred, numeric)
        return want == got
    if rule == "devices":
        return _devices(gold) == _devices(pred)
    if rule == "toolsearch":
        pw, gw = _kw_words(_text(pred)), _kw_words(_text(gold))
        if not pw:
            return False
        if gw and _jaccard(gw, pw) > 0.5:
            return True
        found = gold_call.get("retrieves") or []
        target = [n for n in found if n != "GetUserToken"] or found
        return bool(target) and _kw_words(target[-1]) <= pw
    return _canon(gold, numeric) == _canon(pred, numeric)


def check_official(gold: dict[str, Any], call: Call, level: str = "level-1",
                   types: dict[str, str] | None = None) -> tuple[str | None, str]:
    """(error kind or None, reason) for one parsed call against the gold API call; `types` are the declared
    parameter types (int/float values compare as numbers, others as text)."""
    if call.name != gold["name"]:
        return "name", f"API name mismatch: {call.name} vs {gold['name']}"
    rules = (_RULES_LV3 if level == "level-3" else _RULES).get(gold["name"], {})
    g_args, p_args = gold["arguments"], call.arguments
    missing = [k for k in g_args if k not in p_args]
    if missing:
        return "missing", f"missing parameter(s) {', '.join(missing)}"
    unknown = [k for k in p_args if k not in g_args]
    if unknown:
        return "unknown", f"unexpected parameter(s) {', '.join(unknown)}"
    for key, want in g_args.items():
        numeric = (types or {}).get(key) in ("int", "float")
        if not _value_ok(rules.get(key, "exact"), want, p_args[key], gold, numeric):
            return "value", f"wrong value for {key}: {p_args[key]!r} (expected {want!r})"
    return None, ""


def score(sample: EvalSample, output: str, protocol: str) -> Verdict:
    """The verdict on one raw answer, by the official rules or (`protocol="paper"`) ToolRL's soft match."""
    if protocol == "paper":
        return score_paper(sample, output)
    try:
        calls = parse_official(output)
    except CallParseError as exc:
        return Verdict(False, {"calls": [], "error": "parse"}, f"parse error: {exc}", {"correct": 0.0})
    parsed = {"calls": [c.to_dict() for c in calls], "error": None}
    if not calls:
        kind, reason = "no_call", "no API call found"
    elif len(calls) > 1:
        kind, reason = "extra_call", f"expected one API call, got {len(calls)}"
    else:
        kind, reason = check_official(sample.gold, calls[0], sample.category, sample.meta.get("param_types"))
    parsed["error"] = kind
    return Verdict(kind is None, parsed, reason, {"correct": float(kind is None)})

def score_paper(sample: EvalSample, output: str) -> Verdict:
    """ToolRL's soft match: right when any parsed call has exactly the gold name and parameters."""
    calls = parse_paper(output)
    gold = sample.gold
    ok = False
    for c in calls:
        if "bare" in c:
            ok = c["bare"] == gold["arguments"]
        else:
            ok = c["name"] == gold["name"] and c["parameters"] == gold["arguments"]
        if ok:
            break
    if ok:
        kind, reason = None, ""
    elif not calls:
        kind, reason = "no_call", "no tool call found"
    elif not any(c.get("name") == gold["name"] for c in calls):
        kind, reason = "name", f"no call to {gold['name']}"
    else:
        kind, reason = "value", f"no call to {gold['name']} with exactly the gold parameters"
    return Verdict(ok, {"calls": calls, "error": kind}, reason, {"correct": float(ok)})
