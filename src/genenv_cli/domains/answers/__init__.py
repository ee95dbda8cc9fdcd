"""Each built-in domain's test answers: what the project's contract and promise tests check it with, beyond the
answers the domain declares itself (`gold_answer`, `wrong_answer`, `render_task`).

One module per domain, `answers/<domain>.py`, named by the domain's registry row (`test_answers`:
"module:function", domains/__init__.py). The function takes `data`, the folder of the benchmark's hand-written
files in the official format (the project's tests/fixtures/<domain>/, a `-` in the name written `_`; a domain that
reads no benchmark files ignores it), and returns a `checks.DomainCase`: the right answer and a wrong one, more
answers whose score must equal the suite's verdict, how the environment writes an item, and for a family domain
which of those files its suite loads and how a suite sample maps to the domain's item. A family domain's module
also declares its promise case (`promise_case(data) -> PromiseCase`): which files `genenv init --seeds` and
`genenv evaluate --data` take, under which protocol, for the promise test (tests/domains/test_domain_promise.py) to
compare the training prompt and reward with the suite's, item by item; `data` is the folder of hand-written files
above, or the release files a user names (GENENV_PROMISE_DATA, docs/domains.md).

They live apart from the domains' own modules on purpose: a domain's modules are fingerprinted into the run's
manifests (`domains/fingerprints.py`), and an edit to the answers must not make any run's stages stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

Payload = dict[str, Any]


@dataclass(frozen=True)
class PromiseCase:
    """What the promise test runs a family domain on."""
    seeds: list[Path]  # the files `genenv init --seeds` takes
    data: Path         # what `genenv evaluate --data` takes
    protocol: str      # the suite's protocol whose prompt and verdict the domain trains on


def family_item_text(dom: Any, payload: Payload) -> str:
    """A family domain's item as the environment writes it: a fenced JSON block after a line of prose."""
    return "Here is a new item:\n```json\n" + dom.render_item(payload) + "\n```"


def seed_of_sample(dom: Any, sample: Any) -> Payload:
    """The domain's item for one of its suite's samples, as `genenv init --seeds` would import it."""
    return dom.seed_from_sample(sample).payload
