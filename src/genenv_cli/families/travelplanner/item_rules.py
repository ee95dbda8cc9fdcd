"""What a `travelplanner` item must satisfy to be kept (`item_problem`): the self-consistency rules listed in
`domain.py`, over the query fields and the item's own sandbox tables."""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

from genenv_cli.families.travelplanner.checks import LOCAL_CONSTRAINTS
from genenv_cli.families.travelplanner.database import COLUMNS, PANDAS_NA
from genenv_cli.families.travelplanner.queries import LEVELS

CITIES_FOR_DAYS = {3: 1, 5: 2, 7: 3}
HOUSE_RULES = {"parties": "No parties", "smoking": "No smoking", "children under 10": "No children under 10",
               "pets": "No pets", "visitors": "No visitors"}
ROOM_NAMES = {"entire room": "Entire home/apt", "private room": "Private room", "shared room": "Shared room"}
ROOM_TYPES = {*ROOM_NAMES, "not shared room"}
CUISINES = {"Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French"}
TRANSPORT_RULES = {"no flight", "no self-driving"}
TABLES = ("flights", "accommodations", "restaurants", "attractions", "distance")
QUERY_FIELDS = ("org", "dest", "days", "visiting_city_number", "date", "people_number", "local_constraint",
                "budget", "query", "level")


def table_rows(db: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """The rows of one of a sandbox's tables (none when it is absent)."""
    return db.get(table) or []


def as_number(value: Any) -> float | None:
    """A table cell as a finite number ("1,234", "56 km" read too), or None."""
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
        for n, row in enumerate(table_rows(db, table), 1):
            for col in cols:
                v = as_number(row[col])
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


def dest_cities(p: dict[str, Any]) -> list[str]:
    """The destination cities of an item that its sandbox lists: the city itself, or the state's cities."""
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
    return as_number(row["price"]) * math.ceil(people / as_number(row["maximum occupancy"]))


def _leg_cost(db: dict[str, Any], a: str, b: str, people: int, transport: str | None) -> float | None:
    """The cheapest way from a to b the transportation rule allows (None: there is none)."""
    costs = []
    if transport != "no flight":
        costs += [as_number(f["Price"]) * people for f in table_rows(db, "flights")
                  if f["OriginCityName"] == a and f["DestCityName"] == b]
    for d in table_rows(db, "distance"):
        if d["origin"] == a and d["destination"] == b and "day" not in str(d["duration"]):
            km = as_number(d["distance"])
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
    dests = dest_cities(p)
    need = p["visiting_city_number"]
    if need == 1 and not dests:
        return f"destination {p['dest']!r} is not in database.cities"
    if need > 1 and p["dest"] == db["cities"][org]:
        return f"the origin {org!r} is in the destination state {p['dest']!r}"
    usable, why = [], ""
    for city in dests:
        rooms = [r for r in table_rows(db, "accommodations") if r["city"] == city and _room_ok(r, lc, people)]
        if not any(a["City"] == city for a in table_rows(db, "attractions")):
            why = why or f"{city} has no attractions"
        elif sum(r["City"] == city for r in table_rows(db, "restaurants")) < 3:
            why = why or f"{city} has fewer than 3 restaurants"
        elif not rooms:
            why = why or f"{city} has no accommodation meeting the query's room constraints"
        else:
            usable.append((city, min(_room_cost(r, people) for r in rooms)))
    if len(usable) < need:
        return why or f"the destination {p['dest']!r} has {len(usable)} usable cities in the sandbox, needs {need}"
    for c in lc.get("cuisine") or []:
        if not any(c in str(r["Cuisines"]) and r["City"] in dests for r in table_rows(db, "restaurants")):
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
