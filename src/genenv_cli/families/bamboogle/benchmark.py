"""Bamboogle (Press et al., 2022, "Measuring and Narrowing the Compositionality Gap"): 125 two-hop questions.

Official source: the Bamboogle Google Sheet linked from ofirpress/self-ask `datasets/README.md`, columns
`Question`, `Answer`; downloaded as its CSV export. Fallback copy: qiancheng0/ToolRL
`benchmarks/Bamboogle/data.json` at a pinned commit (a JSON list of `{"Question", "Answer"}`, same order).
`--data` takes the CSV (a header row naming Question and Answer, any case; a title row above it is
skipped; blank rows are skipped), the JSON list, or FlashRAG's
`bamboogle/test.jsonl` (`{"question", "golden_answers": [...]}` per line), or a folder holding one of them.
Sample id: the 0-based position of the question in the file, as a string ("0" ... "124").

**Prompt (official protocol, closed-book).** One user message asking the question directly, no retrieval:
the model may reason, then gives a short answer inside `<answer>...</answer>` (the tag the Search-R1 / ToolRL
style prompts use, so answers can be found in verbose outputs).

**Answer parser.** `<think>...</think>` blocks are dropped; then the content of the last `<answer>` tag; else
of the last `<response>` tag (ToolRL's format); else the last non-empty line with a leading "Answer:" /
"Final answer:" / "The answer is" label removed.

**Metrics (official).** SQuAD v1.1 `evaluate-v1.1.py` rules: normalise (lower case, drop punctuation, drop the
articles a/an/the, collapse whitespace); exact match (EM) of the normalised strings; token F1 over the
normalised tokens; plus answer-contained accuracy (the normalised gold is a substring of the normalised
prediction, the "cover EM" of Search-R1 `qa_em.py`). With several gold answers the best is kept. Headline and
`Verdict.correct`: EM. Reported in percent: em, f1, acc.

**Paper protocol** (`protocol="paper"`, the ToolRL evaluation, qiancheng0/ToolRL
`benchmarks/Bamboogle/generate.py`): ToolRL's system prompt and output format (`<think>`, `<tool_call>`,
`<response>`), the question followed by its "make a plan" instruction; the answer is the first `<response>`
block (else the text after `</think>`, else the whole output; `<answer>` accepted too). ToolRL lets the model
call a Google search (Serper) for up to four rounds and has GPT-4o judge whether the answer is semantically the
gold one; here there is no search backend (the protocol runs closed-book, and the tool is not offered) and no
LLM judge: the headline "accuracy" is the deterministic answer-contained rule above. Paper's Table 1: GenEnv
7B 76.0, Qwen2.5-7B-Instruct 68.0.
"""

from __future__ import annotations

import csv
import functools
import io
import re
import string
from collections import Counter
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.core.jsonio import json_records
from genenv_cli.core.safefiles import read_regular
from genenv_cli.evals import toolrl
from genenv_cli.evals.base import PROTOCOLS, Benchmark, EvalSample, LoadedData, PaperColumn, Verdict
from genenv_cli.evals.datasource import (
    CSV_FIELD_DEFAULT,
    csv_field_limit,
    no_data_error,
    sha256_paths,
    try_download,
)

SHEET_ID = "1jwcsA5kE4TObr9YHn9Gc-wQHYjTbLhDGx6tmIzMhl_U"
SHEET_CSV_URL = f"https://docs.google.com/spreadsheets/d/{SHEET_ID}/export?format=csv&gid=0"
TOOLRL_COMMIT = "8cee13ec0ca72f0461da372a93a6fd8140dbb840"
TOOLRL_JSON_URL = (f"https://raw.githubusercontent.com/qiancheng0/ToolRL/{TOOLRL_COMMIT}/"
                   f"benchmarks/Bamboogle/data.json")
VERSION_SHEET = "self-ask Google Sheet"
VERSION_TOOLRL = f"ToolRL copy @{TOOLRL_COMMIT[:7]}"
CATEGORY = "bamboogle"
PAPER_REFERENCE = {"GenEnv 7B": 76.0, "Qwen2.5-7B-Instruct": 68.0}

OFFICIAL_PROMPT = ("Answer the following question from your own knowledge. You may reason first; then give the "
                   "final answer, as short as possible (a name, date, number or short phrase), inside <answer> "
                   "and </answer>, for example <answer> Paris </answer>.\n\nQuestion: {question}")

# ToolRL's Bamboogle system prompt, without its Search tool (no search backend here).
PAPER_SYSTEM = toolrl.system_prompt(
    "No tools are available in this conversation.",
    "<think> Your thoughts and reasoning </think>\n<response> AI's final response </response>",
    "1. You must always include the `<think>` field to outline your reasoning, followed by the `<response>` field.\n"
    "2. Refer to the previous dialogue records in the history, including the user's queries.")
PAPER_USER = ("**Dialogue Records History**\n<user> {question}\nMake a plan to solve the problem step by step, and "
              "give a succinct answer in the response. </user>")


