"""TravelPlanner's 8 commonsense and 5 hard constraints, re-implemented to the official rules: their keys, running
them on a plan (`evaluate_plan`) and the micro denominator (`hard_total`). The checks are in `commonsense.py` and
`hard_constraints.py`, the field reading they share in `plan_fields.py`.

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
  field), that one check is scored as failed, saying why.

Hard constraints are only evaluated, as in `evaluation/eval.py`, when the plan was delivered and both
"complete information" and "within sandbox" pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from genenv_cli.families.travelplanner.commonsense import COMMONSENSE_CHECKS
from genenv_cli.families.travelplanner.database import Database
from genenv_cli.families.travelplanner.hard_constraints import (
    cuisine,
    room_rule,
    room_type,
    total_cost,
    transportation_rule,
)
from genenv_cli.families.travelplanner.plan_fields import Plan, Query, Result

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
