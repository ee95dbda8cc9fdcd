"""TravelPlanner's 5 hard constraints (`evaluation/hard_constraint.py`): the budget against the plan's total cost
(`total_cost`, the official `get_total_cost`), house rule, cuisine, transportation and room type; each returns
(None, None) when the query does not set it."""

from __future__ import annotations

import math

from genenv_cli.families.travelplanner.database import Database, number
from genenv_cli.families.travelplanner.plan_fields import (
    MEALS,
    Plan,
    PlanError,
    Query,
    Result,
    extract_from_to,
    filled,
    name_city,
    plan_days,
)


def total_cost(q: Query, plan: Plan, db: Database) -> float:
    """The official `get_total_cost`: transport x people (flights), per vehicle (5 per car, 4 per taxi),
    meals x people, accommodation nightly price x rooms (people / maximum occupancy, rounded up)."""
    people = q["people_number"]
    total: float = 0
    for i in plan_days(q, plan):
        unit = plan[i]
        value = unit["transportation"]
        if filled(value):
            org, dest = extract_from_to(value)
            if org is None or dest is None:
                org, dest = extract_from_to(unit["current_city"])
            if org is not None and dest is not None:
                low = value.lower()
                if "flight number" in low:
                    price = db.flight_price(value.split("Flight Number: ")[1].split(",")[0])
                    if price is not None:
                        total += price * people
                elif "self-driving" in low or "taxi" in low:
                    mode, per = ("self-driving", 5) if "self-driving" in low else ("taxi", 4)
                    cost = db.distance_cost(org, dest, mode)
                    if cost is None:
                        raise PlanError(f"{mode} from {org} to {dest} has no cost")
                    total += cost * math.ceil(people / per)
        for meal in MEALS:
            if filled(unit[meal]):
                r = db.restaurant(*name_city(unit[meal]))
                if r is not None:
                    total += number(r.average_cost, "Average Cost", "restaurants") * people
        if filled(unit["accommodation"]):
            rows = db.accommodations(*name_city(unit["accommodation"]))
            if rows:
                rooms = math.ceil(people / number(rows[0].maximum_occupancy, "maximum occupancy", "accommodations"))
                total += number(rows[0].price, "price", "accommodations") * rooms
    return total


_HOUSE_RULES = {"smoking": "No smoking", "parties": "No parties", "children under 10": "No children under 10",
                "visitors": "No visitors", "pets": "No pets"}


def room_rule(q: Query, plan: Plan, db: Database) -> Result:
    rule = q["local_constraint"].get("house rule")
    if rule is None:
        return None, None
    for i in plan_days(q, plan):
        value = plan[i]["accommodation"]
        if filled(value):
            rows = db.accommodations(*name_city(value))
            if rows and rule in _HOUSE_RULES and _HOUSE_RULES[rule] in str(rows[0].house_rules):
                return False, f"{value} does not allow {rule} ({rows[0].house_rules})"
    return True, None


def cuisine(q: Query, plan: Plan, db: Database) -> Result:
    wanted = q["local_constraint"].get("cuisine")
    if not wanted:
        return None, None
    found: set[str] = set()
    for i in plan_days(q, plan):
        unit = plan[i]
        for meal in MEALS:
            if filled(unit[meal]):
                name, city = name_city(unit[meal])
                if city == q["org"]:
                    break  # official `continue`: the rest of this day's meals are not looked at
                r = db.restaurant(name, city)
                if r is not None:
                    found.update(c for c in wanted if c in r.cuisines)
    if len(found) == len(wanted):
        return True, None
    missing = [c for c in wanted if c not in found]
    return False, f"the cuisine {missing[0] if missing else wanted} is not satisfied"


def transportation_rule(q: Query, plan: Plan, db: Database) -> Result:
    rule = q["local_constraint"].get("transportation")
    if rule is None:
        return None, None
    for i in plan_days(q, plan):
        value = plan[i]["transportation"]
        if filled(value):
            if rule == "no flight" and "Flight" in value:
                return False, f"day {i + 1} takes a flight"
            if rule == "no self-driving" and "Self-driving" in value:
                return False, f"day {i + 1} is self-driving"
    return True, None


_ROOM_TYPES = {"shared room": "Shared room", "private room": "Private room", "entire room": "Entire home/apt"}


def room_type(q: Query, plan: Plan, db: Database) -> Result:
    wanted = q["local_constraint"].get("room type")
    if wanted is None:
        return None, None
    for i in plan_days(q, plan):
        value = plan[i]["accommodation"]
        if filled(value):
            rows = db.accommodations(*name_city(value))
            if not rows:
                continue
            actual = rows[0].room_type
            if (wanted == "not shared room" and actual == "Shared room") or (
                    wanted in _ROOM_TYPES and actual != _ROOM_TYPES[wanted]):
                return False, f"{value} is a {actual}, the query asks for {wanted}"
    return True, None

