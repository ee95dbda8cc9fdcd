"""`travelplanner`: sole-planning travel queries, scored by the `travelplanner` evaluation suite.

**Task** (`payload`): one TravelPlanner query record with the official field names -- org, dest, days,
visiting_city_number, date, people_number, local_constraint, budget, query, level -- plus `database`, the
item's own reference sandbox: `{"flights", "accommodations", "restaurants", "attractions", "distance": [rows
with the official column names], "cities": {city: state}}`. The suite scores a plan against a database folder,
not against the text the agent is shown, and the official database is a separate download; so each item
carries the rows its plan may use, `sample` writes them once, in the official layout, to a content-addressed
folder under the cache (`travelplanner_sandbox`), and the suite's own `Database` and checks read it. The
reference information the agent sees is rendered from the same rows in the official shape (a list of
{Description, Content}); an item imported from the official files keeps its `reference_information` verbatim.

**Seeds** (`init --seeds`) come from the training split only, never from the validation or test queries the suite
evaluates on: train.csv, or the official repository's release of the 45 training queries (a folder of
std_travelplanner.jsonl, train_ref_info.jsonl and database/; the flights an item carries are then its query's
reference flights, since that database has no flights table).

**Shapes** are the level (easy, medium, hard). The level fixes which hard constraints are scored (budget only;
one more of house rule, cuisine, room type; transportation too), which is what the environment can steer
directly and what the suite reports per category; trip length (3/5/7 days, 1/2/3 cities) is the other axis,
and the self-consistency rules below tie it to visiting_city_number.

**Agent prompt and R_agent**: the suite's `official` protocol (`families/travelplanner/`, built by its
`make_sample`): the official sole-planning instruction, "Given information: ... Query: ... Travel Plan:", the
plan as JSON; reward 1 on the final pass (all 8 commonsense checks and every hard constraint the query sets).
`paper` differs only in the summary's headline, not per item, so the official one is used. `partial` is 0/1
as well (the suite's verdict has no f1); `valid` means a plan was delivered.

**Self-consistency** (`item_problem`): fields typed and in the benchmark's ranges; days 3/5/7 with 1/2/3
cities; `days` consecutive ISO dates; easy = one person and no local constraint, medium = one of house rule /
cuisine / room type, hard = two or more, transportation only on hard (the suite scores it only there); the
query text names origin, destination, days and budget; org and the destination city (or enough cities of the
destination state) are in the sandbox's city list; every table row has the columns the checks read, no empty
or NA value (the official loaders drop such rows); each destination city has attractions, restaurants and an
accommodation that meets the query's house rule, room type and occupancy; each cuisine asked for is served;
and a lower bound on cost fits the budget (cheapest way there and back, allowed by the transportation rule,
plus the cheapest acceptable room for every night; meals and inner legs are left out, so this is a
necessary condition only). Not checked: that a whole plan meeting every commonsense rule exists (minimum
nights, diverse restaurants, a route through several cities within budget); that the people and dates the
query text states match the fields (the wording varies too much: "two people", "a couple", "for 2"); and
that the data is true.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import EnvContext, Reject, SeedTask
from genenv_cli.domains.family import FamilyDomain
from genenv_cli.evals.base import EvalSample
from genenv_cli.families.travelplanner.benchmark import (
    LEVELS,
    SPLIT_SUFFIXES,
    make_sample,
    parse_query,
    sample_database,
)
from genenv_cli.families.travelplanner.checks import LOCAL_CONSTRAINTS
from genenv_cli.families.travelplanner.database import COLUMNS, FILES, PANDAS_NA
from genenv_cli.families.travelplanner.release import CHATS, ref_info_name

SHAPES = tuple(LEVELS)
CITIES_FOR_DAYS = {3: 1, 5: 2, 7: 3}
HOUSE_RULES = {"parties": "No parties", "smoking": "No smoking", "children under 10": "No children under 10",
               "pets": "No pets", "visitors": "No visitors"}
ROOM_NAMES = {"entire room": "Entire home/apt", "private room": "Private room", "shared room": "Shared room"}
ROOM_TYPES = {*ROOM_NAMES, "not shared room"}
CUISINES = {"Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French"}
TRANSPORT_RULES = {"no flight", "no self-driving"}
TABLES = ("flights", "accommodations", "restaurants", "attractions", "distance")
# columns written when every row has them: what the agent is shown besides what the checks read
EXTRA = {"flights": ["DepTime", "ArrTime", "FlightDate"], "restaurants": ["Aggregate Rating"],
         "accommodations": ["review rate number"], "attractions": [], "distance": []}
RENDER_ROWS = 12
ROW_GROUP = {"flights": ("OriginCityName", "DestCityName"), "accommodations": ("city",), "restaurants": ("City",),
             "attractions": ("City",), "distance": ("origin", "destination")}
QUERY_FIELDS = ("org", "dest", "days", "visiting_city_number", "date", "people_number", "local_constraint",
                "budget", "query", "level")

ENV_SYSTEM = """You write travel-planning queries in the format of the TravelPlanner benchmark, each with its \
own small reference database (the sandbox a plan must come from). Write one JSON object and nothing else, with \
the keys of the example: org (home city), dest (a city, or a state when the trip visits 2 or 3 of its cities), \
days (3, 5 or 7; 1, 2 or 3 cities), visiting_city_number, date (the trip's days as "YYYY-MM-DD"), people_number, \
local_constraint ({"house rule": one of parties, smoking, children under 10, pets, visitors, or null; \
"cuisine": a list from Chinese, American, Italian, Mexican, Indian, Mediterranean, French, or null; \
"room type": entire room, private room, shared room, not shared room, or null; "transportation": no flight, \
no self-driving, or null}), budget (dollars), query (the request in plain words, naming origin, destination, \
days, dates, people and budget), level (easy: one person, no local constraint; medium: one of house rule, \
cuisine, room type; hard: two or more, transportation allowed), and database: flights, accommodations, \
restaurants, attractions and distance rows with the example's column names, and cities mapping each city to \
its state. Give every destination city attractions, restaurants and rooms, and a way there and back, so that \
a plan within the budget exists."""


# ---------------------------------------------------------------------------- self-consistency

def _rows(db: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return db.get(table) or []


def _num(value: Any) -> float | None:
    try:
        f = float(str(value).replace(",", "").replace("km", "").strip())
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _table_problem(db: Any) -> str | None:
    if not isinstance(db, dict):
        return "database must be an object with flights, accommodations, restaurants, attractions, distance, cities"
    cities = db.get("cities")
    if not (isinstance(cities, dict) and cities and all(isinstance(k, str) and k.strip() and isinstance(v, str)
                                                        and v.strip() for k, v in cities.items())):
        return "database.cities must map each city to its state"
    for table in TABLES:
        rows = db.get(table)
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            return f"database.{table} must be a list of rows (objects)"
        for n, row in enumerate(rows, 1):
            for col in COLUMNS[table]:
                v = row.get(col)
                if v is None or isinstance(v, dict | list | bool) or str(v).strip() in PANDAS_NA:
                    return f"database.{table} row {n} has no {col!r}"
    numeric = {"flights": ["Price"], "accommodations": ["price", "minimum nights", "maximum occupancy"],
               "restaurants": ["Average Cost"], "distance": ["distance"]}
    for table, cols in numeric.items():
        for n, row in enumerate(_rows(db, table), 1):
            for col in cols:
                v = _num(row[col])
                if v is None or v < (1 if col in ("maximum occupancy", "minimum nights") else 0):
                    return f"database.{table} row {n}: {col!r} must be a number, got {row[col]!r}"
    return None


def _dates_problem(dates: Any, days: int) -> str | None:
    if not (isinstance(dates, list) and len(dates) == days and all(isinstance(d, str) for d in dates)):
        return f"date must be a list of {days} dates (YYYY-MM-DD), one per day"
    try:
        parsed = [dt.date.fromisoformat(d) for d in dates]
    except ValueError:
        return f"date holds a value that is not YYYY-MM-DD: {dates}"
    if any((b - a).days != 1 for a, b in zip(parsed, parsed[1:], strict=False)):
        return "the dates must be consecutive days"
    return None


def _constraint_problem(level: str, lc: dict[str, Any], people: int) -> str | None:
    if set(lc) - set(LOCAL_CONSTRAINTS):
        return f"local_constraint has unknown key(s) {sorted(set(lc) - set(LOCAL_CONSTRAINTS))}"
    rule, cuisine, room, transport = (lc.get(k) for k in LOCAL_CONSTRAINTS)
    if rule is not None and rule not in HOUSE_RULES:
        return f"house rule {rule!r} is not one of {', '.join(HOUSE_RULES)}"
    if room is not None and room not in ROOM_TYPES:
        return f"room type {room!r} is not one of {', '.join(sorted(ROOM_TYPES))}"
    if transport is not None and transport not in TRANSPORT_RULES:
        return f"transportation {transport!r} is not one of {', '.join(sorted(TRANSPORT_RULES))}"
    if cuisine is not None and not (isinstance(cuisine, list) and cuisine and set(cuisine) <= CUISINES
                                    and len(set(cuisine)) == len(cuisine)):
        return f"cuisine must be a list of distinct cuisines from {', '.join(sorted(CUISINES))}"
    n = sum(v is not None for v in (rule, cuisine, room, transport))
    if level == "easy" and (n or people != 1):
        return "an easy query is for one person with no local constraint"
    if level == "medium" and (n != 1 or transport is not None):
        return "a medium query sets exactly one of house rule, cuisine, room type"
    if level == "hard" and n < 2:
        return "a hard query sets at least two local constraints"
    return None


def _dest_cities(p: dict[str, Any]) -> list[str]:
    cities = p["database"]["cities"]
    if p["visiting_city_number"] == 1:
        return [p["dest"]] if p["dest"] in cities else []
    return [c for c, state in cities.items() if state == p["dest"] and c != p["org"]]


def _room_ok(row: dict[str, Any], lc: dict[str, Any], people: int) -> bool:
    rule, room = lc.get("house rule"), lc.get("room type")
    if rule and HOUSE_RULES[rule] in str(row["house_rules"]):
        return False
    rtype = str(row["room type"])
    if room == "not shared room" and rtype == "Shared room":
        return False
    return room not in ROOM_NAMES or rtype == ROOM_NAMES[room]


def _room_cost(row: dict[str, Any], people: int) -> float:
    return _num(row["price"]) * math.ceil(people / _num(row["maximum occupancy"]))


def _leg_cost(db: dict[str, Any], a: str, b: str, people: int, transport: str | None) -> float | None:
    """The cheapest way from a to b the transportation rule allows (None: there is none)."""
    costs = []
    if transport != "no flight":
        costs += [_num(f["Price"]) * people for f in _rows(db, "flights")
                  if f["OriginCityName"] == a and f["DestCityName"] == b]
    for d in _rows(db, "distance"):
        if d["origin"] == a and d["destination"] == b and "day" not in str(d["duration"]):
            km = _num(d["distance"])
            if transport != "no self-driving":
                costs.append(int(km * 0.05) * math.ceil(people / 5))
            costs.append(int(km) * math.ceil(people / 4))
    return min(costs) if costs else None


def item_problem(p: Any) -> str | None:
    """Why the payload is not a self-consistent TravelPlanner item, or None."""
    if not isinstance(p, dict):
        return "payload must be a JSON object"
    absent = [k for k in (*QUERY_FIELDS, "database") if p.get(k) in (None, "")]
    if absent:
        return f"missing field(s) {', '.join(absent)}"
    if not all(isinstance(p[k], str) and p[k].strip() for k in ("org", "dest", "query", "level")):
        return "org, dest, query and level must be text"
    if p["level"] not in LEVELS:
        return f"level must be one of {', '.join(LEVELS)}, got {p['level']!r}"
    ints = ("days", "visiting_city_number", "people_number")
    if not all(isinstance(p[k], int) and not isinstance(p[k], bool) for k in ints):
        return "days, visiting_city_number and people_number must be whole numbers"
    if p["days"] not in CITIES_FOR_DAYS:
        return f"days must be 3, 5 or 7, got {p['days']}"
    if p["visiting_city_number"] != CITIES_FOR_DAYS[p["days"]]:
        return f"a {p['days']}-day trip visits {CITIES_FOR_DAYS[p['days']]} city(ies), not {p['visiting_city_number']}"
    if not 1 <= p["people_number"] <= 8:
        return f"people_number must be 1 to 8, got {p['people_number']}"
    budget = p["budget"]
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not 0 < budget < 1e6:
        return f"budget must be a positive number of dollars, got {budget!r}"
    problem = _dates_problem(p["date"], p["days"])
    if problem:
        return problem
    if not isinstance(p["local_constraint"], dict):
        return "local_constraint must be an object"
    lc, people = p["local_constraint"], p["people_number"]
    problem = _constraint_problem(p["level"], lc, people) or _table_problem(p["database"])
    if problem:
        return problem
    if "reference_information" in p and not isinstance(p["reference_information"], str):
        return "reference_information must be text"
    return _query_text_problem(p) or _sandbox_problem(p)


def _query_text_problem(p: dict[str, Any]) -> str | None:
    q = p["query"]
    for what in ("org", "dest"):
        if p[what] not in q:
            return f"the query text does not name its {what} {p[what]!r}"
    week = r"|\bweek\b" if p["days"] == 7 else ""  # "a one-week trip", "week-long"
    first, last = (int(d[-2:]) for d in (p["date"][0], p["date"][-1]))  # or the first and last day: "24th to 26th"
    span = all(re.search(rf"\b{d}(?:st|nd|rd|th)?\b", q) for d in (first, last))
    if not span and not re.search(rf"\b{p['days']}\b|\b{['', '', '', 'three', '', 'five', '', 'seven'][p['days']]}\b{week}",
                                  q, re.IGNORECASE):
        return f"the query text does not say {p['days']} days (nor its first and last day)"
    b = p["budget"]
    spelled = {f"{b:,.0f}", f"{b:.0f}"} if float(b).is_integer() else {f"{b:,}", str(b)}
    if not any(s in q for s in spelled):
        return f"the query text does not state the budget {b}"
    return None


def _sandbox_problem(p: dict[str, Any]) -> str | None:
    db, lc, people, org = p["database"], p["local_constraint"], p["people_number"], p["org"]
    if org not in db["cities"]:
        return f"origin {org!r} is not in database.cities"
    dests = _dest_cities(p)
    need = p["visiting_city_number"]
    if need == 1 and not dests:
        return f"destination {p['dest']!r} is not in database.cities"
    if need > 1 and p["dest"] == db["cities"][org]:
        return f"the origin {org!r} is in the destination state {p['dest']!r}"
    usable, why = [], ""
    for city in dests:
        rooms = [r for r in _rows(db, "accommodations") if r["city"] == city and _room_ok(r, lc, people)]
        if not any(a["City"] == city for a in _rows(db, "attractions")):
            why = why or f"{city} has no attractions"
        elif sum(r["City"] == city for r in _rows(db, "restaurants")) < 3:
            why = why or f"{city} has fewer than 3 restaurants"
        elif not rooms:
            why = why or f"{city} has no accommodation meeting the query's room constraints"
        else:
            usable.append((city, min(_room_cost(r, people) for r in rooms)))
    if len(usable) < need:
        return why or f"the destination {p['dest']!r} has {len(usable)} usable cities in the sandbox, needs {need}"
    for c in lc.get("cuisine") or []:
        if not any(c in str(r["Cuisines"]) and r["City"] in dests for r in _rows(db, "restaurants")):
            return f"no destination restaurant serves {c}"
    transport = lc.get("transportation")
    out = [x for x in (_leg_cost(db, org, c, people, transport) for c, _ in usable) if x is not None]
    back = [x for x in (_leg_cost(db, c, org, people, transport) for c, _ in usable) if x is not None]
    if not out or not back:
        return f"no allowed way from {org} to the destination and back in the sandbox"
    bound = min(out) + min(back) + (p["days"] - 1) * min(cost for _, cost in usable)
    if bound > p["budget"]:
        return f"no plan fits the budget: travel and rooms alone cost at least {bound:.0f} > {p['budget']}"
    return None


# ---------------------------------------------------------------------------- the sandbox on disk

def _cell(v: Any) -> str:
    """One CSV field, quoted where a reader would otherwise split or trim it (the official tables have names with
    surrounding spaces and line breaks)."""
    s = str(v)
    return f'"{s.replace(chr(34), chr(34) * 2)}"' if any(c in s for c in ',"\n\r') or s != s.strip() else s


def _columns(db: dict[str, Any], table: str) -> list[str]:
    rows = _rows(db, table)
    return COLUMNS[table] + [c for c in EXTRA[table] if rows and all(r.get(c) not in (None, "") for r in rows)]


def travelplanner_sandbox(db: dict[str, Any], base: Path) -> Path:
    """The folder, under `base`, holding `db` in the official database layout (written once per content)."""
    blob = json.dumps(db, sort_keys=True, ensure_ascii=False)
    root = Path(base) / hashlib.sha256(blob.encode()).hexdigest()[:20]
    if (root / FILES["cities"]).is_file():
        return root
    tmp = Path(base) / f".tmp-{os.getpid()}-{threading.get_ident()}-{root.name}"  # score runs a thread pool
    shutil.rmtree(tmp, ignore_errors=True)
    for table in TABLES:
        cols = _columns(db, table)
        lines = [",".join(cols)] + [",".join(_cell(r.get(c, "")) for c in cols) for r in _rows(db, table)]
        (tmp / FILES[table]).parent.mkdir(parents=True, exist_ok=True)
        (tmp / FILES[table]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp / FILES["cities"]).parent.mkdir(parents=True, exist_ok=True)
    (tmp / FILES["cities"]).write_text("\n".join(f"{c}\t{s}" for c, s in db["cities"].items()), encoding="utf-8")
    try:
        os.replace(tmp, root)
    except OSError:  # written meanwhile by another process
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def _table_text(rows: list[dict[str, Any]], cols: list[str]) -> str:
    """A right-aligned text table without index, as pandas' to_string prints the official reference tables."""
    cells = [cols] + [[str(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    return "\n".join(" ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells)


def reference_information(p: dict[str, Any]) -> str:
    """The reference information shown to the agent, in the official shape (a list of Description/Content)."""
    db, out = p["database"], []
    cities = [p["org"], *_dest_cities(p)]
    for a in cities:
        for b in cities:
            fl = [f for f in _rows(db, "flights") if f["OriginCityName"] == a and f["DestCityName"] == b]
            if fl:
                cols = ["Flight Number", "Price", *[c for c in EXTRA["flights"] if c in _columns(db, "flights")],
                        "OriginCityName", "DestCityName"]
                out.append({"Description": f"Flight from {a} to {b}", "Content": _table_text(fl, cols)})
            for d in _rows(db, "distance"):
                if d["origin"] == a and d["destination"] == b:
                    km = _num(d["distance"])
                    for mode, cost in (("Self-driving", int(km * 0.05)), ("Taxi", int(km))):
                        out.append({"Description": f"{mode} from {a} to {b}",
                                    "Content": f"{mode.lower()}, from {a} to {b}, duration: {d['duration']}, "
                                               f"distance: {d['distance']}, cost: {cost}"})
    for city in cities[1:]:
        for table, label, key in (("attractions", "Attractions", "City"), ("restaurants", "Restaurants", "City"),
                                  ("accommodations", "Accommodations", "city")):
            rows = [r for r in _rows(db, table) if r[key] == city]
            if rows:
                out.append({"Description": f"{label} in {city}", "Content": _table_text(rows, _columns(db, table))})
    return str(out)


# ---------------------------------------------------------------------------- the domain

class TravelPlannerDomain(FamilyDomain):
    name = "travelplanner"
    description = ("TravelPlanner sole-planning queries, each with its own reference sandbox; scored by the "
                   "travelplanner suite's commonsense and hard constraints (final pass)")
    shapes = SHAPES
    benchmark = "travelplanner"
    seed_file = "travelplanner_seeds.jsonl"
    seed_folders = True  # the official release is a folder: std_travelplanner.jsonl, train_ref_info.jsonl, database/
    env_system = ENV_SYSTEM
    seed_format = ("the TravelPlanner training split as `genenv evaluate --bench travelplanner --data FILE` reads "
                   "it: train.csv (.jsonl, .json, .parquet) with database/ beside it, or the official repository's "
                   "folder of std_travelplanner.jsonl, train_ref_info.jsonl and database/ (never validation or test)")

    def _sandbox_base(self) -> Path:
        from genenv_cli.core.paths import cache_dir

        return cache_dir() / "travelplanner-sandboxes"

    def sample(self, payload: dict[str, Any]) -> EvalSample:
        rec = {k: payload[k] for k in QUERY_FIELDS}
        rec["reference_information"] = payload.get("reference_information") or reference_information(payload)
        gold, query, ref = parse_query(rec, 1, Path("travelplanner item"))
        root = travelplanner_sandbox(payload["database"], self._sandbox_base())
        return make_sample("item", gold, query, ref, root)

    def read_seeds(self, path: Path) -> list[SeedTask]:
        """The training split only (the official repository's release of it, or train.csv): validation and test
        queries are what the suite evaluates on, so a file of theirs is refused."""
        from genenv_cli.core.paths import cache_dir

        path = Path(path)
        if path.is_file() and path.name.lower().startswith(("validation", "test")):
            raise InputError(f"{path}: the travelplanner domain trains on the training split only; "
                             f"{path.name} holds evaluation queries. Give the training split (train.csv, or the "
                             f"official repository's std_travelplanner.jsonl with train_ref_info.jsonl and database/).")
        loaded = self.suite.load(data=path, split="train", version=None, protocol=self.protocol,
                                 cache_dir=cache_dir() / "benchmarks" / self.benchmark)
        return self.checked_seeds(path, loaded.samples)

    def seed_files(self, path: Path) -> list[tuple[Path, str]]:
        """The query files of a source (the split file; the release's chat examples and reference information);
        each item carries the database rows it uses, so the database is not copied."""
        path = Path(path)
        if path.is_file():
            return [(path, path.name)]
        names = [*(f"train{suffix}" for suffix in SPLIT_SUFFIXES), CHATS, ref_info_name("train")]
        return [(path / n, n) for n in names if (path / n).is_file()]

    def seed_from_sample(self, sample: EvalSample) -> SeedTask:
        """An official query with the rows of the official database its cities use (so the item stands alone)."""
        import polars as pl

        g = sample.gold
        db = sample_database(sample)  # the suite's instance (its tables read once), with the query's own flights
        state_cities = [c for c, s in db.cities.items() if s == g["dest"]]
        cities = {g["org"], g["dest"], *state_cities}
        flights = db.flight_table().filter(pl.col("OriginCityName").is_in(list(cities))
                                            & pl.col("DestCityName").is_in(list(cities)))
        snap: dict[str, Any] = {
            "flights": flights.to_dicts(),
            "accommodations": [{"NAME": a.name, "price": a.price, "room type": a.room_type,
                                "house_rules": a.house_rules, "minimum nights": a.minimum_nights,
                                "maximum occupancy": a.maximum_occupancy, "city": c}
                               for c in sorted(cities) for a in db.accommodation_table().get(c, [])],
            "restaurants": [{"Name": r.name, "City": c, "Cuisines": r.cuisines, "Average Cost": r.average_cost}
                            for c in sorted(cities) for r in db.restaurant_table().get(c, [])],
            "attractions": [{"Name": n, "City": c} for c in sorted(cities) for n in db.attraction_table().get(c, [])],
            "distance": [{"origin": a, "destination": b, "duration": d, "distance": km}
                         for (a, b), (d, km) in db.distance_table().items()
                         if a in cities and b in cities and d is not None and km is not None],
            "cities": {c: db.cities[c] for c in sorted(cities) if c in db.cities},
        }
        payload = {k: g[k] for k in QUERY_FIELDS if k in g} | {"query": sample.meta["query"], "database": snap,
                                                               "reference_information": _user_reference(sample)}
        return SeedTask(f"travelplanner-{g['level']}-{sample.id}", "", g["level"], payload)

    def gold_answer(self, payload: dict[str, Any]) -> str | None:
        return None  # an item carries its sandbox, not a plan: the right answer cannot be written from it

    def wrong_answer(self, payload: dict[str, Any]) -> str:
        return "No plan."

    def render_item(self, payload: dict[str, Any]) -> str:
        """The item as the environment sees it; an imported official item's sandbox (hundreds of rows a city) is
        cut to its first RENDER_ROWS rows per city (per route for flights and distances): an example of the
        format, not the whole table."""
        db = payload["database"]
        shown: dict[str, Any] = {"cities": db["cities"]}
        for table in TABLES:
            seen: dict[Any, int] = {}
            rows = []
            for r in _rows(db, table):
                key = tuple(r.get(k) for k in ROW_GROUP[table])
                seen[key] = seen.get(key, 0) + 1
                if seen[key] <= RENDER_ROWS:
                    rows.append(r)
            shown[table] = rows
        item = {k: payload[k] for k in QUERY_FIELDS} | {"database": shown}
        return json.dumps(item, ensure_ascii=False)

    def item_from_json(self, obj: dict[str, Any], ctx: EnvContext) -> tuple[dict[str, Any], str]:
        missing = [k for k in (*QUERY_FIELDS, "database") if k not in obj]
        if missing:
            raise Reject(f"parse: the item lacks {', '.join(missing)}")
        payload = {k: obj[k] for k in (*QUERY_FIELDS, "database")}
        try:  # the suite's loader reads the record as it would a split-file row
            parse_query(payload | {"reference_information": "-"}, 1, Path("the item"))
        except InputError as exc:
            raise Reject(f"parse: {str(exc).removeprefix('the item, record 1: ')}") from None
        problem = item_problem(payload)
        if problem:
            raise Reject(f"invalid: {problem}")
        return payload, payload["level"]

    def check_payload(self, payload: Any) -> str | None:
        return item_problem(payload)

    def dedup_text(self, payload: dict[str, Any]) -> str:
        return payload["query"]


def _user_reference(sample: EvalSample) -> str:
    text = sample.messages[-1]["content"]
    return text.removeprefix("Given information: ").rsplit("\nQuery: ", 1)[0]
