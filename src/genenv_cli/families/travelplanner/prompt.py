"""TravelPlanner's sole-planning prompt (described in `benchmark.py`) and the sample of one query."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.evals.base import EvalSample

SYSTEM_PROMPT = """\
You are a proficient planner. Based on the provided information and query, please give me a detailed plan, \
including specifics such as flight numbers (e.g., F0123456), restaurant names, and accommodation names. Note \
that all the information in your plan should be derived from the provided data. You must adhere to the format \
given in the example. Additionally, all details should align with commonsense. The symbol '-' indicates that \
information is unnecessary. For example, in the provided sample, you do not need to plan after returning to the \
departure city. When you travel to two cities in one day, you should note it in the 'current_city' field as in \
the example (i.e., from A to B).

Write the plan as a JSON list with one object per day, inside a ```json code block. Each object has the keys \
"days", "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner" and "accommodation". \
Write each restaurant, attraction and accommodation as "Name, City", end every attraction with ";", and use \
"-" where there is nothing to plan.

***** Example *****
Query: Could you create a travel plan for 7 people from Ithaca to Charlotte spanning 3 days, from March 8th to \
March 14th, 2022, with a budget of $30,200?
Travel Plan:
```json
[
  {"days": 1, "current_city": "from Ithaca to Charlotte", \
"transportation": "Flight Number: F3633413, from Ithaca to Charlotte, Departure Time: 05:38, Arrival Time: 07:46", \
"breakfast": "Nagaland's Kitchen, Charlotte", "attraction": "The Charlotte Museum of History, Charlotte;", \
"lunch": "Cafe Maple Street, Charlotte", "dinner": "Bombay Vada Pav, Charlotte", \
"accommodation": "Affordable Spacious Refurbished Room in Bushwick!, Charlotte"},
  {"days": 2, "current_city": "Charlotte", "transportation": "-", "breakfast": "Olive Tree Cafe, Charlotte", \
"attraction": "The Mint Museum, Charlotte;Romare Bearden Park, Charlotte;", "lunch": "Birbal Ji Dhaba, Charlotte", \
"dinner": "Pind Balluchi, Charlotte", "accommodation": "Affordable Spacious Refurbished Room in Bushwick!, Charlotte"},
  {"days": 3, "current_city": "from Charlotte to Ithaca", \
"transportation": "Flight Number: F3786167, from Charlotte to Ithaca, Departure Time: 21:42, Arrival Time: 23:26", \
"breakfast": "Subway, Charlotte", "attraction": "Books Monument, Charlotte;", "lunch": "Olive Tree Cafe, Charlotte", \
"dinner": "Kylin Skybar, Charlotte", "accommodation": "-"}
]
```
***** Example Ends *****"""

USER_PROMPT = "Given information: {reference}\nQuery: {query}\nTravel Plan:"


def make_sample(sample_id: str, gold: dict[str, Any], query: str, reference: str, db_root: Path) -> EvalSample:
    """The sole-planning sample of one query (the prompt above, `SYSTEM_PROMPT` and `USER_PROMPT`), scored against the database at `db_root`.
    The `travelplanner` training domain builds its samples here too."""
    return EvalSample(
        id=sample_id, category=gold["level"],
        messages=[{"role": "system", "content": SYSTEM_PROMPT},
                  {"role": "user", "content": USER_PROMPT.format(reference=reference, query=query)}],
        gold=gold,
        meta={"days": gold["days"], "query": query, "database": str(db_root)})

