"""The training split as the official repository releases it, read without the Hugging Face dataset.

The repository (github.com/OSU-NLP-Group/TravelPlanner) ships the training split's 45 queries twice, neither time
with the dataset's structured fields:

- `finetuning_data/std_travelplanner.jsonl`: one chat example per query (system, user, assistant). The user turn
  is "Given Information:<reference information>\\nQuery:<query text>\\n", the reference information in the
  dataset's shape (a Python list of {Description, Content}); the assistant turn is the annotated reference plan
  (a Python list of day objects, padded with `{}` to 7 days).
- `database/train_ref_info.jsonl`: the same queries' reference information as JSON objects keyed by description
  ("Flight from A to B on DATE": a list of flight rows or a "There is no flight ..." sentence; "Accommodations in
  C": rows; ...), line for line in the same order.

The fields the checks need and the release has only in prose are derived here (`derive_fields`): people, budget,
dates, trip length, city count and the local constraints from the query text; origin and destination from the
reference information's descriptions (the destination is the visited city, or for a multi-city trip the state
its cities share), each checked against the text. The level follows the benchmark's design: no local constraint
is easy, one (house rule, cuisine or room type) is medium, more is hard. The official evaluator counts 105 hard
constraints over these 45 queries (its train denominator); the fields derived here give the same count.

The database folder of the release has no flights table. Each query's flight rows are taken from its reference
information (`flight_rows`); `database.py` uses them in place of the table for that query.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from genenv_cli.core.callparse import CallParseError, parse_literal
from genenv_cli.core.errors import InputError
from genenv_cli.core.jsonio import json_lines

CHATS = "std_travelplanner.jsonl"


def ref_info_name(split: str) -> str:
    """`train_ref_info.jsonl`: the file of the official repository's database/ folder for a split."""
    return f"{split}_ref_info.jsonl"


def find_ref_info(folder: Path, split: str) -> Path | None:
    """The split's reference-information file in `folder` or `folder/database`."""
    for cand in (folder / ref_info_name(split), folder / "database" / ref_info_name(split)):
        if cand.is_file():
            return cand
    return None


def read_ref_info(path: Path) -> list[dict[str, Any]]:
    out = []
    for where, rec in json_lines(path, "one query's reference information per line (an object keyed by description)"):
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected an object keyed by description (\"Flight from A to B on DATE\", "
                             f"\"Accommodations in C\", ...), got {type(rec).__name__}.")
        out.append(rec)
    return out


FLIGHT_COLUMNS = ("Flight Number", "Price", "DepTime", "ArrTime", "FlightDate", "OriginCityName", "DestCityName")
_FLIGHT_KEY = re.compile(r"^Flight from (.+) to (.+) on (\d{4}-\d\d-\d\d)$")
_GROUND_KEY = re.compile(r"^(?:Self-driving|Taxi) from (.+) to (.+)$")
_CITY_KEY = re.compile(r"^(?:Attractions|Restaurants|Accommodations) in (.+)$")


def flight_rows(ref: dict[str, Any], where: str) -> list[dict[str, str]]:
    """The flight rows of one query's reference information, every field as text (as the database reads them; the
    checks need FLIGHT_COLUMNS)."""
    rows = []
    for key, value in ref.items():
        if not _FLIGHT_KEY.match(key) or isinstance(value, str):  # "There is no flight from ..."
            continue
        if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
            raise InputError(f"{where}: {key!r} must be a list of flight rows or a sentence, got {type(value).__name__}.")
        for n, r in enumerate(value, 1):
            absent = [c for c in FLIGHT_COLUMNS if r.get(c) in (None, "")]
            if absent:
                raise InputError(f"{where}: {key!r} row {n} lacks {', '.join(absent)}.")
            rows.append({c: str(v) for c, v in r.items()})
    return rows


# ---------------------------------------------------------------------------- the chat examples

def read_chats(path: Path) -> list[tuple[str, str, Any]]:
    """(reference information, query text, annotated plan) of each chat example of `std_travelplanner.jsonl`."""
    out = []
    for where, rec in json_lines(path, "one chat example per line ({\"messages\": [system, user, assistant]})"):
        msgs = rec.get("messages") if isinstance(rec, dict) else None
        if not (isinstance(msgs, list) and len(msgs) == 3 and all(isinstance(m, dict) for m in msgs)
                and [m.get("role") for m in msgs] == ["system", "user", "assistant"]):
            raise InputError(f"{where}: expected {{\"messages\": [system, user, assistant]}} as the official "
                             f"finetuning_data/{CHATS} writes it.")
        user = str(msgs[1].get("content", ""))
        head, sep, query = user.partition("\nQuery:")
        if not sep or not head.startswith("Given Information:"):
            raise InputError(f"{where}: the user turn must read 'Given Information:...\\nQuery:...', got "
                             f"{user[:60]!r}.")
        try:
            plan = parse_literal(str(msgs[2].get("content", "")), "plan")
        except CallParseError as exc:
            raise InputError(f"{where}: the assistant turn is not a plan (a list of day objects): {exc}") from None
        out.append((head.removeprefix("Given Information:"), query.strip(), plan))
    return out


