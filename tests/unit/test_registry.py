"""A registry keeps the project's built-in rows apart from rows added at run time, and forgets what it looked up
under a name when that name is registered again or unregistered (`get_domain`'s instance included)."""

from __future__ import annotations

import pytest

from genenv_cli.catalogue.domains import DOMAINS, get_domain
from genenv_cli.core.errors import RegistryError
from genenv_cli.core.registry import Registry


class First:
    pass


class Second:
    pass


def test_added_rows_stay_apart_from_the_builtins():
    reg = Registry("thing", "genenv.test-things", {"shipped": f"{__name__}:First"})
    reg.register("mine", f"{__name__}:Second", size=3)
    assert set(reg.builtins) == {"shipped"} and set(reg.added) == {"mine"}
    assert reg.origin("shipped") == "built in" and reg.origin("mine") == "added" and reg.facts("mine") == {"size": 3}
    assert reg.get("mine") is Second and reg.names() == ["mine", "shipped"]
    reg.unregister("shipped")  # a built-in is not removed by a run-time unregister
    assert reg.get("shipped") is First
    reg.unregister("mine")
    with pytest.raises(RegistryError, match="unknown thing `mine`"):
        reg.get("mine")


def test_an_added_row_over_a_builtin_is_undone_by_unregister():
    reg = Registry("thing", "genenv.test-things", {"shipped": f"{__name__}:First"})
    assert isinstance(reg.instance("shipped"), First)
    reg.register("shipped", f"{__name__}:Second")
    assert isinstance(reg.instance("shipped"), Second)
    reg.unregister("shipped")
    assert isinstance(reg.instance("shipped"), First)


def test_unregister_forgets_get_domains_instance():
    DOMAINS.register("registry-probe", f"{__name__}:First")
    try:
        first = get_domain("registry-probe")
        assert isinstance(first, First) and get_domain("registry-probe") is first  # one instance per process
    finally:
        DOMAINS.unregister("registry-probe")
    with pytest.raises(RegistryError, match="registry-probe"):
        get_domain("registry-probe")
    DOMAINS.register("registry-probe", f"{__name__}:Second")
    try:
        assert isinstance(get_domain("registry-probe"), Second)
    finally:
        DOMAINS.unregister("registry-probe")
