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

**Self-consistency** (`item_rules.item_problem`): fields typed and in the benchmark's ranges; days 3/5/7 with 1/2/3
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

import hashlib
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import EnvContext, Reject, SeedTask
from genenv_cli.domains.family import FamilyDomain
from genenv_cli.evals.base import EvalSample
from genenv_cli.families.travelplanner.benchmark import sample_database
from genenv_cli.families.travelplanner.database import COLUMNS, FILES
from genenv_cli.families.travelplanner.item_rules import (
    QUERY_FIELDS,
    TABLES,
    as_number,
    dest_cities,
    item_problem,
    table_rows,
)
from genenv_cli.families.travelplanner.prompt import make_sample
from genenv_cli.families.travelplanner.queries import LEVELS, SPLIT_SUFFIXES, parse_query
from genenv_cli.families.travelplanner.release import CHATS, ref_info_name

SHAPES = tuple(LEVELS)
# columns written when every row has them: what the agent is shown besides what the checks read
EXTRA = {"flights": ["DepTime", "ArrTime", "FlightDate"], "restaurants": ["Aggregate Rating"],
         "accommodations": ["review rate number"], "attractions": [], "distance": []}
RENDER_ROWS = 12
ROW_GROUP = {"flights": ("OriginCityName", "DestCityName"), "accommodations": ("city",), "restaurants": ("City",),
             "attractions": ("City",), "distance": ("origin", "destination")}

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



# ---------------------------------------------------------------------------- the sandbox on disk

def _cell(v: Any) -> str:
    """One CSV field, quoted where a reader would otherwise split or trim it (the official tables have names with
    surrounding spaces and line breaks)."""
    s = str(v)
    return f'"{s.replace(chr(34), chr(34) * 2)}"' if any(c in s for c in ',"\n\r') or s != s.strip() else s


def _columns(db: dict[str, Any], table: str) -> list[str]:
    rows = table_rows(db, table)
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
        lines = [",".join(cols)] + [",".join(_cell(r.get(c, "")) for c in cols) for r in table_rows(db, table)]
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
    cities = [p["org"], *dest_cities(p)]
    for a in cities:
        for b in cities:
            fl = [f for f in table_rows(db, "flights") if f["OriginCityName"] == a and f["DestCityName"] == b]
            if fl:
                cols = ["Flight Number", "Price", *[c for c in EXTRA["flights"] if c in _columns(db, "flights")],
                        "OriginCityName", "DestCityName"]
                out.append({"Description": f"Flight from {a} to {b}", "Content": _table_text(fl, cols)})
            for d in table_rows(db, "distance"):
                if d["origin"] == a and d["destination"] == b:
                    km = as_number(d["distance"])
                    for mode, cost in (("Self-driving", int(km * 0.05)), ("Taxi", int(km))):
                        out.append({"Description": f"{mode} from {a} to {b}",
                                    "Content": f"{mode.lower()}, from {a} to {b}, duration: {d['duration']}, "
                                               f"distance: {d['distance']}, cost: {cost}"})
    for city in cities[1:]:
        for table, label, key in (("attractions", "Attractions", "City"), ("restaurants", "Restaurants", "City"),
                                  ("accommodations", "Accommodations", "city")):
            rows = [r for r in table_rows(db, table) if r[key] == city]
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
            for r in table_rows(db, table):
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
