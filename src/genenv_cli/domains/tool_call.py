"""`tool_call`: the agent answers a request by calling tools (API-Bank / BFCL style).

**Task** (`payload` in tasks.jsonl): `{"request": str, "tools": [tool names], "calls": [{"name", "arguments"}]}`.
Tools are named from the domain's library (`data/tool_call_tools.json`, JSON-schema function specs as BFCL
and OpenAI function calling write them); `calls` are the gold calls, `[]` when no offered tool fits. Shapes:
`single`, `conversion` (arguments need converting: units, dates, enums), `multiple` (one right tool among
several), `parallel` (several calls, any order), `no_tool`.

**Agent output format.** One block per call, JSON inside:

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
    </tool_call>

and plain text with no block when no tool fits: at least one letter or digit, no control characters, no broken
call syntax (`plaintext.plain_answer_problem`; an empty or degenerate completion is wrong). (A completion that is as a whole a JSON call object or list
is read too; see `callparse.parse_tool_calls`.)

**R_agent** is an exact structured match: the same multiset of calls — names equal, arguments equal after
type-aware normalisation (integers and integral floats alike, numbers to 1e-9, booleans strict, strings
compared after BFCL's normalisation, enums likewise, omitted optional arguments equal to their schema
default), parallel calls in any order, and no call at all when none is right. `partial` (recorded, not the
reward) is the best one-to-one pairing's mean argument agreement, over max(#predicted, #gold) calls.

**Environment format.** The environment writes a task as three labelled lines:

    REQUEST: <the user's message>
    TOOLS: tool_a, tool_b
    CALLS: [{"name": "tool_a", "arguments": {...}}]

which is parsed (the first such block; text after it is ignored) and checked against the library (known and
offered tools, required arguments, types, enums, date/time formats). Anything else is rejected with the reason.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from genenv_cli.core.callparse import CallParseError, parse_tool_calls, standardize_string
from genenv_cli.core.plaintext import plain_answer_problem
from genenv_cli.domains.base import Domain, EnvContext, Reject, SeedTask, TaskVerdict, stats_lines

SHAPES = ("single", "conversion", "multiple", "parallel", "no_tool")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")

AGENT_SYSTEM = """You are a function-calling assistant. You can call these tools:
<tools>
{tools}
</tools>
To call a tool, answer with one block per call, exactly like this:
<tool_call>
{{"name": "<tool name>", "arguments": {{<arguments as JSON>}}}}
</tool_call>
Use several blocks when several calls are needed. Give argument values in the units and formats the tool \
asks for (dates as YYYY-MM-DD, times as HH:MM). If no tool fits the request, answer in plain text without \
any tool call."""

ENV_SYSTEM = """You write tasks for training a function-calling assistant. Each task is a user request, the \
tools offered, and the exact correct calls. Write exactly three lines and nothing else:
REQUEST: <the user's message>
TOOLS: <tool names offered, comma-separated>
CALLS: <JSON list of the correct calls; [] if no offered tool fits>
Tools you may offer (JSON schemas):
{tools}"""


def _load_json(name: str) -> Any:
    return json.loads(resources.files("genenv_cli.domains").joinpath("data", name).read_text(encoding="utf-8"))


def _type_error(value: Any, spec: dict[str, Any], where: str) -> str | None:
    """Why `value` does not fit the JSON-schema `spec`, or None."""
    typ = spec.get("type")
    if typ == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool) or (
            isinstance(value, float) and value.is_integer())
    elif typ == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif typ == "boolean":
        ok = isinstance(value, bool)
    elif typ == "string":
        ok = isinstance(value, str)
    elif typ == "array":
        if not isinstance(value, list):
            return f"{where} must be an array, got {json.dumps(value)[:40]}"
        for i, item in enumerate(value):
            err = _type_error(item, spec.get("items", {}), f"{where}[{i}]")
            if err:
                return err
        return None
    else:
        ok = True
    if not ok:
        return f"{where} must be {typ}, got {json.dumps(value)[:40]}"
    if "enum" in spec and standardize_string(str(value)) not in {standardize_string(str(e)) for e in spec["enum"]}:
        return f"{where} must be one of {spec['enum']}, got {json.dumps(value)[:40]}"
    fmt = spec.get("format")
    if fmt == "date" and not _DATE.match(value):
        return f"{where} must be a YYYY-MM-DD date, got {value!r}"
    if fmt == "time" and not _TIME.match(value):
        return f"{where} must be an HH:MM time, got {value!r}"
    return None


def _norm(value: Any, spec: dict[str, Any]) -> Any:
    """A comparable form of a schema-valid value."""
    typ = spec.get("type")
    if typ == "integer":
        return int(value)
    if typ == "number":
        return float(value)
    if typ == "string":
        return standardize_string(value)
    if typ == "array":
        return tuple(_norm(v, spec.get("items", {})) for v in value)
    return value


def _same_args(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for k, v in a.items():
        w = b[k]
        if v != w and not (type(v) is float and type(w) is float and math.isclose(v, w, rel_tol=1e-9, abs_tol=1e-9)):
            return False
    return True


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


class ToolCallDomain(Domain):
    name = "tool_call"
    description = "Answer a request with the right tool calls (API-Bank / BFCL style), exact structured match."
    shapes = SHAPES
    seed_file = "tool_call_seeds.jsonl"
    payload_keys = ("request", "tools", "calls")
    code_modules = ("genenv_cli.core.callparse", "genenv_cli.core.plaintext")  # the answer parser and the "no call" rule

    @cached_property
    def library(self) -> dict[str, dict[str, Any]]:
        return {t["name"]: t for t in _load_json("tool_call_tools.json")}

    seed_format = ('JSON lines like data/tool_call_seeds.jsonl: {"id", "split" (optional), "shape", "request", '
                   '"tools", "calls"}, tools named from the domain\'s library')

    def read_seeds(self, path: Path) -> list[SeedTask]:
        from genenv_cli.domains.seedfiles import read_seed_jsonl

        return read_seed_jsonl(path, self.payload_keys,
                               shape_of=lambda p: self._shape(p, "single"), check=self.check_payload)

    @functools.cache  # noqa: B019 - one instance per process (get_domain)
    def data_fingerprint(self) -> str:
        h = hashlib.sha256()
        for name in ("tool_call_tools.json", "tool_call_seeds.jsonl"):
            h.update(resources.files("genenv_cli.domains").joinpath("data", name).read_bytes())
        return h.hexdigest()[:16]

    # ------------------------------------------------------------ prompts

    def _schemas(self, names: list[str]) -> str:
        return "\n".join(json.dumps(self.library[n], ensure_ascii=False) for n in names if n in self.library)

    def agent_messages(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        return [{"role": "system", "content": AGENT_SYSTEM.format(tools=self._schemas(payload["tools"]))},
                {"role": "user", "content": payload["request"]}]

    @staticmethod
    def render_task(payload: dict[str, Any]) -> str:
        """A task in the environment's three-line format (also its few-shot example)."""
        calls = json.dumps(payload["calls"], ensure_ascii=False)
        return f"REQUEST: {payload['request']}\nTOOLS: {', '.join(payload['tools'])}\nCALLS: {calls}"

    def env_messages(self, ctx: EnvContext) -> list[dict[str, str]]:
        """Statistics and the difficulty hint go in the system message, the example task last in the user message
        (small models otherwise repeat the statistics instead of writing a task; see the arith domain)."""
        offered = list(dict.fromkeys(ctx.parent["tools"]))
        for ex in ctx.frontier:
            offered += [t for t in ex["tools"] if t not in offered]
        context = stats_lines(ctx, thing="task", aim="a task the assistant")
        user = ["A task at the right difficulty:\n" + self.render_task(ex) for ex in ctx.frontier]
        user.append("Example task:\n" + self.render_task(ctx.parent))
        user.append("Write one new task like the example, with a different request and different argument values.")
        system = ENV_SYSTEM.format(tools=self._schemas(offered)) + "\n\n" + " ".join(context)
        return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(user)}]

    # ------------------------------------------------------------ environment output

    def parse_env_output(self, text: str, ctx: EnvContext) -> tuple[dict[str, Any], str]:
        """The first REQUEST/TOOLS/CALLS block of the output; text after it (a small model often goes on to
        write a second example) is ignored."""
        fields: dict[str, str] = {}
        current = None
        for line in text.strip().splitlines():
            m = re.match(r"^\s*(REQUEST|TOOLS|CALLS)\s*:\s*(.*)$", line, re.IGNORECASE)
            if m:
                current = m.group(1).upper()
                if current in fields:
                    break  # a second task begins
                fields[current] = m.group(2)
            elif current == "CALLS":
                fields[current] += "\n" + line
            elif current == "REQUEST" and line.strip():
                fields[current] += " " + line.strip()
        for key in ("REQUEST", "TOOLS", "CALLS"):
            if key not in fields:
                raise Reject(f"parse: no {key}: line")
        request = fields["REQUEST"].strip()
        if len(request) < 8:
            raise Reject("invalid: request too short")
        tools = [t.strip().strip("`'\"") for t in fields["TOOLS"].split(",") if t.strip()]
        try:
            calls, _ = json.JSONDecoder().raw_decode(fields["CALLS"].strip())
        except json.JSONDecodeError as exc:
            raise Reject(f"parse: CALLS is not JSON ({exc.msg})") from None
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number, a thousand brackets: a bad generation
            raise Reject(f"parse: CALLS cannot be read ({type(exc).__name__})") from None
        payload = {"request": request, "tools": tools, "calls": calls}
        problem = self.check_payload(payload)
        if problem:
            raise Reject(f"invalid: {problem}")
        return payload, self._shape(payload, ctx.parent_shape)

    @staticmethod
    def _shape(payload: dict[str, Any], parent_shape: str) -> str:
        if not payload["calls"]:
            return "no_tool"
        if len(payload["calls"]) > 1:
            return "parallel"
        if len(payload["tools"]) > 1:
            return "multiple"
        return "conversion" if parent_shape == "conversion" else "single"

    def check_payload(self, payload: Any) -> str | None:
        if not isinstance(payload, dict):
            return "payload must be a JSON object"
        if not isinstance(payload.get("request"), str) or not payload["request"].strip():
            return "request must be a non-empty string"
        tools = payload.get("tools")
        if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
            return "tools must be a non-empty list of tool names"
        if len(set(tools)) != len(tools):
            return "a tool is offered twice"
        for t in tools:
            if t not in self.library:
                return f"unknown tool {t!r}"
        calls = payload.get("calls")
        if not isinstance(calls, list):
            return "calls must be a list"
        for i, call in enumerate(calls):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str) \
                    or not isinstance(call.get("arguments", {}), dict):
                return f"call {i + 1} must be {{\"name\": ..., \"arguments\": {{...}}}}"
            if call["name"] not in tools:
                return f"call {i + 1} uses {call['name']!r}, which is not offered"
            err = self._check_args(call["name"], call.get("arguments", {}))
            if err:
                return err
        return None

    def _check_args(self, name: str, args: dict[str, Any]) -> str | None:
        params = self.library[name]["parameters"]
        props = params.get("properties", {})
        for key, value in args.items():
            if key not in props:
                return f"{name}: unknown argument {key!r}"
            err = _type_error(value, props[key], f"{name}.{key}")
            if err:
                return err
        for req in params.get("required", []):
            if req not in args:
                return f"{name}: missing required argument {req!r}"
        return None

    def dedup_text(self, payload: dict[str, Any]) -> str:
        return payload["request"]

    # ------------------------------------------------------------ scoring

    def _canonical(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        props = self.library[name]["parameters"].get("properties", {})
        out = {}
        for key, spec in props.items():
            if key in args:
                out[key] = _norm(args[key], spec)
            elif "default" in spec:
                out[key] = _norm(spec["default"], spec)
        return out

    @staticmethod
    def _arg_agreement(pred: dict[str, Any], gold: dict[str, Any]) -> float:
        keys = pred.keys() | gold.keys()
        if not keys:
            return 1.0
        same = 0
        for k in keys:
            if k in pred and k in gold and _equal(pred[k], gold[k]):
                same += 1
        return same / len(keys)

    def _gold(self, payload: dict[str, Any]) -> tuple[list[tuple[str, dict[str, Any]]], frozenset[str]]:
        """The payload's gold calls in canonical form, and the offered tools."""
        return ([(g["name"], self._canonical(g["name"], g.get("arguments", {}))) for g in payload["calls"]],
                frozenset(payload["tools"]))

    def score(self, payload: dict[str, Any], completion: str) -> TaskVerdict:
        return self._score(completion, self._gold(payload))

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        blocks = [f"<tool_call>\n{json.dumps({'name': c['name'], 'arguments': c.get('arguments', {})})}\n</tool_call>"
                  for c in payload["calls"]]
        return "".join(blocks) or "No tool fits that."

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        call = {"name": "send_fax", "arguments": {"to": "nobody"}}  # a tool never offered
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    def score_many(self, payloads: list[dict[str, Any]], completions: list[str]) -> list[TaskVerdict]:
        """As score(), with each task's canonical gold computed once for all its completions."""
        cache: dict[int, tuple[list[tuple[str, dict[str, Any]]], frozenset[str]]] = {}
        out = []
        for p, c in zip(payloads, completions, strict=True):
            gold = cache.get(id(p))
            if gold is None:
                gold = cache[id(p)] = self._gold(p)
            out.append(self._score(c, gold))
        return out

    def _score(self, completion: str, gold: tuple[list[tuple[str, dict[str, Any]]], frozenset[str]]) -> TaskVerdict:
        gold_c, offered = gold
        try:
            calls = parse_tool_calls(completion)
        except CallParseError as exc:
            return TaskVerdict(0.0, 0.0, False, f"unparseable: {exc}")
        if not calls:
            if not gold_c:
                problem = plain_answer_problem(completion)  # "no call" is right only as a plain-text answer
                return TaskVerdict(0.0, 0.0, False, problem) if problem else TaskVerdict(1.0, 1.0, True, None)
            return TaskVerdict(0.0, 0.0, True, f"no call, expected {len(gold_c)}")
        if not gold_c:
            return TaskVerdict(0.0, 0.0, True, f"called {calls[0].name} but no offered tool fits")
        pred = []
        for c in calls:
            if c.name not in offered or c.name not in self.library:
                return TaskVerdict(0.0, 0.0, False, f"called {c.name!r}, which is not offered")
            err = self._check_args(c.name, c.arguments)
            if err and ("unknown argument" in err or "must be" in err):
                raw = [(x.name, dict(x.arguments)) for x in calls]  # not canonicalisable: compare as given
                return TaskVerdict(0.0, self._partial(raw, gold_c), False, err)
            pred.append((c.name, self._canonical(c.name, c.arguments), err))
        canon = [(name, args) for name, args, _ in pred]
        if len(pred) != len(gold_c):
            return TaskVerdict(0.0, self._partial(canon, gold_c), True, f"{len(pred)} calls, expected {len(gold_c)}")
        unmatched = list(range(len(gold_c)))
        for name, args, err in pred:
            hit = None
            for j in unmatched:
                if gold_c[j][0] == name and _same_args(args, gold_c[j][1]):
                    hit = j
                    break
            if hit is None:
                return TaskVerdict(0.0, self._partial(canon, gold_c), True, err or f"{name} call does not match a gold call")
            unmatched.remove(hit)
        return TaskVerdict(1.0, 1.0, True, None)

    def _partial(self, pred: list[tuple[str, dict[str, Any]]], gold_c: list[tuple[str, dict[str, Any]]]) -> float:
        """Greedy one-to-one pairing of predicted and gold calls (same name) by argument agreement, over
        max(#predicted, #gold)."""
        pairs = []
        for i, (pname, pargs) in enumerate(pred):
            for j, (gname, gargs) in enumerate(gold_c):
                if pname == gname:
                    pairs.append((self._arg_agreement(pargs, gargs), i, j))
        pairs.sort(reverse=True)
        used_i, used_j, total = set(), set(), 0.0
        for s, i, j in pairs:
            if i not in used_i and j not in used_j:
                used_i.add(i)
                used_j.add(j)
                total += s
        return total / max(len(pred), len(gold_c))
