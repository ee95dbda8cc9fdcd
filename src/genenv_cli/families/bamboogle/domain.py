"""`bamboogle`: two-hop questions answered closed-book, scored by the `bamboogle` evaluation suite.

**Task** (`payload`): a Bamboogle record -- `{"question", "answer": [gold answers]}` (the CSV's Question and
Answer; FlashRAG's golden_answers) -- plus, for items the environment writes and for the built-in seeds, the
answer chain it was composed from: `"facts": [first-hop fact, second-hop fact]` and `"bridge"`, the intermediate
entity. Shapes are the hop type, the kind of thing the second hop asks for: `person`, `place`, `date`, `number`,
`other` (from the question's wording and the answer).

**Agent prompt and R_agent**: the `bamboogle` suite's official protocol (`families/bamboogle/`): the question
asked directly, answer inside `<answer>...</answer>`, extracted and compared by SQuAD exact match; reward 1 on
EM (the suite's `correct`), `partial` is the token F1.

**Environment format**: one JSON object, a Bamboogle record with its chain: `{"Question": ..., "Answer": ...,
"Facts": ["<fact about the entity the question names>", "<fact about the bridge entity, stating the answer>"],
"Bridge": "<the intermediate entity>"}`.

**Release seeds.** The release's records state no chain: when the example (or a frontier item) has none, the
environment is first shown a built-in item with its Facts and Bridge as the format to write, and a chain-less
record is accepted back only when it copies a benchmark item it was shown (its gold is the benchmark's).

**Keeping wrong gold answers out.** A model can invent an answer. An environment item is accepted only when its
gold answer follows from the two facts it states, by rules checked on the text (SQuAD normalisation, whole
words): the bridge is in both facts and not in the question (so the question really takes two hops); the answer
is in the second fact, in neither the question nor the first fact, and is not the bridge; the question shares a
content word with the first fact; the answer is short (at most six words); a question that asks when or how
many has a date or a number as its answer. What the rules cannot check is whether
the facts are true: a consistent chain built on a false fact passes. docs/domains.md reports how often wrong gold
got through on a hand-checked sample.
"""

from __future__ import annotations

import re
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import EnvContext, Reject, SeedTask
from genenv_cli.domains.family import FamilyDomain
from genenv_cli.evals.base import EvalSample
from genenv_cli.families.bamboogle.benchmark import _qa, normalize_answer

SHAPES = ("person", "place", "date", "number", "other")
MAX_ANSWER_WORDS = 6
_STOP = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or", "is", "was", "were",
    "be", "been", "are", "what", "who", "whom", "whose", "which", "when", "where", "how", "many", "much", "did",
    "does", "do", "that", "this", "these", "those", "it", "its", "as", "into", "than"
})
_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december"
)

ENV_SYSTEM = """You write two-hop questions for a quiz, in the format of the Bamboogle benchmark. Start from two \
true facts that share an entity (the bridge): the first fact is about something the question names, and it \
gives the bridge; the second fact is about the bridge, and it gives the answer. The question names neither the \
bridge nor the answer. Write one JSON object and nothing else:
{"Question": "<the two-hop question>", "Answer": "<a short answer, taken word for word from the second fact>", \
"Facts": ["<first fact>", "<second fact>"], "Bridge": "<the shared entity>"}"""


def _words(text: str) -> str:
    return f" {normalize_answer(text)} "


def contains(text: str, part: str) -> bool:
    """`part` occurs in `text` as whole words after SQuAD normalisation."""
    p = normalize_answer(part)
    return bool(p) and f" {p} " in _words(text)


def _content(text: str) -> set[str]:
    return {w for w in normalize_answer(text).split() if w not in _STOP and len(w) > 2}


