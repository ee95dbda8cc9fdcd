"""`bfcl`: BFCL's single-turn function-calling items, scored by the `bfcl` evaluation suite's AST checker.

**Task** (`payload`): one BFCL item, its question-file record and its possible-answer record merged:
`{"category", "question": [[{role, content}, ...]], "function": [function documents], "ground_truth":
[{func_name: {param: [allowed values]}}]}` (`[]` for irrelevance), plus `"version"` (v4 unless the seed file was
v3: the prompt lists the documents as that version did). Categories are BFCL's AST and irrelevance categories;
the shape is the kind of item: `simple`, `multiple`, `parallel`, `parallel_multiple`, `irrelevance`.
`live_relevance` items have no ground truth; as seeds they are left out (category not trainable).

**Agent prompt and R_agent**: the `bfcl` suite's (`families/bfcl/`: `prompt_messages`, `annotate_functions`,
`BFCL.score` with the official protocol): the answer `[func(a=1), g(b='x')]` is decoded and judged by BFCL's AST
rules; reward 1 when the suite says correct, else 0.

**Environment format**: one JSON object in BFCL's format, `{"question": [[{"role": "user", "content": ...}]],
"function": [...], "ground_truth": [...]}` (a bare string question is accepted). The category follows from its
structure: no ground truth -> irrelevance; one expected call -> simple (one function) or multiple (several);
several calls -> parallel (one function) or parallel_multiple.

**Self-consistency** (`check_payload`, for seeds and generated items alike): the documents are well formed
(`parameters.properties`, required parameters documented, names unique), every possible answer names a
documented function and documented parameters, every required parameter has an allowed value, the structure fits
the category, generated items' allowed values are of their documented types, and -- the benchmark's own rule --
the gold answer built from the first allowed value of every
parameter, written in BFCL's answer syntax, is judged correct by the suite's scorer against the item's own
documents (Python items; for Java/JavaScript seeds the structure is checked). Release items (seeds) follow
BFCL's rules only: the environment's extra rules (a user message of 8 characters or more, a non-empty function
list, possible answers naming documented parameters only, typed values) apply to generated items.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_cli.core.plaintext import plain_answer_problem
from genenv_cli.domains.base import EnvContext, Reject, SeedTask, TaskVerdict
from genenv_cli.domains.family import FamilyDomain
from genenv_cli.evals.base import EvalSample
from genenv_cli.families.bfcl.calls import BCall
from genenv_cli.families.bfcl.categories import AST_CATEGORIES, language_of
from genenv_cli.families.bfcl.multi_turn import render_calls
from genenv_cli.families.bfcl.prompts import annotate_functions, prompt_messages, system_prompt
from genenv_cli.families.bfcl.values import PY_TYPES

SHAPES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")
CATEGORIES = (*AST_CATEGORIES, "irrelevance", "live_irrelevance")
GENERATED_CATEGORY = {"simple": "simple_python", "multiple": "multiple", "parallel": "parallel",
                      "parallel_multiple": "parallel_multiple", "irrelevance": "irrelevance"}

ENV_SYSTEM = """You write test items for a function-calling assistant, in the format of the Berkeley Function \
Calling Leaderboard (BFCL). An item is one JSON object with three keys:
"question": [[{"role": "user", "content": "<the user's request>"}]],
"function": a list of function documents, each {"name": ..., "description": ..., "parameters": {"type": "dict", \
"properties": {<param>: {"type": "integer|float|string|boolean|array|dict", "description": ...}}, "required": \
[...]}},
"ground_truth": a list with one entry per expected call, each {"<function name>": {"<param>": [<allowed values>]}}; \
list every acceptable value of a parameter, and add "" to an optional parameter's list when it may be left out. \
Use [] when none of the functions fits the request.
Every value in "ground_truth" must be of its parameter's type and the request must state it. Write the JSON \
object and nothing else."""


def shape_of(category: str) -> str:
    for shape in ("irrelevance", "parallel_multiple", "parallel", "multiple"):
        if shape in category:
            return shape
    return "simple"


def _first(allowed: list[Any]) -> tuple[bool, Any]:
    """(present, value): the first allowed value that is not "" (an optional parameter left out otherwise)."""
    for v in allowed:
        if v != "":
            return True, v
    return False, None