# ---------------------------------------------------------------- metrics (SQuAD v1.1 rules)

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)  # deleted in one C pass (a megabyte answer is read ~6 times)


@functools.lru_cache(maxsize=16)  # a prediction is normalised once per gold and metric; once is enough
def normalize_answer(text: str) -> str:
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def answer_contained(prediction: str, gold: str) -> bool:
    g = normalize_answer(gold)
    return bool(g) and g in normalize_answer(prediction)


# ---------------------------------------------------------------- answer extraction

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_LABEL = re.compile(r"^\s*\**\s*(?:the\s+)?(?:final\s+)?answer(?:\s+is)?\b\s*\**\s*[:\-]?\s*\**\s*", re.IGNORECASE)


def _last_tag(text: str, tag: str) -> str | None:
    # the last of the pairs re.findall(r"<tag>(.*?)</tag>") would read, found with str.find in one pass: the
    # regex rescans the rest of the text from every opening tag that is never closed (50,000 of them: minutes)
    opening, closing = f"<{tag}>", f"</{tag}>"
    closed, pos = None, 0
    while (i := text.find(opening, pos)) >= 0 and (j := text.find(closing, i + len(opening))) >= 0:
        closed, pos = text[i + len(opening):j], j + len(closing)
    if closed is not None:
        return closed.strip()
    start = text.rfind(opening)
    if start >= 0:  # an unterminated tag at the end (generation stopped at </answer>)
        return text[start + len(tag) + 2:].strip()
    return None


def extract_answer(output: str) -> str:
    """The official protocol's answer: last <answer>, else last <response>, else the last line, unlabelled."""
    text = _THINK.sub("", output)
    for tag in ("answer", "response"):
        found = _last_tag(text, tag)
        if found is not None:
            return found
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _LABEL.sub("", lines[-1]).strip() if lines else ""


def extract_answer_paper(output: str) -> str:
    """ToolRL's reading: the first <response> block, else the text after </think>, else the whole output."""
    if "<response>" in output:
        return output.split("<response>", 1)[1].split("</response>", 1)[0].strip()
    found = _last_tag(_THINK.sub("", output), "answer")
    if found is not None:
        return found
    if "</think>" in output:
        return output.split("</think>", 1)[1].strip()
    return output.strip()


# ---------------------------------------------------------------- data

def _pick(record: dict[str, Any], *names: str) -> Any:
    lowered = {str(k).strip().lower(): v for k, v in record.items()}
    for n in names:
        if n in lowered:
            return lowered[n]
    return None


def _qa(record: Any, where: str) -> tuple[str, list[str]] | None:
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected an object with Question and Answer, got {str(record)[:60]!r}.")
    question = _pick(record, "question")
    answer = _pick(record, "answer", "golden_answers", "answers")
    if (question is None or str(question).strip() == "") and (answer is None or answer == "" or answer == []):
        return None  # a blank row
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"{where}: missing the `Question` text.")
    answers = answer if isinstance(answer, list) else [answer]
    answers = [str(a).strip() for a in answers if a is not None and str(a).strip()]
    if not answers:
        raise InputError(f"{where}: missing the `Answer` for question {question.strip()[:60]!r}.")
    return question.strip(), answers


def read_bamboogle(path: Path) -> list[tuple[str, list[str]]]:
    """(question, gold answers) in file order, from the CSV, the JSON list or FlashRAG's JSONL."""
    suffix = path.suffix.lower()
    if suffix != ".csv":
        what = '{"Question": ..., "Answer": ...} objects'
        records = [(rec, where) for where, rec in json_records(path, what, array=suffix != ".jsonl")]
    else:
        try:
            text = read_regular(path).decode("utf-8-sig")  # never a device or a pipe
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot read the Bamboogle file ({exc}).") from None
        reader = csv.reader(io.StringIO(text))
        try:
            with csv_field_limit(CSV_FIELD_DEFAULT):  # a question and an answer are short texts
                rows = list(reader)
        except csv.Error as exc:  # a cell past the csv module's field size limit (131,072 characters), a stray NUL
            raise InputError(f"{path}, line {reader.line_num}: not a readable CSV row ({exc}); expected a Question "
                             f"and an Answer per row, each a short text.") from None
        # the header row (a title row above it, as spreadsheet exports may have, is skipped)
        head = next((i for i, r in enumerate(rows[:5])
                     if {"question", "answer"} <= {c.strip().lower() for c in r}), None)
        if head is None:
            raise InputError(f"{path}: the CSV header must name a Question and an Answer column "
                             f"(first row: {rows[0] if rows else []}).")
        names = [c.strip() for c in rows[head]]
        records = [(dict(zip(names, r, strict=False)), f"{path}, row {i + 1}")
                   for i, r in enumerate(rows) if i > head]
    items = [qa for rec, where in records if (qa := _qa(rec, where)) is not None]
    if not items:
        raise InputError(f"{path}: no Bamboogle questions found.")
    return items