def shape_of(question: str, answers: list[str]) -> str:
    """The hop type: what the second hop asks for."""
    q = question.lower()
    a = answers[0].strip().lower() if answers else ""
    if re.match(r"^\s*(who|whom|whose)\b", q):
        return "person"
    if re.match(r"^\s*when\b", q) or re.search(r"\b(what|which) (year|date|month|century|decade)\b", q) \
            or re.fullmatch(r"\d{3,4}( ad| bc)?", a) or any(m in a.split() for m in _MONTHS):
        return "date"
    if re.match(r"^\s*how (many|much|long|old|tall|far|high)\b", q) or re.fullmatch(r"[\d.,]+( \w+)?", a):
        return "number"
    if re.match(r"^\s*where\b", q) or re.match(r"^\s*(what|which) is the capital\b", q) or re.search(r"\b(what|which) (city|country|state|continent|river|ocean|"
                                                r"sea|mountain|island|region|town|capital)\b", q):
        return "place"
    return "other"


_NUMBER_WORDS = frozenset({
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty",
    "forty", "fifty", "hundred", "thousand", "million", "billion"
})


def asks_for(question: str) -> str | None:
    """"date" or "number" when the question's wording demands one (then the answer must be one), else None."""
    q = question.lower()
    if re.match(r"^\s*when\b", q) or re.search(r"\b(what|which|in what|in which) (year|date|month|century|decade)\b", q):
        return "date"
    if re.match(r"^\s*how (many|much|long|old|tall|far|high)\b", q) or re.search(
            r"\bwhat is the (population|number|height|length|area|age)\b", q):
        return "number"
    return None


def _answer_is(kind: str, answer: str) -> bool:
    words = normalize_answer(answer).split()
    if kind == "date":
        return any(re.fullmatch(r"\d{1,4}(s|th|st|nd|rd)?", w) for w in words) or any(w in _MONTHS for w in words) \
            or "century" in words
    return any(re.search(r"\d", w) for w in words) or any(w in _NUMBER_WORDS for w in words)


def chain_problem(question: str, answers: list[str], facts: Any, bridge: Any) -> str | None:
    """Why the gold answer does not follow from the stated answer chain, or None."""
    if not (isinstance(facts, list) and len(facts) == 2 and all(isinstance(f, str) for f in facts)):
        return "Facts must be a list of two sentences (first hop, second hop)"
    f1, f2 = facts
    if len(normalize_answer(f1).split()) < 4 or len(normalize_answer(f2).split()) < 4:
        return "each fact must be a sentence of at least four words"
    if normalize_answer(f1) == normalize_answer(f2):
        return "the two facts are the same"
    if not isinstance(bridge, str) or not normalize_answer(bridge):
        return "Bridge must name the entity the facts share"
    if not contains(f1, bridge) or not contains(f2, bridge):
        return f"the bridge {bridge!r} must appear in both facts"
    if contains(question, bridge):
        return f"the question names the bridge {bridge!r}: it is not a two-hop question"
    if not _content(question) & _content(f1):
        return "the question shares no content word with the first fact"
    kind = asks_for(question)
    for a in answers:
        if kind and not _answer_is(kind, a):
            return f"the question asks for a {kind}, but the answer {a!r} is not one"
        if len(normalize_answer(a).split()) > MAX_ANSWER_WORDS:
            return f"the answer {a!r} is longer than {MAX_ANSWER_WORDS} words"
        if normalize_answer(a) == normalize_answer(bridge):
            return "the answer is the bridge: the second hop is missing"
        if not contains(f2, a):
            return f"the answer {a!r} is not stated in the second fact"
        if contains(question, a):
            return f"the question gives away the answer {a!r}"
        if contains(f1, a):
            return f"the answer {a!r} is already in the first fact"
    return None


