"""Plans broken on purpose, from TravelPlanner's annotated reference plans: each planted error names the constraint
(the official key) it must fail; the perturbations are the kinds of mistakes a model makes, with no named
constraint. Used by `travelplanner_official.py` (genenv's checks beside the official evaluator) and by the
real-file tests (tests/evals/test_travelplanner_release.py).

A case is (name, constraint or None, query, plan); the query is a copy of the sample's gold record (some plants
change the query, not the plan: a budget set too low, a house rule the reference accommodation forbids)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from genenv_cli.families.travelplanner.database import Database
from genenv_cli.families.travelplanner.hard_constraints import total_cost
from genenv_cli.families.travelplanner.plan_fields import MEALS, filled, name_city

HOUSE_RULES = {"smoking": "No smoking", "parties": "No parties", "children under 10": "No children under 10",
               "visitors": "No visitors", "pets": "No pets"}
ROOM_NAMES = {"entire room": "Entire home/apt", "private room": "Private room", "shared room": "Shared room"}
CUISINES = ("Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French")
PHANTOM = "Genenv Phantom"


@dataclass
class Case:
    name: str
    constraint: str | None
    query: dict[str, Any]
    plan: list[dict[str, Any]]


def _days(q: dict[str, Any], plan: list[dict[str, Any]]) -> list[int]:
    return list(range(min(q["days"], len(plan))))


def _stays(q: dict[str, Any], plan: list[dict[str, Any]]) -> list[tuple[str, list[int]]]:
    """(accommodation, the days naming it in a row) of the plan."""
    runs: list[tuple[str, list[int]]] = []
    for i in _days(q, plan):
        v = plan[i].get("accommodation")
        if not filled(v):
            continue
        if runs and runs[-1][0] == v and runs[-1][1][-1] == i - 1:
            runs[-1][1].append(i)
        else:
            runs.append((v, [i]))
    return runs


def _swap_stay(plan: list[dict[str, Any]], days: list[int], city: str, name: str) -> list[dict[str, Any]]:
    out = copy.deepcopy(plan)
    for i in days:
        out[i]["accommodation"] = f"{name}, {city}"
    return out


def _other_room(db: Database, city: str, nights: int, keep: Callable[[Any], bool]) -> str | None:
    """The first accommodation of `city` that `keep` accepts and whose minimum stay `nights` meets."""
    for a in db.accommodation_table().get(city, []):
        if keep(a) and float(a.minimum_nights) <= nights and sum(a.name in b.name for b in
                                                                 db.accommodation_table()[city]) == 1:
            return a.name
    return None


# ---------------------------------------------------------------------------- planted errors

def fake_flight(q, plan, db):
    for i in _days(q, plan):
        t = plan[i].get("transportation", "")
        if "Flight Number: " in t:
            out = copy.deepcopy(plan)
            number = t.split("Flight Number: ")[1].split(",")[0]
            out[i]["transportation"] = t.replace(number, "F0000000")
            return q, out
    return None


def fake_restaurant(q, plan, db):
    for i in _days(q, plan):
        for meal in MEALS:
            if filled(plan[i].get(meal)):
                out = copy.deepcopy(plan)
                out[i][meal] = f"{PHANTOM} Diner, {name_city(plan[i][meal])[1]}"
                return q, out
    return None


def fake_accommodation(q, plan, db):
    stays = _stays(q, plan)
    if not stays:
        return None
    value, days = stays[0]
    return q, _swap_stay(plan, days, name_city(value)[1], f"{PHANTOM} Lodge")


def budget_too_low(q, plan, db):
    q = dict(q, budget=total_cost(q, plan, db) - 1)
    return q, plan


def repeated_restaurant(q, plan, db):
    seen: dict[str, str] = {}  # city -> the first meal there
    for i in _days(q, plan):
        for meal in MEALS:
            v = plan[i].get(meal)
            if filled(v):
                city = name_city(v)[1]
                if city in seen and seen[city] != v:
                    out = copy.deepcopy(plan)
                    out[i][meal] = seen[city]
                    return q, out
                seen.setdefault(city, v)
    return None


def wrong_city_sequence(q, plan, db):
    """The trip does not come home: the last day travels to the first visited city instead of the origin."""
    days = _days(q, plan)
    last = plan[days[-1]].get("current_city", "")
    first = plan[0].get("current_city", "")
    if not (last.startswith("from ") and first.startswith("from ") and " to " in first):
        return None
    visited = first.split(" to ", 1)[1]
    here = last[len("from "):].split(" to ")[0]
    if here == visited:
        return None
    out = copy.deepcopy(plan)
    out[days[-1]]["current_city"] = f"from {here} to {visited}"
    return q, out


def house_rule_broken(q, plan, db):
    """An accommodation that forbids the query's house rule; a query without one is given a rule its reference
    accommodation forbids."""
    rule = q["local_constraint"].get("house rule")
    stays = _stays(q, plan)
    if not stays:
        return None
    value, days = stays[0]
    name, city = name_city(value)
    if rule is None:
        rows = db.accommodations(name, city)
        forbidden = [r for r, text in HOUSE_RULES.items() if rows and text in rows[0].house_rules]
        if not forbidden:
            return None
        return dict(q, local_constraint=dict(q["local_constraint"], **{"house rule": forbidden[0]})), plan
    other = _other_room(db, city, len(days), lambda a: HOUSE_RULES[rule] in a.house_rules)
    return (q, _swap_stay(plan, days, city, other)) if other else None


def room_type_broken(q, plan, db):
    wanted = q["local_constraint"].get("room type")
    stays = _stays(q, plan)
    if wanted not in ROOM_NAMES or not stays:
        return None
    value, days = stays[0]
    city = name_city(value)[1]
    other = _other_room(db, city, len(days), lambda a: a.room_type != ROOM_NAMES[wanted])
    return (q, _swap_stay(plan, days, city, other)) if other else None


def transportation_rule_broken(q, plan, db):
    """The query forbids the way the plan travels."""
    ways = " ".join(plan[i].get("transportation", "") for i in _days(q, plan))
    rule = "no flight" if "Flight" in ways else "no self-driving" if "Self-driving" in ways else None
    if rule is None:
        return None
    return dict(q, local_constraint=dict(q["local_constraint"], transportation=rule)), plan


def cuisine_missing(q, plan, db):
    """The query asks for a cuisine none of the plan's destination restaurants serves."""
    served = ""
    for i in _days(q, plan):
        for meal in MEALS:
            if filled(plan[i].get(meal)):
                r = db.restaurant(*name_city(plan[i][meal]))
                served += r.cuisines if r else ""
    absent = [c for c in CUISINES if c not in served]
    if not absent:
        return None
    return dict(q, local_constraint=dict(q["local_constraint"], cuisine=[absent[0]])), plan


