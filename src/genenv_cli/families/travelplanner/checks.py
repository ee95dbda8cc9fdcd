"""TravelPlanner's 8 commonsense and 5 hard constraints, re-implemented to the official rules.

Source: github.com/OSU-NLP-Group/TravelPlanner — `evaluation/commonsense_constraint.py` and
`evaluation/hard_constraint.py` (their `evaluation` functions) with the helpers of `utils/func.py`
(`get_valid_name_city`, `extract_before_parenthesis`) and the database look-ups of `tools/*/apis.py`
(see `database.py`). Every check looks at the first `min(query days, len(plan))` day objects and
returns `(passed, reason)`; hard constraints return `(None, None)` when the query does not set them.

The checks are written to give the official verdicts, quirks included, because published numbers come
from that code:

- A place is written "Name, City" and split at the *last* comma; the city is cut at "(".
- Attractions are split on ";" and the last piece is dropped (`split(';')[:-1]`), so an attraction
  string must end with ";" for its last attraction to be checked at all.
- "Within current city": on a day without "from" in `current_city`, the official code iterates over the
  city *string*, i.e. character by character: a meal passes when it contains any letter of the city,
  the accommodation when it contains the city's last letter, a transportation entry when it contains
  every letter. On a travel day ("from A to B") the names A and B are used as intended.
- Cuisine: a meal in the origin city ends the look at that day (the official `continue` skips the
  day's remaining meals).
- "Complete information" counts every non-empty, non-"-" value of each day object (keys "days" and
  "current_city" included) against 6 x days and needs at least half.
- Where the official code would stop with an exception (a day object without `current_city`, a
  "from ..." city the pattern cannot read, "Flight Number" without the ": " after it, a non-text
  field), this module scores that one check as failed and says why.

Hard constraints are only evaluated, as in `evaluation/eval.py`, when the plan was delivered and both
"complete information" and "within sandbox" pass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from genenv_cli.families.travelplanner.database import Database, before_parenthesis, number

# official key -> the paper's name (`paper_term_mapping` in evaluation/eval.py), in eval.py's order
COMMONSENSE = {
    "is_valid_information_in_current_city": "Within Current City",
    "is_valid_information_in_sandbox": "Within Sandbox",
    "is_reasonable_visiting_city": "Reasonable City Route",
    "is_valid_restaurants": "Diverse Restaurants",
    "is_valid_transportation": "Non-conf. Transportation",
    "is_valid_attractions": "Diverse Attractions",
    "is_valid_accommodation": "Minimum Nights Stay",
    "is_not_absent": "Complete Information",
}
HARD = {
    "valid_cost": "Budget",
    "valid_room_rule": "Room Rule",
    "valid_cuisine": "Cuisine",
    "valid_room_type": "Room Type",
    "valid_transportation": "Transportation",
}
LOCAL_CONSTRAINTS = ("house rule", "cuisine", "room type", "transportation")
MEALS = ("breakfast", "lunch", "dinner")
NO_MORE_DAYS = "You don't need to fill in the information for this or later days."

Result = tuple[bool | None, str | None]
Query = dict[str, Any]
Plan = list[dict[str, Any]]

_FROM_TO = re.compile(r"from\s+(.+?)\s+to\s+([^,]+)(?=[,\s]|$)")
_NAME_CITY = re.compile(r"(.*?),\s*([^,]+)(\(\w[\w\s]*\))?$")


class PlanError(ValueError):
    """The plan cannot be read where the official code would stop."""


def extract_from_to(text: str) -> tuple[str | None, str | None]:
    """"... from A to B, ..." -> (A, B); (None, None) when absent."""
    m = _FROM_TO.search(text)
    return (m.group(1), m.group(2)) if m else (None, None)


def name_city(info: str) -> tuple[str, str]:
    """"Name, City" -> (Name, City), split at the last comma; ("-", "-") when there is no comma."""
    m = _NAME_CITY.search(info)
    if m:
        return m.group(1).strip(), before_parenthesis(m.group(2).strip()).strip()
    return "-", "-"


def filled(value: Any) -> bool:
    return bool(value) and value != "-"


def _days(q: Query, plan: Plan) -> range:
    return range(min(q["days"], len(plan)))


def _attractions(value: str) -> list[str]:
    return value.split(";")[:-1]


def _travel_cities(value: str) -> tuple[str, str]:
    a, b = extract_from_to(value)
    if a is None or b is None:
        raise PlanError(f"current_city {value!r} says 'from' but is not 'from A to B'")
    return before_parenthesis(a), before_parenthesis(b)


# ---------------------------------------------------------------------------- commonsense

def _valid_city_sequence(cities: list[str]) -> bool:
    """Each city visited in one consecutive stretch of at least two entries (the ends excepted)."""
    if len(cities) < 3:
        return False
    visited: set[str] = set()
    i = 0
    while i < len(cities):
        city = cities[i]
        if city in visited and i not in (0, len(cities) - 1):
            return False
        count = 0
        while i < len(cities) and cities[i] == city:
            count += 1
            i += 1
        if count == 1 and 0 < i - 1 < len(cities) - 1:
            return False
        visited.add(city)
    return True


def reasonable_city_route(q: Query, plan: Plan, db: Database) -> Result:
    cities: list[str] = []
    for i in _days(q, plan):
        value = plan[i]["current_city"]
        if "from" in value:
            a, b = _travel_cities(value)
            if i == 0 and a != q["org"]:
                return False, f"the first day should start from {q['org']}"
            cities += [a, b]
        else:
            cities.append(before_parenthesis(value))
    if cities[0] != cities[-1]:
        return False, "the trip is not a closed circle"
    if not _valid_city_sequence(cities):
        return False, "the city sequence is invalid"
    states = db.cities
    for idx, city in enumerate(cities):
        if city not in states:
            return False, f"{city} is not a valid city"
        if idx not in (0, len(cities) - 1) and q["days"] > 3 and states[city] != q["dest"]:
            return False, f"{city} is not in {q['dest']}"
    return True, None


def diverse_restaurants(q: Query, plan: Plan, db: Database) -> Result:
    seen: list[Any] = []
    for i in _days(q, plan):
        unit = plan[i]
        for meal in MEALS:
            if meal in unit and filled(unit[meal]):
                if unit[meal] in seen:
                    return False, f"the {meal} restaurant of day {i + 1} ({unit[meal]}) is repeated"
                seen.append(unit[meal])
    return True, None


def diverse_attractions(q: Query, plan: Plan, db: Database) -> Result:
    seen: list[str] = []
    for i in _days(q, plan):
        unit = plan[i]
        if "attraction" in unit and filled(unit["attraction"]):
            for attraction in _attractions(unit["attraction"]):
                if attraction in seen:
                    return False, f"the attraction {attraction!r} of day {i + 1} is repeated"
                seen.append(attraction)
    return True, None


def minimum_nights(q: Query, plan: Plan, db: Database) -> Result:
    values: list[Any] = []
    for i in _days(q, plan):
        if "accommodation" not in plan[i]:
            return False, f"day {i + 1} has no accommodation entry"
        values.append(plan[i]["accommodation"])
    runs: list[list[Any]] = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    for value, nights in runs:
        if value not in ("-", ""):
            name, city = name_city(value)
            rows = db.accommodations(name, city)
            if len(rows) == 1 and nights < number(rows[0].minimum_nights, "minimum nights", "accommodations"):
                return False, (f"{value} is booked for {nights} night(s), its minimum is "
                               f"{rows[0].minimum_nights}")
    return True, None


def _mode(value: str) -> str | None:
    low = value.lower()
    if "taxi" in low:
        return "Taxi"
    if "self-driving" in low:
        return "Self-driving"
    if "flight" in low:
        return "Flight"
    return None


def non_conflicting_transportation(q: Query, plan: Plan, db: Database) -> Result:
    first = plan[0]["transportation"]
    if not filled(first):
        return False, "the transportation of day 1 is empty"
    modes = [_mode(first)]
    for i in _days(q, plan):
        unit = plan[i]
        if "transportation" in unit and filled(unit["transportation"]):
            modes.append(_mode(unit["transportation"]))
    if ("Self-driving" in modes and "Flight" in modes) or ("Taxi" in modes and "Self-driving" in modes):
        return False, "the transportation modes conflict (self-driving with flight or taxi)"
    return True, None


def within_current_city(q: Query, plan: Plan, db: Database) -> Result:
    for i in _days(q, plan):
        unit = plan[i]
        current = unit["current_city"]
        # a travel day: [A, B]; otherwise the city *string* (iterated by character: official behaviour)
        cities: Any = list(_travel_cities(current)) if "from" in current else before_parenthesis(current)
        if "transportation" in unit and filled(unit["transportation"]):
            for city in cities:
                if city not in unit["transportation"]:
                    return False, f"the transportation of day {i + 1} does not match the current city"
        for meal in MEALS:
            if meal in unit and filled(unit[meal]) and not any(city in unit[meal] for city in cities):
                return False, f"the {meal} of day {i + 1} is not in the current city"
        if "attraction" in unit and filled(unit["attraction"]):
            for attraction in _attractions(unit["attraction"]):
                if not any(city in attraction for city in cities):
                    return False, f"the attraction {attraction!r} of day {i + 1} is not in the current city"
        if "accommodation" in unit and filled(unit["accommodation"]) and cities[-1] not in unit["accommodation"]:
            return False, f"the accommodation of day {i + 1} is not in the current city"
    return True, None


def within_sandbox(q: Query, plan: Plan, db: Database) -> Result:
    for i in _days(q, plan):
        unit = plan[i]
        value = unit["transportation"]
        if filled(value):
            org, dest = extract_from_to(value)
            if org is None or dest is None:
                org, dest = extract_from_to(unit["current_city"])
            low = value.lower()
            if "flight number" in low:
                if org is None or dest is None:
                    raise PlanError(f"the transportation {value!r} of day {i + 1} cannot be parsed")
                org, dest = before_parenthesis(org), before_parenthesis(dest)
                flight = value.split("Flight Number: ")[1].split(",")[0]
                if not db.flight_in_sandbox(flight, org, dest):
                    return False, f"flight {flight} from {org} to {dest} (day {i + 1}) is not in the database"
            elif "self-driving" in low or "taxi" in low:
                if org is None or dest is None:
                    org = dest = "-"
                else:
                    org, dest = before_parenthesis(org), before_parenthesis(dest)
                mode = "self-driving" if "self-driving" in low else "taxi"
                if db.distance_cost(org, dest, mode) is None:
                    return False, f"{mode} from {org} to {dest} (day {i + 1}) has no valid information"
        for meal in MEALS:
            if meal in unit and filled(unit[meal]):
                name, city = name_city(unit[meal])
                if db.restaurant(name, city) is None:
                    return False, f"the {meal} of day {i + 1} ({unit[meal]}) is not in the database"
        if "attraction" in unit and filled(unit["attraction"]):
            for attraction in _attractions(unit["attraction"]):
                name, city = name_city(attraction)
                if not db.attraction_in_sandbox(name, city):
                    return False, f"the attraction {attraction!r} of day {i + 1} is not in the database"
        if "accommodation" in unit and filled(unit["accommodation"]):
            name, city = name_city(unit["accommodation"])
            if not db.accommodations(name, city):
                return False, f"the accommodation of day {i + 1} ({unit['accommodation']}) is not in the database"
    return True, None


def _valid_days(q: Query, plan: Plan) -> bool:
    n = sum(1 for i in _days(q, plan) if plan[i] != {} and plan[i]["current_city"] != NO_MORE_DAYS)
    return n == q["days"]


def _valid_city_number(q: Query, plan: Plan) -> bool:
    cities: set[str] = set()
    for i in _days(q, plan):
        value = plan[i]["current_city"]
        if "from" in value:
            a, b = _travel_cities(value)
            if i == 0 and a != q["org"]:
                return False
            cities.update((a, b))
        else:
            cities.add(before_parenthesis(value))
    cities.discard(q["org"])
    return len(cities) == q["visiting_city_number"]


def complete_information(q: Query, plan: Plan, db: Database) -> Result:
    if not _valid_days(q, plan):
        return False, f"the plan does not fill {q['days']} days"
    if not _valid_city_number(q, plan):
        return False, f"the plan does not visit {q['visiting_city_number']} city(ies)"
    empty = ("", "-")
    total = 0
    for i in _days(q, plan):
        unit = plan[i]
        for key in ("transportation", "breakfast", "lunch", "dinner", "attraction", "accommodation"):
            if key not in unit:
                return False, f"day {i + 1} has no {key} entry"
        current = unit["current_city"]
        if ("from " in current or "to " in current) and unit["transportation"] in empty:
            return False, f"day {i + 1} travels without transportation"
        if "from " not in current and " to " not in current and unit["attraction"] in empty:
            return False, f"day {i + 1} has no attraction"
        if i != q["days"] - 1 and unit["accommodation"] in empty:
            return False, f"day {i + 1} has no accommodation"
        if any(unit[m] in empty for m in MEALS) and "from " not in current:
            return False, f"day {i + 1} misses a meal"
        total += sum(1 for key in unit if filled(unit[key]))
    if total / (6 * q["days"]) < 0.5:
        return False, "more than half of the information is absent"
    return True, None


COMMONSENSE_CHECKS: dict[str, Callable[[Query, Plan, Database], Result]] = {
    "is_reasonable_visiting_city": reasonable_city_route,
    "is_valid_restaurants": diverse_restaurants,
    "is_valid_attractions": diverse_attractions,
    "is_valid_accommodation": minimum_nights,
    "is_valid_transportation": non_conflicting_transportation,
    "is_valid_information_in_current_city": within_current_city,
    "is_valid_information_in_sandbox": within_sandbox,
    "is_not_absent": complete_information,
}


# ---------------------------------------------------------------------------- hard

def total_cost(q: Query, plan: Plan, db: Database) -> float:
    """The official `get_total_cost`: transport x people (flights), per vehicle (5 per car, 4 per taxi),
    meals x people, accommodation nightly price x rooms (people / maximum occupancy, rounded up)."""
    people = q["people_number"]
    total: float = 0
    for i in _days(q, plan):
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
    for i in _days(q, plan):
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
    for i in _days(q, plan):
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
    for i in _days(q, plan):
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
    for i in _days(q, plan):
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


# ---------------------------------------------------------------------------- evaluation

_CHECK_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError)


def _guard(fn: Callable[[Query, Plan, Database], Result], q: Query, plan: Plan, db: Database) -> Result:
    try:
        return fn(q, plan, db)
    except _CHECK_ERRORS as exc:  # the official script would stop here; this check fails instead
        what = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        return False, f"cannot be checked ({type(exc).__name__}: {what})"


def evaluate_commonsense(q: Query, plan: Plan, db: Database) -> dict[str, Result]:
    return {key: _guard(fn, q, plan, db) for key, fn in COMMONSENSE_CHECKS.items()}


def evaluate_hard(q: Query, plan: Plan, db: Database) -> tuple[dict[str, Result], float | None]:
    """The five hard constraints and the plan's total cost (None when it cannot be computed)."""
    out = {
        "valid_cuisine": _guard(cuisine, q, plan, db),
        "valid_room_rule": _guard(room_rule, q, plan, db),
        "valid_transportation": _guard(transportation_rule, q, plan, db),
        "valid_room_type": _guard(room_type, q, plan, db),
    }
    cost: float | None = None
    try:
        cost = total_cost(q, plan, db)
    except _CHECK_ERRORS as exc:
        out["valid_cost"] = (False, f"the cost cannot be computed ({type(exc).__name__}: {exc})")
    else:
        ok = cost <= q["budget"]
        out["valid_cost"] = (ok, None if ok else f"the plan costs {cost:g}, over the budget of {q['budget']:g}")
    return out, cost


def evaluate_plan(q: Query, plan: Plan, db: Database) -> tuple[dict[str, Result], dict[str, Result] | None,
                                                               float | None]:
    """(commonsense results, hard results or None when not evaluated, total cost) for a delivered plan."""
    cs = evaluate_commonsense(q, plan, db)
    if cs["is_not_absent"][0] and cs["is_valid_information_in_sandbox"][0]:
        hard, cost = evaluate_hard(q, plan, db)
        return cs, hard, cost
    return cs, None, None


def hard_total(level: str, local_constraint: dict[str, Any]) -> int:
    """How many hard constraints a query contributes to the micro denominator (evaluation/eval.py: the
    budget always; house rule, cuisine and room type when set, for medium and hard queries;
    transportation when set, for hard queries). Over the validation split this is the official 420."""
    n = 1
    if level in ("medium", "hard"):
        n += sum(local_constraint.get(k) is not None for k in ("house rule", "cuisine", "room type"))
    if level == "hard":
        n += local_constraint.get("transportation") is not None
    return n
