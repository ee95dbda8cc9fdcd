"""A plugin module that cannot be imported (tests/hostile_plugins.py registers it)."""

import genenv_no_such_package  # noqa: F401