def _gold_value(value: Any, spec: dict[str, Any]) -> Any:
    """A possible-answer option as a concrete value: dict options hold allowed-value lists per key."""
    typ = spec.get("type")
    if typ == "dict" and isinstance(value, dict):
        out = {}
        for k, allowed in value.items():
            present, v = _first(allowed) if isinstance(allowed, list) else (True, allowed)
            if present:
                out[k] = v
        return out
    if typ in ("array", "list") and isinstance(value, list) and value and all(isinstance(d, dict) for d in value) \
            and (spec.get("items") or {}).get("type") == "dict":
        return [_gold_value(d, {"type": "dict"}) for d in value]
    return value


def gold_calls(payload: dict[str, Any]) -> list[BCall]:
    """The item's gold answer: one call per possible answer, each parameter at its first allowed value."""
    docs = {f["name"]: f for f in payload["function"]}
    calls = []
    for answer in payload["ground_truth"]:
        name, params = next(iter(answer.items()))
        props = docs[name]["parameters"].get("properties", {})
        args = {}
        for param, allowed in params.items():
            # A release item may list a parameter its document lacks; BFCL's checker accepts it left out when
            # "" is allowed (and refuses it given, as an unexpected parameter), so the gold leaves it out.
            present, v = (False, None) if param not in props and "" in allowed else _first(allowed)
            if present:
                args[param] = _gold_value(v, props.get(param, {}))
        calls.append(BCall(name, args))
    return calls


_JAVA_ELEMENT = {"integer": "int", "long": "long", "double": "double", "float": "float", "boolean": "boolean",
                 "char": "char", "String": "String", "any": "Object"}


def _option(v: Any) -> Any:
    """A dict option's key value: its first allowed value (possible answers list them)."""
    return _first(v)[1] if isinstance(v, list) else v


def _java_source(value: Any, typ: str, item: str | None, nested: bool = False) -> str:
    """A possible-answer value as Java source that BFCL's Java decoder and type converter read back as that
    value: a top-level string is quoted (the decoder drops the quotes), a collection's elements are not (its
    converter keeps them); numbers carry the type's suffix."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if typ == "long" and isinstance(value, int):
        return f"{value}L"
    if typ == "float" and isinstance(value, int | float):
        return f"{value}f"
    if typ in ("Array", "ArrayList") and isinstance(value, list):
        parts = ", ".join(_java_source(v, item or "any", None, True) for v in value)
        if typ == "Array":
            return f"new {_JAVA_ELEMENT.get(item or 'any', item)}[]{{{parts}}}"
        return f"new ArrayList<>(Arrays.asList({parts}))"
    if typ == "HashMap" and isinstance(value, dict):
        puts = " ".join(f"put({json.dumps(str(k))}, {json.dumps(_option(v))});" for k, v in value.items())
        return f"new HashMap<String, String>() {{{{ {puts} }}}}"
    if isinstance(value, str):  # a string holding quotes is Java source already (`new X("a", 1)`)
        return value if nested or '"' in value else json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


def _js_source(value: Any, typ: str, item: str | None, nested: bool = False) -> str:
    """A possible-answer value as JavaScript source that BFCL's JavaScript decoder and converter read back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if typ == "Bigint" and isinstance(value, int):
        return f"{value}n"
    if typ == "array" and isinstance(value, list):
        return "[" + ", ".join(_js_source(v, item or "any", None, True) for v in value) + "]"
    if typ == "dict" and isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_js_source(v, 'any', None, True)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


def gold_answer(payload: dict[str, Any]) -> str:
    """The gold answer as the agent should write it: BFCL's syntax, each value written in the item's language
    (Python literals; Java/JavaScript source, as BFCL's type converters read it); plain text for irrelevance."""
    if not payload["ground_truth"]:
        return "None of the functions can be used for this request."
    language = language_of(payload["category"])
    if language == "python":
        return render_calls(gold_calls(payload))
    write = _java_source if language == "java" else _js_source
    docs = {f["name"]: f for f in payload["function"]}
    calls = []
    for call in gold_calls(payload):
        props = docs[call.name]["parameters"].get("properties", {})
        args = []
        for k, v in call.args.items():
            spec = props.get(k, {})
            args.append(f"{k}={write(v, str(spec.get('type', 'any')), (spec.get('items') or {}).get('type'))}")
        calls.append(f"{call.name}({', '.join(args)})")
    return "[" + ", ".join(calls) + "]"