class BamboogleDomain(FamilyDomain):
    name = "bamboogle"
    description = "Bamboogle-style two-hop questions, closed-book; exact match as the bamboogle suite scores it."
    shapes = SHAPES
    benchmark = "bamboogle"
    seed_file = "bamboogle_seeds.jsonl"
    env_system = ENV_SYSTEM
    seed_format = ("a Bamboogle file as `genenv evaluate --bench bamboogle --data FILE` reads it: the CSV "
                   "(Question, Answer), a JSON list of {Question, Answer}, or FlashRAG's test.jsonl")

    def sample(self, payload: dict[str, Any]) -> EvalSample:
        return self.suite._sample(str(payload.get("id", "item")), payload["question"], payload["answer"], self.protocol)

    def valid(self, verdict: Any) -> bool:
        return bool((verdict.parsed or {}).get("answer"))

    def seed_from_sample(self, sample: EvalSample) -> SeedTask:
        question = sample.meta["question"]
        golds = list(sample.gold)
        return SeedTask(f"bamboogle-{sample.id}", "", shape_of(question, golds), {"question": question, "answer": golds})

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        return f"<answer> {payload['answer'][0]} </answer>"

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        return "<answer>certainly not this</answer>"

    def render_item(self, payload: dict[str, Any]) -> str:
        import json

        record: dict[str, Any] = {"Question": payload["question"], "Answer": payload["answer"][0]}
        if "facts" in payload:
            record["Facts"] = payload["facts"]
            record["Bridge"] = payload["bridge"]
        return json.dumps(record, ensure_ascii=False)

    def env_messages(self, ctx: EnvContext) -> list[dict[str, str]]:
        """The release's items state no answer chain, but the environment's items must: when the example (or a
        frontier item) has none, a built-in item with its Facts and Bridge is shown first as the format to
        write, and the example is marked as a benchmark item whose chain is not given."""
        messages = super().env_messages(ctx)
        if all("facts" in p for p in [ctx.parent, *ctx.frontier]):
            return messages
        fmt = next((s.payload for s in self._builtin if s.shape == ctx.parent_shape), self._builtin[0].payload)
        messages[1]["content"] = ("The format to write, with the answer chain (Facts and Bridge) every item "
                                  "must state:\n" + self.render_item(fmt) + "\n\n" + messages[1]["content"]
                                  + " Give its Facts and Bridge as the format shows: the benchmark's items "
                                  "do not state theirs.")
        return messages

    @staticmethod
    def _shown(question: str, answers: list[str], ctx: EnvContext) -> dict[str, Any] | None:
        """The benchmark item (the example or a frontier item) this Question and Answer copy, if any."""
        key = (normalize_answer(question), sorted(normalize_answer(a) for a in answers))
        for p in [ctx.parent, *ctx.frontier]:
            if isinstance(p, dict) and isinstance(p.get("question"), str) and isinstance(p.get("answer"), list) \
                    and (normalize_answer(p["question"]), sorted(normalize_answer(a) for a in p["answer"])) == key:
                return p
        return None

    def item_from_json(self, obj: dict[str, Any], ctx: EnvContext) -> tuple[dict[str, Any], str]:
        try:
            qa = _qa(obj, "the item")
        except InputError as exc:
            raise Reject(f"parse: {str(exc).removeprefix('the item: ')}") from None
        if qa is None:
            raise Reject("parse: the item has no Question and Answer")
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        question, answers = qa
        if "facts" not in lowered or "bridge" not in lowered:
            shown = self._shown(question, answers, ctx)
            if shown is None:
                raise Reject("invalid: the item must state its Facts and Bridge (the answer chain)")
            # A benchmark item the environment was shown, written back: its gold is the benchmark's, not invented
            # (the pool's duplicate filter decides whether a copy is kept).
            payload = {k: shown[k] for k in ("question", "answer", "facts", "bridge") if k in shown}
            return payload, shape_of(payload["question"], payload["answer"])
        payload = {"question": question, "answer": answers, "facts": lowered["facts"], "bridge": lowered["bridge"]}
        problem = self.check_payload(payload)
        if problem:
            raise Reject(f"invalid: {problem}")
        return payload, shape_of(question, answers)

    def check_payload(self, payload: Any) -> str | None:
        if not isinstance(payload, dict):
            return "payload must be a JSON object"
        q, a = payload.get("question"), payload.get("answer")
        if not isinstance(q, str) or len(q.strip()) < 10:
            return "question must be a sentence of at least 10 characters"
        if not (isinstance(a, list) and a and all(isinstance(x, str) and normalize_answer(x) for x in a)):
            return "answer must be a non-empty list of answers"
        if "facts" in payload or "bridge" in payload:
            return chain_problem(q, a, payload.get("facts"), payload.get("bridge"))
        return None

    def dedup_text(self, payload: dict[str, Any]) -> str:
        return payload["question"]
