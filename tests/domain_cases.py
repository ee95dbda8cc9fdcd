"""Each domain's test answers, as its registry row names them (`test_answers`: "module:function"; the built-in
domains' are in genenv_cli/domains/answers/, which says what they hold): the function is called with the domain's
folder of hand-written benchmark files here, fixtures/<name>/ (a `-` in the name written `_`). Nothing here is
per domain: a domain added with its own files and one registry row, or registered by a test, is found the same
way. tests/domains/test_domain_contract.py checks every domain against the contract (`genenv_cli.domains.checks`,
the code `genenv domains check` runs) with these answers; a domain whose row names none is checked with the
answers it declares itself (`gold_answer`, `wrong_answer`, `render_task`), as a plugin is. A family domain's promise
case is declared beside its test answers (`promise_case`, in the module its row names); `promise_for` finds it."""

from __future__ import annotations

import importlib
from pathlib import Path

from genenv_cli.catalogue.domains import DOMAINS
from genenv_cli.domains.answers import PromiseCase
from genenv_cli.domains.checks import DomainCase, Payload, SuiteData, seed_context  # noqa: F401 - the tests' names
from paths import FIXTURES


def data_folder(name: str) -> Path:
    """The folder of the domain's hand-written files in its benchmark's official format."""
    return FIXTURES / name.replace("-", "_")


def answers_for(name: str) -> DomainCase | None:
    """The test answers the registry row of `name` names, or None where it names none."""
    target = DOMAINS.facts(name).get("test_answers")
    if target is None:
        return None
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)(data_folder(name))


class NoPromiseCase(LookupError):
    """A family domain that declares no promise case: the promise test cannot check it."""


def promise_for(name: str, data: Path) -> PromiseCase:
    """The promise case the family domain `name` declares for `data` (its hand-written files, or release files a
    user names): `promise_case` in the module its registry row's `test_answers` names."""
    target = DOMAINS.facts(name).get("test_answers")
    module = importlib.import_module(target.split(":")[0]) if target else None
    declare = getattr(module, "promise_case", None)
    if declare is None:
        where = f"its test answers module {module.__name__}" if module else "its registry row (it names no test_answers)"
        raise NoPromiseCase(f"the family domain {name!r} declares no promise case: {where} needs a "
                            f"`promise_case(data: Path) -> PromiseCase` (genenv_cli/domains/answers/__init__.py says "
                            f"what it holds), so the promise test can check its training prompt and reward")
    return declare(data)


CASES: dict[str, DomainCase] = {name: case for name in sorted(DOMAINS.builtins)
                                if (case := answers_for(name)) is not None}