class BFCLDomain(FamilyDomain):
    name = "bfcl"
    code_modules = ("genenv_cli.core.plaintext",)  # the stricter "no call" rule on top of the suite's verdict
    description = "BFCL single-turn items (simple, multiple, parallel, irrelevance), scored by the bfcl suite's AST checker."
    shapes = SHAPES
    benchmark = "bfcl"
    seed_file = "bfcl_seeds.jsonl"
    env_system = ENV_SYSTEM
    seed_format = ("a BFCL question file BFCL_v4_<category>.json (or v3) with possible_answer/<same name> beside it, "
                   "as `genenv evaluate --bench bfcl --data FILE` reads it")

    # ------------------------------------------------------------ suite bridge

    def sample(self, payload: dict[str, Any]) -> EvalSample:
        cat = payload["category"]
        version = payload.get("version", "v4")
        language = language_of(cat)
        shown = annotate_functions(payload["function"], language)
        if "irrelevance" in cat:
            gold: Any = {"expect": "no_call"}
        else:
            gold = {"possible_answer": payload["ground_truth"]}
        return EvalSample(id=str(payload.get("id", "item")), category=cat,
                          messages=prompt_messages(payload["question"][0], shown, version), gold=gold, tools=shown,
                          meta={"functions": payload["function"], "language": language, "version": version,
                                "tools_in_prompt": True})

    def valid(self, verdict: Any) -> bool:
        return verdict.correct or verdict.parsed is not None

    def score(self, payload: dict[str, Any], completion: str) -> TaskVerdict:
        """The suite's verdict, except that on an irrelevance item "no call decoded" earns the reward only as a
        plain-text answer: BFCL's rule passes any undecodable text (an empty or degenerate completion too),
        which `evaluate` keeps, but training must not reward it."""
        if not payload["ground_truth"]:
            problem = plain_answer_problem(completion)
            if problem:
                return TaskVerdict(0.0, 0.0, False, problem)
        return super().score(payload, completion)

    def seed_from_sample(self, sample: EvalSample) -> SeedTask:
        version = sample.meta.get("version", "v4")
        language = sample.meta.get("language", "python")
        messages = [dict(m) for m in sample.messages]
        head = system_prompt(annotate_functions(sample.meta["functions"], language), version)
        first = messages.pop(0)  # the suite's system prompt, with the question's own system message after it
        rest = first["content"][len(head):].removeprefix("\n\n")
        if rest:
            messages.insert(0, {"role": "system", "content": rest})
        truth = [] if "relevance" in sample.category else sample.gold["possible_answer"]
        payload = {"category": sample.category, "question": [messages], "function": sample.meta["functions"],
                   "ground_truth": truth}
        if version != "v4":
            payload["version"] = version
        return SeedTask(sample.id, "", shape_of(sample.category), payload)

    def seed_files(self, path: Path) -> list[tuple[Path, str]]:
        out = [(path, path.name)]
        answers = path.parent / "possible_answer" / path.name
        if answers.is_file():
            out.append((answers, f"possible_answer/{path.name}"))
        return out

    # ------------------------------------------------------------ environment

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        return gold_answer(payload)

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        if not payload["ground_truth"]:  # irrelevance: any call is wrong
            return f"[{payload['function'][0]['name']}()]" if payload["function"] else "[no_such_function()]"
        return "I cannot help with that."

    def render_item(self, payload: dict[str, Any]) -> str:
        return json.dumps({"question": payload["question"], "function": payload["function"],
                           "ground_truth": payload["ground_truth"]}, ensure_ascii=False)

    def item_from_json(self, obj: dict[str, Any], ctx: EnvContext) -> tuple[dict[str, Any], str]:
        missing = [k for k in ("question", "function", "ground_truth") if k not in obj]
        if missing:
            raise Reject(f"parse: the item has no {', '.join(missing)}")
        question = obj["question"]
        if isinstance(question, str):
            question = [[{"role": "user", "content": question}]]
        truth = obj["ground_truth"]
        if not isinstance(truth, list):
            raise Reject("invalid: ground_truth must be a list")
        functions = obj["function"]
        if not isinstance(functions, list):
            raise Reject("invalid: function must be a list of function documents")
        if not truth:
            shape = "irrelevance"
        elif len(truth) == 1:
            shape = "simple" if len(functions) == 1 else "multiple"
        else:
            shape = "parallel" if len(functions) == 1 else "parallel_multiple"
        payload = {"category": GENERATED_CATEGORY[shape], "question": question, "function": functions,
                   "ground_truth": truth}
        problem = self.check_payload(payload, generated=True)
        if problem:
            raise Reject(f"invalid: {problem}")
        return payload, shape

    # ------------------------------------------------------------ self-consistency

    def check_payload(self, payload: Any, generated: bool = False) -> str | None:
        """None when the item is self-consistent; `generated` adds the type rule (see the module docstring)."""
        if not isinstance(payload, dict):
            return "payload must be a JSON object"
        cat = payload.get("category")
        if cat not in CATEGORIES:
            return f"category {cat!r} is not a BFCL AST or irrelevance category"
        q = payload.get("question")
        if not (isinstance(q, list) and len(q) == 1 and isinstance(q[0], list) and q[0] and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                and (m["content"].strip() or not generated) for m in q[0])):
            return "question must be one turn: [[{\"role\", \"content\"}, ...]] with non-empty contents"
        if q[0][-1]["role"] != "user":
            return "the question must end with a user message"
        if generated and len(q[0][-1]["content"].strip()) < 8:
            return "the question must end with a user message of at least 8 characters"
        problem = _check_documents(payload.get("function"), allow_empty=not generated)
        if problem:
            return problem
        truth = payload.get("ground_truth")
        if not isinstance(truth, list):
            return "ground_truth must be a list"
        shape = shape_of(cat)
        if shape == "irrelevance":
            return None if not truth else "an irrelevance item has no ground truth ([])"
        if not truth:
            return f"a {cat} item needs a ground truth"
        if shape in ("simple", "multiple") and len(truth) != 1:
            return f"a {cat} item expects exactly one call, the ground truth has {len(truth)}"
        if shape in ("parallel", "parallel_multiple") and len(truth) < 2:
            return f"a {cat} item expects several calls, the ground truth has {len(truth)}"
        docs = {f["name"]: f for f in payload["function"]}
        for i, answer in enumerate(truth, 1):
            problem = _check_answer(answer, docs, i, typed=generated)
            if problem:
                return problem
        if shape == "simple" and next(iter(truth[0])) != payload["function"][0]["name"]:
            return "a simple item's ground truth must call its (first) function"
        if language_of(cat) != "python":
            return None
        verdict = self.verdict(payload, render_calls(gold_calls(payload)))
        if not verdict.correct:
            return f"the ground truth fails BFCL's AST checker against its own functions: {verdict.reason}"
        return None

    def dedup_text(self, payload: dict[str, Any]) -> str:
        return " ".join(m["content"] for m in payload["question"][0] if m["role"] == "user")