# ---------------------------------------------------------------------------- fields from the text

_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10}
_NUM = r"(\d+|" + "|".join(_NUMBERS) + r")"
_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"), 1)}

_SOLO = re.compile(r"\b(?:single person|one person|1 person|alone|solo|single traveler)\b", re.I)
_PAIR = re.compile(r"\b(?:a pair|a couple)\b", re.I)
_PEOPLE = [re.compile(p, re.I) for p in (
    rf"\b{_NUM}\s+(?:people|persons|individuals|travell?ers|adults)\b",
    rf"\b(?:group|party) of {_NUM}\b",
    rf"\bfor {_NUM}(?=\s*[,.?]|\s+(?:departing|leaving|starting|heading|from)\b)",
)]
_BUDGET = re.compile(r"\$\s?(\d[\d,]*(?:\.\d+)?)")
_DAYS = re.compile(rf"\b{_NUM}[\s-]+days?\b", re.I)
_WEEK = re.compile(r"\b(?:a|one)[\s-]week\b|\bweek-long\b", re.I)
_CITIES = re.compile(rf"\b{_NUM}\s+(?:different\s+|distinct\s+|separate\s+|unique\s+)?cities\b", re.I)
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\b")
_YEAR = re.compile(r"\b(20\d\d)\b")

HOUSE_RULE_PATTERNS = {
    "parties": r"\bparties\b|\bparty\b(?! of)",  # "a party of 5" is the group
    "smoking": r"\bsmok(?:ing|e)\b",
    "children under 10": r"\bchildren under (?:the age of )?10\b",
    "pets": r"\bpets?\b|\bpet-friendly\b",
    "visitors": r"\bvisitors\b",
}
ROOM_TYPE_PATTERNS = {  # the first that matches: "not shared" before "shared"
    "not shared room": r"\b(?:not|non)[\s-]shared rooms?\b",
    "shared room": r"\bshared rooms?\b",
    "private room": r"\bprivate rooms?\b",
    "entire room": r"\bentire (?:rooms?|homes?|apartments?)\b",
}
CUISINES = ("Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French")
_NEGATION = r"(?:\b(?:not|no|non|never|avoid)\b|n't)[^.?!]*?"
TRANSPORT_PATTERNS = {
    "no flight": _NEGATION + r"\b(?:fly|flying|flights?)\b",
    "no self-driving": _NEGATION + r"(?:\bself-driv|\bself-drive\b|\bdrive ourselves\b|\bdriving ourselves\b)",
}


