"""Each built-in domain's test answers: what the project's contract and promise tests check it with, beyond the
answers the domain declares itself (`gold_answer`, `wrong_answer`, `render_task`).

One module per domain, `answers/<domain>.py`, named by the domain's registry row (`test_answers`:
"module:function", domains/__init__.py). The function takes `data`, the folder of the benchmark's hand-written
files in the official format (the project's tests/fixtures/<domain>/, a `-` in the name written `_`; a domain that
reads no benchmark files ignores it), and returns a `checks.DomainCase`: the right answer and a wrong one, more
answers whose score must equal the suite's verdict, how the environment writes an item, and for a family domain
which of those files its suite loads and how a suite sample maps to the domain's item.

They live apart from the domains' own modules on purpose: a domain's modules are fingerprinted into the run's
manifests (`domains/fingerprints.py`), and an edit to the answers must not make any run's stages stale.
"""

from __future__ import annotations

from typing import Any

Payload = dict[str, Any]


def family_item_text(dom: Any, payload: Payload) -> str:
    """A family domain's item as the environment writes it: a fenced JSON block after a line of prose."""
    return "Here is a new item:\n```json\n" + dom.render_item(payload) + "\n```"


def seed_of_sample(dom: Any, sample: Any) -> Payload:
    """The domain's item for one of its suite's samples, as `genenv init --seeds` would import it."""
    return dom.seed_from_sample(sample).payload
