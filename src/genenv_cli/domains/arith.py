"""`arith`: integer arithmetic exercises — a domain a 135M model can take both parts of.

The tool-call domain asks the environment for JSON it rarely writes at 135M parameters; here the environment
writes one line, `EXERCISE: 37 * (4 + 12)`, and the domain computes the answer itself with a small
recursive-descent parser over integers, `+`, `-`, `*` and parentheses (never `eval`). Difficulty comes from
the operation and the largest operand's digits; the shape tag says both: one operation is named by its kind
(`add-1d`, `sub-2d`, `mul-1d`: a 135M agent solves about 3 in 4 one-digit sums but 1 in 3 one-digit
differences or products, so the kind is where its frontier lies), several by their count (`2op-1d`, `3op-2d`).

**Task** (`payload`): `{"expression": "37 * (4 + 12)", "answer": 592}`.
**Agent prompt**: the instruction, one worked example (`Compute 3 + 4` -> `Answer: 7`), then the exercise.
**Agent output format**: the answer as an integer, ideally `Answer: 592`; the number after the last
`Answer:` is read, else the last integer in the text. **R_agent** is 1 for the exact integer, else 0;
`partial` is `max(0, 1 - |pred - gold| / max(1, |gold|))`.
**Seeds** (`data/arith_seeds.jsonl`, written by `python -m genenv_cli.domains.arith_seeds --write`): a seeded
draw over the eight shapes that straddle the embedded agent's frontier, from one-digit sums (solved about 3 times
in 4) to two-operation exercises with two-digit numbers (almost never): 16 train and 30 validation exercises per
shape (128 and 240), so one held-out exercise is worth less than half a point.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path
from typing import Any

from genenv_cli.domains.base import Domain, EnvContext, Reject, SeedTask, TaskVerdict

MAX_OPS = 4
MAX_DIGITS = 4
MAX_ABS = 10**8
_TOKEN = re.compile(r"\s*(\d+|[-+*()])")

AGENT_SYSTEM = "Solve the arithmetic exercise. Reply with the final answer only, as: Answer: <integer>"
ENV_SYSTEM = ("You write arithmetic exercises for a student. Write exactly one line, EXERCISE: <expression>, "
              "using whole numbers, +, -, * and parentheses. Do not give the answer.")


class ArithError(ValueError):
    pass


MAX_NESTING = 100   # parentheses and unary minus signs nested: the parser recurses once per level
MAX_NUMBER = 100    # digits in one number: far past any exercise, far below Python's int-string limit
MAX_TOKENS = 10_000


def tokenize(text: str) -> list[str]:
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:  # the token pattern skips leading spaces: name the character after them, not the space
            raise ArithError(f"unexpected character {text[pos:].lstrip()[0]!r}")
        tok = m.group(1)
        if len(tok) > MAX_NUMBER:
            raise ArithError(f"a number of more than {MAX_NUMBER} digits")
        tokens.append(tok)
        if len(tokens) > MAX_TOKENS:
            raise ArithError(f"more than {MAX_TOKENS} tokens")
        pos = m.end()
    return tokens


class _Parser:
    """Recursive descent over the tokens of one expression, counting operations, digits and nesting on the way."""

    def __init__(self, tokens: list[str]):
        self.tokens, self.pos = tokens, 0
        self.ops = self.digits = self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def factor(self) -> int:
        tok = self.peek()
        if tok is None:
            raise ArithError("expression ends too early")
        if tok.isdigit():
            self.take()
            self.digits = max(self.digits, len(tok.lstrip("0") or "0"))
            return int(tok)
        if tok in ("-", "("):
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise ArithError(f"nested more than {MAX_NESTING} deep")
            self.take()
            if tok == "-":
                val = -self.factor()
            else:
                val = self.expr()
                if self.peek() != ")":
                    raise ArithError("unbalanced parenthesis")
                self.take()
            self.depth -= 1
            return val
        raise ArithError(f"unexpected {tok!r}")

    def term(self) -> int:
        val = self.factor()
        while self.peek() == "*":
            self.take()
            self.ops += 1
            val *= self.factor()
            if abs(val) > MAX_ABS:
                raise ArithError("result too large")
        return val

    def expr(self) -> int:
        val = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            self.ops += 1
            rhs = self.term()
            val = val + rhs if op == "+" else val - rhs
        return val


def evaluate_expression(text: str) -> tuple[int, int, int]:
    """(value, operations, max digits) of an integer expression. Grammar:
    expr := term (('+'|'-') term)*;  term := factor ('*' factor)*;  factor := INT | '-' factor | '(' expr ')'."""
    tokens = tokenize(text)
    if not tokens:
        raise ArithError("empty expression")
    parser = _Parser(tokens)
    value = parser.expr()
    if parser.pos != len(tokens):
        raise ArithError(f"unexpected {tokens[parser.pos]!r}")
    return value, parser.ops, parser.digits


KINDS = {"+": "add", "-": "sub", "*": "mul"}


def binary_operators(tokens: list[str]) -> list[str]:
    """The binary operators of a tokenized expression, in order: an operator is binary when it follows a number
    or a closing parenthesis (a leading or repeated `-` is a sign)."""
    out, prev = [], None
    for tok in tokens:
        if tok in KINDS and prev is not None and (prev.isdigit() or prev == ")"):
            out.append(tok)
        prev = tok
    return out


def shape_of(ops: int, digits: int, kind: str | None = None) -> str:
    """`add-1d`, `sub-2d`, `mul-1d` for one operation (kind is its operator), `2op-1d` ... for several."""
    d = min(digits, MAX_DIGITS)
    if ops == 1 and kind in KINDS:
        return f"{KINDS[kind]}-{d}d"
    return f"{min(ops, MAX_OPS)}op-{d}d"


_KIND_WORDS = {"add": "additions", "sub": "subtractions", "mul": "multiplications"}


def describe_shape(shape: str) -> str:
    """A shape in words for the environment's prompt: `sub-1d` -> `one-digit subtractions`."""
    m = re.fullmatch(r"(add|sub|mul|\d)(?:op)?-(\d)d", shape)
    if not m:
        return shape
    digits = ["", "one", "two", "three", "four"][int(m.group(2))] + "-digit"
    if m.group(1) in _KIND_WORDS:
        return f"{digits} {_KIND_WORDS[m.group(1)]}"
    return f"{m.group(1)}-operation exercises with {digits} numbers"


