"""TravelPlanner's 8 commonsense constraints (`evaluation/commonsense_constraint.py`), to the official rules and
quirks listed in `checks.py`; `COMMONSENSE_CHECKS` maps each official key to its check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from genenv_cli.families.travelplanner.database import Database, before_parenthesis, number
from genenv_cli.families.travelplanner.plan_fields import (
    MEALS,
    NO_MORE_DAYS,
    Plan,
    PlanError,
    Query,
    Result,
    attraction_list,
    extract_from_to,
    filled,
    name_city,
    plan_days,
    travel_cities,
)


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
    for i in plan_days(q, plan):
        value = plan[i]["current_city"]
        if "from" in value:
            a, b = travel_cities(value)
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
    for i in plan_days(q, plan):
        unit = plan[i]
        for meal in MEALS:
            if meal in unit and filled(unit[meal]):
                if unit[meal] in seen:
                    return False, f"the {meal} restaurant of day {i + 1} ({unit[meal]}) is repeated"
                seen.append(unit[meal])
    return True, None


def diverse_attractions(q: Query, plan: Plan, db: Database) -> Result:
    seen: list[str] = []
    for i in plan_days(q, plan):
        unit = plan[i]
        if "attraction" in unit and filled(unit["attraction"]):
            for attraction in attraction_list(unit["attraction"]):
                if attraction in seen:
                    return False, f"the attraction {attraction!r} of day {i + 1} is repeated"
                seen.append(attraction)
    return True, None


def minimum_nights(q: Query, plan: Plan, db: Database) -> Result:
    values: list[Any] = []
    for i in plan_days(q, plan):
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
    for i in plan_days(q, plan):
        unit = plan[i]
        if "transportation" in unit and filled(unit["transportation"]):
            modes.append(_mode(unit["transportation"]))
    if ("Self-driving" in modes and "Flight" in modes) or ("Taxi" in modes and "Self-driving" in modes):
        return False, "the transportation modes conflict (self-driving with flight or taxi)"
    return True, None


def within_current_city(q: Query, plan: Plan, db: Database) -> Result:
    for i in plan_days(q, plan):
        unit = plan[i]
        current = unit["current_city"]
        # a travel day: [A, B]; otherwise the city *string* (iterated by character: official behaviour)
        cities: Any = list(travel_cities(current)) if "from" in current else before_parenthesis(current)
        if "transportation" in unit and filled(unit["transportation"]):
            for city in cities:
                if city not in unit["transportation"]:
                    return False, f"the transportation of day {i + 1} does not match the current city"
        for meal in MEALS:
            if meal in unit and filled(unit[meal]) and not any(city in unit[meal] for city in cities):
                return False, f"the {meal} of day {i + 1} is not in the current city"
        if "attraction" in unit and filled(unit["attraction"]):
            for attraction in attraction_list(unit["attraction"]):
                if not any(city in attraction for city in cities):
                    return False, f"the attraction {attraction!r} of day {i + 1} is not in the current city"
        if "accommodation" in unit and filled(unit["accommodation"]) and cities[-1] not in unit["accommodation"]:
            return False, f"the accommodation of day {i + 1} is not in the current city"
    return True, None


def within_sandbox(q: Query, plan: Plan, db: Database) -> Result:
    for i in plan_days(q, plan):
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
            for attraction in attraction_list(unit["attraction"]):
                name, city = name_city(attraction)
                if not db.attraction_in_sandbox(name, city):
                    return False, f"the attraction {attraction!r} of day {i + 1} is not in the database"
        if "accommodation" in unit and filled(unit["accommodation"]):
            name, city = name_city(unit["accommodation"])
            if not db.accommodations(name, city):
                return False, f"the accommodation of day {i + 1} ({unit['accommodation']}) is not in the database"
    return True, None


def _valid_days(q: Query, plan: Plan) -> bool:
    n = sum(1 for i in plan_days(q, plan) if plan[i] != {} and plan[i]["current_city"] != NO_MORE_DAYS)
    return n == q["days"]


def _valid_city_number(q: Query, plan: Plan) -> bool:
    cities: set[str] = set()
    for i in plan_days(q, plan):
        value = plan[i]["current_city"]
        if "from" in value:
            a, b = travel_cities(value)
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
    for i in plan_days(q, plan):
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

