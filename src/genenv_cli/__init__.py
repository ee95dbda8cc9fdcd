"""genenv: train LLM agents by co-evolution with an LLM environment simulator (GenEnv, arXiv 2512.19682).

The package is built in floors, one folder each, every import going down (docs/design.md, "Floors").
"""

from genenv_cli.core.version import __version__

__all__ = ["__version__"]