def _check_documents(functions: Any, allow_empty: bool = False) -> str | None:
    if not isinstance(functions, list) or not (functions or allow_empty):
        return "function must be a non-empty list of function documents"
    names = set()
    for i, f in enumerate(functions, 1):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not f["name"].strip():
            return f"function {i} needs a string \"name\""
        if f["name"] in names:
            return f"function {f['name']!r} is documented twice"
        names.add(f["name"])
        params = f.get("parameters")
        if not isinstance(params, dict) or not isinstance(params.get("properties", {}), dict):
            return f"{f['name']}: \"parameters\" must be an object with \"properties\""
        props = params.get("properties", {})
        if not all(isinstance(s, dict) and isinstance(s.get("type"), str) for s in props.values()):
            return f"{f['name']}: every parameter needs a \"type\""
        required = params.get("required", [])
        if not isinstance(required, list) or any(r not in props for r in required):
            return f"{f['name']}: \"required\" names a parameter that is not documented"
    return None


def _type_ok(value: Any, typ: str) -> bool:
    """A Python possible-answer value is of its documented type (BFCL's checker would accept a value of another
    type as a "variable", so a mistyped gold value would pass its own check; it is refused here)."""
    if typ == "any" or typ not in PY_TYPES:
        return True
    expected = PY_TYPES[typ]
    return type(value) is expected or (expected is float and type(value) is int) or (
        typ == "tuple" and type(value) is tuple)


def _check_answer(answer: Any, docs: dict[str, dict], i: int, typed: bool = True) -> str | None:
    if not (isinstance(answer, dict) and len(answer) == 1 and isinstance(next(iter(answer.values())), dict)):
        return f"ground truth {i} must be {{function name: {{parameter: [allowed values]}}}}"
    name, params = next(iter(answer.items()))
    if name not in docs:
        return f"ground truth {i} calls {name!r}, which no function document defines"
    spec = docs[name]["parameters"]
    props = spec.get("properties", {})
    for param, allowed in params.items():
        if param not in props and typed:
            return f"ground truth {i}: {name} has no parameter {param!r}"
        if not isinstance(allowed, list) or not allowed:
            return f"ground truth {i}: {name}.{param} must list its allowed values"
        typ = props.get(param, {}).get("type")
        bad = [v for v in allowed if v != "" and not _type_ok(v, typ)]
        if typed and bad:
            return f"ground truth {i}: {name}.{param} is documented as {typ}, but allows {bad[0]!r}"
    for req in spec.get("required", []):
        if req not in params or not _first(params[req])[0]:
            return f"ground truth {i}: required parameter {name}.{req} has no allowed value"
    return None