def _count(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def _one(values: set[Any], what: str, where: str, text: str) -> Any:
    if len(values) != 1:
        found = "nothing" if not values else ", ".join(sorted(map(str, values)))
        raise InputError(f"{where}: cannot read the {what} from the query text (found {found}): {text!r}.")
    return next(iter(values))


def people(text: str, where: str) -> int | None:
    """The group size the text states, or None when it states none."""
    found: set[int] = set()
    if _SOLO.search(text):
        found.add(1)
    if _PAIR.search(text):
        found.add(2)
    for pat in _PEOPLE:
        found.update(_count(m.group(1)) for m in pat.finditer(text))
    return _one(found, "group size", where, text) if found else None


def dates(text: str, where: str) -> list[str]:
    """The trip's days (ISO dates), from the first to the last day of the month the text names."""
    months = {_MONTHS[w.lower()] for w in re.findall(r"[A-Za-z]+", text) if w.lower() in _MONTHS}
    month = _one(months, "month", where, text)
    year = int(_one(set(_YEAR.findall(text)), "year", where, text))
    days = [int(d) for d in _ORDINAL.findall(text)]
    if len(days) < 2:
        raise InputError(f"{where}: cannot read the first and last day of the trip from the query text: {text!r}.")
    try:
        first, last = dt.date(year, month, days[0]), dt.date(year, month, days[-1])
    except ValueError as exc:
        raise InputError(f"{where}: the query text's dates are not a calendar date ({exc}): {text!r}.") from None
    if last < first:
        raise InputError(f"{where}: the query text's last day is before its first: {text!r}.")
    return [(first + dt.timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def local_constraint(text: str, where: str) -> dict[str, Any]:
    """The query's house rule, cuisines, room type and transportation rule as the dataset stores them (None: not
    set; cuisines in the order the text names them)."""
    def first(patterns: dict[str, str]) -> str | None:
        hits = [k for k, p in patterns.items() if re.search(p, text, re.I)]
        return hits[0] if hits else None

    rules = [k for k, p in HOUSE_RULE_PATTERNS.items() if re.search(p, text, re.I)]
    if len(rules) > 1:
        raise InputError(f"{where}: the query text names more than one house rule ({', '.join(rules)}); the dataset "
                         f"holds one: {text!r}.")

    named = {c: m.start() for c in CUISINES if (m := re.search(rf"\b{c}\b", text))}  # not "Indian" in "Indianapolis"
    cuisines = sorted(named, key=named.__getitem__)
    return {"house rule": rules[0] if rules else None, "cuisine": cuisines or None,
            "room type": first(ROOM_TYPE_PATTERNS), "transportation": first(TRANSPORT_PATTERNS)}


def level_of(lc: dict[str, Any]) -> str:
    n = sum(v is not None for v in lc.values())
    return "easy" if n == 0 else "medium" if n == 1 and lc["transportation"] is None else "hard"


def _route(ref: dict[str, Any], where: str) -> tuple[list[str], list[tuple[str, str, str | None]]]:
    """(visited cities in order, (origin, destination, date) of each leg the reference information describes)."""
    visited: list[str] = []
    legs: list[tuple[str, str, str | None]] = []
    for key in ref:
        if m := _CITY_KEY.match(key):
            if m.group(1) not in visited:
                visited.append(m.group(1))
        elif m := _FLIGHT_KEY.match(key):
            legs.append((m.group(1), m.group(2), m.group(3)))
        elif m := _GROUND_KEY.match(key):
            legs.append((m.group(1), m.group(2), None))
    if not visited or not legs:
        raise InputError(f"{where}: the reference information names no visited city or no way to travel "
                         f"(descriptions: {', '.join(list(ref)[:6])}).")
    return visited, legs


def derive_fields(query: str, ref: dict[str, Any], states: dict[str, str], where: str) -> dict[str, Any]:
    """The dataset's structured fields of one training query: from its text, and origin and destination from its
    reference information (each checked against the text). InputError names the record and what is unreadable."""
    visited, legs = _route(ref, where)
    origins = {a for a, b, _ in legs} | {b for a, b, _ in legs}
    org = _one(origins - set(visited), "origin (the reference information's one city not visited)", where, query)
    n_cities = {_count(m.group(1)) for m in _CITIES.finditer(query)} or {1}
    visiting = _one(n_cities, "number of cities", where, query)
    if visiting != len(visited):
        raise InputError(f"{where}: the query text says {visiting} cities, its reference information describes "
                         f"{len(visited)} ({', '.join(visited)}).")
    if visiting == 1:
        dest = visited[0]
    else:
        dest = _one({states.get(c, "?") for c in visited}, "state of the visited cities", where, query)
    for what, name in (("origin", org), ("destination", dest)):
        if name not in query:
            raise InputError(f"{where}: the query text does not name its {what} {name!r}: {query!r}.")
    date = dates(query, where)
    stated = {_count(m.group(1)) for m in _DAYS.finditer(query)} | ({7} if _WEEK.search(query) else set())
    if stated and stated != {len(date)}:
        raise InputError(f"{where}: the query text says {sorted(stated)} days, its dates span {len(date)}: {query!r}.")
    for a, b, d in legs:  # the flights looked up for the trip: leaving on its first day, home on its last
        if d is not None and (d not in date or (a == org and d != date[0]) or (b == org and d != date[-1])):
            raise InputError(f"{where}: the query's dates {date[0]}..{date[-1]} do not match its reference "
                             f"information's flight from {a} to {b} on {d}.")
    budget = float(_one(set(_BUDGET.findall(query)), "budget", where, query).replace(",", ""))
    lc = local_constraint(query, where)
    level = level_of(lc)
    n_people = people(query, where)
    if n_people is None:
        if level != "easy":
            raise InputError(f"{where}: the query text states no group size: {query!r}.")
        n_people = 1  # easy queries are for one person (the benchmark's design); a few texts do not say it
    return {"org": org, "dest": dest, "days": len(date), "visiting_city_number": visiting, "date": date,
            "people_number": n_people, "local_constraint": lc, "budget": int(budget) if budget.is_integer() else budget,
            "level": level}


def release_records(chats: Path, ref_info: Path, states: dict[str, str]) -> list[dict[str, Any]]:
    """One record per training query in the dataset's field names (and `annotated_plan`, `flights`): the chat
    examples and the reference-information file, which must describe the same queries in the same order."""
    examples, refs = read_chats(chats), read_ref_info(ref_info)
    if len(examples) != len(refs):
        raise InputError(f"{chats} holds {len(examples)} queries, {ref_info} {len(refs)}: expected the same queries "
                         f"line for line (both from the official repository's same commit).")
    out = []
    for n, ((reference, query, plan), ref) in enumerate(zip(examples, refs, strict=True), 1):
        where = f"{chats}, line {n}"
        shown = [a or b for a, b in re.findall(r"'Description': (?:'([^']*)'|\"([^\"]*)\")", reference)]
        if shown != list(ref):
            raise InputError(f"{where}: its reference information describes {shown[:3]}..., line {n} of {ref_info} "
                             f"{list(ref)[:3]}...: the files do not hold the same queries in the same order.")
        rec = derive_fields(query, ref, states, where)
        rec.update(query=query, reference_information=reference, annotated_plan=plan,
                   flights=flight_rows(ref, f"{ref_info}, line {n}"))
        out.append(rec)
    return out
