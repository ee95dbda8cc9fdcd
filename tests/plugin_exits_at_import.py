"""A plugin module that ends the process at import (tests/hostile_plugins.py registers it)."""

raise SystemExit(0)
