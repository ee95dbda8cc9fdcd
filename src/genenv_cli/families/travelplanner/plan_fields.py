"""Reading a TravelPlanner plan's fields as the official helpers do (`utils/func.py`: `get_valid_name_city`,
`extract_before_parenthesis`), shared by the commonsense and the hard constraints; the quirks are listed in
`checks.py`."""

from __future__ import annotations

import re
from typing import Any

from genenv_cli.families.travelplanner.database import before_parenthesis

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
    """Whether a plan field holds something (not empty, not "-")."""
    return bool(value) and value != "-"


def plan_days(q: Query, plan: Plan) -> range:
    """The day objects every check looks at: the first min(query days, plan length)."""
    return range(min(q["days"], len(plan)))


def attraction_list(value: str) -> list[str]:
    """A day's attractions as the official code splits them: on ";", the last piece dropped."""
    return value.split(";")[:-1]


def travel_cities(value: str) -> tuple[str, str]:
    """(A, B) of a travel day's current_city "from A to B"; PlanError when it cannot be read."""
    a, b = extract_from_to(value)
    if a is None or b is None:
        raise PlanError(f"current_city {value!r} says 'from' but is not 'from A to B'")
    return before_parenthesis(a), before_parenthesis(b)