def _data_file(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise InputError(f"Bamboogle data path {path} does not exist.")
    for name in ("bamboogle.csv", "bamboogle.json", "data.json", "test.jsonl"):
        if (path / name).is_file():
            return path / name
    found = [p for p in sorted(path.iterdir()) if p.suffix.lower() in (".csv", ".json", ".jsonl")]
    if len(found) != 1:
        raise InputError(f"{path}: expected one Bamboogle file (bamboogle.csv, a JSON list or test.jsonl) in "
                         f"the folder, found {len(found)}.")
    return found[0]


class Bamboogle(Benchmark):
    name = "bamboogle"
    paper_column = PaperColumn(4, "Bamboogle", PAPER_REFERENCE)
    description = "Bamboogle: 125 two-hop questions, closed-book; EM, token F1 and answer-contained accuracy"
    categories = [CATEGORY]
    sources = [
        f"the official Google Sheet (ofirpress/self-ask), CSV export: {SHEET_CSV_URL}",
        f"fallback copy: {TOOLRL_JSON_URL}",
        "--data PATH: the CSV, a JSON list of {Question, Answer}, or FlashRAG's bamboogle/test.jsonl",
    ]
    splits = ["test"]
    versions = [VERSION_SHEET, VERSION_TOOLRL]

    def load(self, *, data: Path | None, split: str | None, version: str | None, protocol: str,
             cache_dir: Path) -> LoadedData:
        if protocol not in PROTOCOLS:
            raise InputError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}.")
        if split not in (None, "test"):
            raise InputError(f"bamboogle has one split, `test` (got {split!r}).")
        if version not in (None, *self.versions):
            raise InputError(f"bamboogle knows the data versions {', '.join(self.versions)} (got {version!r}).")
        if data is not None:
            path = _data_file(Path(data))
            items, ver, source = read_bamboogle(path), "local file", str(path)
        else:
            tried: list[str] = []
            got = self._download(cache_dir, version, tried)
            if got is None:
                raise no_data_error(self.name, self.sources, tried)
            path, items, ver, source = got
        samples = [self._sample(str(i), q, golds, protocol) for i, (q, golds) in enumerate(items)]
        return LoadedData(samples=samples, version=ver, source=source, fingerprint=sha256_paths([path]))

    def _download(self, cache_dir: Path, version: str | None, tried: list[str]):
        options = [(VERSION_SHEET, SHEET_CSV_URL, "bamboogle.csv"), (VERSION_TOOLRL, TOOLRL_JSON_URL, "data.json")]
        for ver, url, name in options:
            if version not in (None, ver):
                continue
            dest = cache_dir / ver.replace(" ", "-").replace("@", "") / name
            path = try_download(url, dest, tried)
            if path is None:
                continue
            try:
                items = read_bamboogle(path)
            except InputError as exc:  # e.g. a sign-in page instead of the CSV: drop it, try the next source
                tried.append(f"{url}: {exc}")
                path.unlink(missing_ok=True)
                path.with_name(path.name + ".source.json").unlink(missing_ok=True)
                continue
            return path, items, ver, url
        return None

    def _sample(self, sid: str, question: str, golds: list[str], protocol: str) -> EvalSample:
        if protocol == "paper":
            messages = [{"role": "system", "content": PAPER_SYSTEM},
                        {"role": "user", "content": PAPER_USER.format(question=question)}]
        else:
            messages = [{"role": "user", "content": OFFICIAL_PROMPT.format(question=question)}]
        return EvalSample(id=sid, category=CATEGORY, messages=messages, gold=golds, meta={"question": question})

    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        golds = sample.gold if isinstance(sample.gold, list) else [sample.gold]
        answer = extract_answer_paper(output) if protocol == "paper" else extract_answer(output)
        em = float(any(exact_match(answer, g) for g in golds))
        f1 = max(token_f1(answer, g) for g in golds)
        acc = float(any(answer_contained(answer, g) for g in golds))
        correct = bool(acc) if protocol == "paper" else bool(em)
        if correct:
            reason = ""
        elif not answer:
            reason = "no answer found"
        else:
            reason = f"answer {answer[:80]!r} does not {'contain' if protocol == 'paper' else 'match'} {golds[0]!r}"
        return Verdict(correct, {"answer": answer}, reason, {"em": em, "f1": f1, "acc": acc})

    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        n = len(verdicts)

        def pct(key: str) -> float:
            return 100.0 * sum(v.scores.get(key, 0.0) for v in verdicts) / n if n else 0.0

        metrics = {"em": pct("em"), "f1": pct("f1"), "acc": pct("acc")}
        if protocol == "paper":
            metrics = {"accuracy": metrics["acc"], **metrics}
        out: dict[str, Any] = {"overall": {**metrics, "n": n}, "categories": {CATEGORY: {**metrics, "n": n}}}
        if protocol == "paper":
            out["paper_reference"] = dict(PAPER_REFERENCE)
        return out