def expression_shape(expression: str) -> str:
    """The shape of a valid expression (raises ArithError otherwise)."""
    _, ops, digits = evaluate_expression(expression)
    kinds = binary_operators(tokenize(expression))
    return shape_of(ops, digits, kinds[0] if len(kinds) == 1 else None)


# `\s*+` (possessive) never gives back whitespace, which neither `[:=]` nor a digit could use: with plain `\s*`
# the two runs of whitespace split a long run between them in every possible way (32 s on "answer" and 20,000 spaces)
_ANSWER = re.compile(r"answer\s*+[:=]?\s*+(-?\d[\d,]*)", re.IGNORECASE)
_INT = re.compile(r"-?\d[\d,]*")
# linear: a match starts only where whitespace starts (a later start inside the same run would match too, so the
# leftmost match is unchanged), and possessive runs never give back whitespace that `=`, `?` or the end cannot use
_TRAILING_EQUALS = re.compile(r"(?<!\s)\s*+=\s*+\??\s*+$")


def read_answer(text: str) -> int | None:
    found = _ANSWER.findall(text)
    raw = found[-1] if found else (_INT.findall(text) or [None])[-1]
    if raw is None:
        return None
    try:
        return int(raw.replace(",", ""))
    except ValueError:
        return None


class ArithDomain(Domain):
    name = "arith"
    description = "Integer arithmetic exercises; difficulty from operations and digits (a domain small models can take)."
    seed_file = "arith_seeds.jsonl"
    payload_keys = ("expression", "answer")
    shapes = tuple([shape_of(1, d, k) for k in KINDS for d in range(1, MAX_DIGITS + 1)]
                   + [shape_of(o, d) for o in range(2, MAX_OPS + 1) for d in range(1, MAX_DIGITS + 1)])

    # the reference `Answer: 592` is one of the forms the scorer accepts ("592", "Answer: 592.", "so 592"): the
    # probability of writing it is a lower bound of the success rate (docs/curriculum.md measures how close)
    teacher_forced = "lower_bound"

    seed_format = 'JSON lines like data/arith_seeds.jsonl: {"id", "split" (optional), "expression", "answer"}'

    def read_seeds(self, path: Path) -> list[SeedTask]:
        from genenv_cli.domains.seedfiles import read_seed_jsonl

        def shape(payload: dict[str, Any]) -> str:
            return expression_shape(payload["expression"])

        return read_seed_jsonl(path, self.payload_keys, shape_of=shape, check=self.check_payload)

    @functools.cache  # noqa: B019 - one instance per process (get_domain)
    def data_fingerprint(self) -> str:
        return hashlib.sha256(self.seed_path().read_bytes()).hexdigest()[:16]

    def agent_messages(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        # one worked example shows the format: SmolLM2-135M then answers 1-digit sums about half the time,
        # against a tenth without it (measured on the seed set, temperature 1)
        return [{"role": "system", "content": AGENT_SYSTEM}, {"role": "user", "content": "Compute 3 + 4"},
                {"role": "assistant", "content": "Answer: 7"},
                {"role": "user", "content": f"Compute {payload['expression']}"}]

    def env_messages(self, ctx: EnvContext) -> list[dict[str, str]]:
        """The agent's statistics and the difficulty hint go in the system message, the example last in the user
        message: with the statistics in the user message SmolLM2-135M mostly repeated them instead of writing
        an exercise (4 valid of 32 against 12 of 32 this way, measured on the seed set)."""
        context = []
        if ctx.stats and ctx.stats.get("tasks"):
            per_shape = ctx.stats.get("per_shape", {})
            per = ", ".join(f"{describe_shape(k)} {v['success_rate']:.0%}" for k, v in per_shape.items())
            context.append(f"The student solved {ctx.stats['success_rate']:.0%} of the last exercises ({per}).")
            aim = [describe_shape(k) for k, v in per_shape.items() if 0.25 <= v["success_rate"] <= 0.75]
            if aim:
                context.append(f"It solves about half of these: {', '.join(aim)}.")
        if ctx.parent_p is not None:
            if ctx.parent_p > 0.6:
                context.append("The example was too easy for the student: use bigger numbers or one more operation.")
            elif ctx.parent_p < 0.4:
                context.append("The example was too hard for the student: use smaller numbers or fewer operations.")
        context.append("Aim for an exercise the student solves about half the time.")
        user = [f"An exercise at the right difficulty:\nEXERCISE: {ex['expression']}" for ex in ctx.frontier]
        user.append(f"Example exercise:\nEXERCISE: {ctx.parent['expression']}")
        user.append("Write one new exercise like the example, with different numbers.")
        return [{"role": "system", "content": ENV_SYSTEM + "\n" + " ".join(context)},
                {"role": "user", "content": "\n\n".join(user)}]

    def parse_env_output(self, text: str, ctx: EnvContext) -> tuple[dict[str, Any], str]:
        m = re.search(r"EXERCISE\s*:\s*(.+)", text, re.IGNORECASE)
        if not m:
            raise Reject("parse: no EXERCISE: line")
        expr = m.group(1).strip().rstrip(".").strip()
        expr = _TRAILING_EQUALS.sub("", expr)  # "3 + 4 = ?" -> "3 + 4"
        try:
            value, ops, digits = evaluate_expression(expr)
        except ArithError as exc:
            raise Reject(f"parse: {exc}") from None
        if ops == 0:
            raise Reject("invalid: no operation")
        if ops > MAX_OPS:
            raise Reject(f"invalid: more than {MAX_OPS} operations")
        if digits > MAX_DIGITS:
            raise Reject(f"invalid: a number with more than {MAX_DIGITS} digits")
        tokens = tokenize(expr)
        payload = {"expression": " ".join(tokens).replace("( ", "(").replace(" )", ")"), "answer": value}
        kinds = binary_operators(tokens)
        return payload, shape_of(ops, digits, kinds[0] if len(kinds) == 1 else None)

    def check_payload(self, payload: Any) -> str | None:
        if not isinstance(payload, dict) or not isinstance(payload.get("expression"), str):
            return "payload must be {\"expression\": str, \"answer\": int}"
        if not isinstance(payload.get("answer"), int) or isinstance(payload.get("answer"), bool):
            return "answer must be an integer"
        try:
            value, _, _ = evaluate_expression(payload["expression"])
        except ArithError as exc:
            return f"expression: {exc}"
        if value != payload["answer"]:
            return f"answer {payload['answer']} is wrong; the expression gives {value}"
        return None

    def score(self, payload: dict[str, Any], completion: str) -> TaskVerdict:
        pred = read_answer(completion)
        gold = payload["answer"]
        if pred is None:
            return TaskVerdict(0.0, 0.0, False, "no integer in the answer")
        if pred == gold:
            return TaskVerdict(1.0, 1.0, True, None)
        err, scale = abs(pred - gold), max(1, abs(gold))
        partial = 0.0 if err >= scale else 1.0 - err / scale  # err < scale: the quotient fits a float
        return TaskVerdict(0.0, partial, True, f"answered {pred}, expected {gold}")

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        return f"Answer: {payload['answer']}"

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        return f"Answer: {payload['answer'] + 1}"

    def render_task(self, payload: dict[str, Any]) -> str:
        return f"EXERCISE: {payload['expression']}"

    def dedup_text(self, payload: dict[str, Any]) -> str:
        return "".join(payload["expression"].split())

    def exact_key(self, payload: dict[str, Any]) -> str:
        return self.dedup_text(payload)  # operators matter: 12+7 and 12*7 differ

    def near_key(self, payload: dict[str, Any]) -> frozenset:
        return frozenset([self.dedup_text(payload)])  # no "near" for expressions: only identical ones match