PLANTS: dict[str, tuple[str, Callable]] = {
    "fake_flight": ("is_valid_information_in_sandbox", fake_flight),
    "fake_restaurant": ("is_valid_information_in_sandbox", fake_restaurant),
    "fake_accommodation": ("is_valid_information_in_sandbox", fake_accommodation),
    "budget_too_low": ("valid_cost", budget_too_low),
    "repeated_restaurant": ("is_valid_restaurants", repeated_restaurant),
    "wrong_city_sequence": ("is_reasonable_visiting_city", wrong_city_sequence),
    "house_rule_broken": ("valid_room_rule", house_rule_broken),
    "room_type_broken": ("valid_room_type", room_type_broken),
    "transportation_rule_broken": ("valid_transportation", transportation_rule_broken),
    "cuisine_missing": ("valid_cuisine", cuisine_missing),
}


# ---------------------------------------------------------------------------- perturbations (no named constraint)

def drop_last_day(q, plan, db):
    return q, copy.deepcopy(plan[:max(1, q["days"] - 1)])


def skip_a_meal(q, plan, db):
    for i in _days(q, plan):
        if "from" not in plan[i].get("current_city", "") and filled(plan[i].get("lunch")):
            out = copy.deepcopy(plan)
            out[i]["lunch"] = "-"
            return q, out
    return None


def repeat_attraction(q, plan, db):
    firsts = [plan[i]["attraction"] for i in _days(q, plan) if filled(plan[i].get("attraction"))]
    if len(firsts) < 2:
        return None
    out = copy.deepcopy(plan)
    for i in _days(q, plan):
        if filled(out[i].get("attraction")) and out[i]["attraction"] != firsts[0]:
            out[i]["attraction"] = firsts[0].split(";")[0] + ";" + out[i]["attraction"]
            return q, out
    return None


def drive_out(q, plan, db):
    """The first day drives instead of its written way (a self-driving leg beside the plan's flights)."""
    cc = plan[0].get("current_city", "")
    if not cc.startswith("from ") or " to " not in cc:
        return None
    a, b = cc[len("from "):].split(" to ", 1)
    out = copy.deepcopy(plan)
    out[0]["transportation"] = f"Self-driving, from {a} to {b}, duration: 5 hours, distance: 500 km, cost: 25"
    return q, out


def short_stay(q, plan, db):
    """An accommodation whose minimum stay is longer than the nights booked."""
    stays = _stays(q, plan)
    if not stays:
        return None
    value, days = stays[0]
    city = name_city(value)[1]
    for a in db.accommodation_table().get(city, []):
        if float(a.minimum_nights) > len(days) and sum(a.name in b.name for b in db.accommodation_table()[city]) == 1:
            return q, _swap_stay(plan, days, city, a.name)
    return None


def meal_at_home(q, plan, db):
    """A dinner at a restaurant of the origin city on a day spent at the destination."""
    home = db.restaurant_table().get(q["org"], [])
    if not home:
        return None
    for i in _days(q, plan):
        if "from" not in plan[i].get("current_city", "") and filled(plan[i].get("dinner")):
            out = copy.deepcopy(plan)
            out[i]["dinner"] = f"{home[0].name}, {q['org']}"
            return q, out
    return None


PERTURBATIONS: dict[str, Callable] = {
    "drop_last_day": drop_last_day, "skip_a_meal": skip_a_meal, "repeat_attraction": repeat_attraction,
    "drive_out": drive_out, "short_stay": short_stay, "meal_at_home": meal_at_home,
}


def cases(queries: list[dict[str, Any]], plans: list[list[dict[str, Any]]],
          db_for: Callable[[dict[str, Any]], Database]) -> Iterator[tuple[int, Case]]:
    """(query index, case) for every reference plan, every applicable planted error and perturbation, and each
    reference plan scored against the next query of the same trip length (another query's plan)."""
    for n, (q, plan) in enumerate(zip(queries, plans, strict=True)):
        db = db_for(q)
        yield n, Case("reference", None, q, plan)
        for name, (constraint, plant) in PLANTS.items():
            got = plant(q, plan, db)
            if got is not None:
                yield n, Case(name, constraint, *got)
        for name, perturb in PERTURBATIONS.items():
            got = perturb(q, plan, db)
            if got is not None:
                yield n, Case(name, None, *got)
        same = [m for m, other in enumerate(queries) if other["days"] == q["days"] and m != n]
        nxt = min((m for m in same if m > n), default=min(same, default=None))
        if nxt is not None:
            yield n, Case("other_querys_plan", None, q, plans[nxt])
