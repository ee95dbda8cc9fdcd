"""ALFWorld (Shridhar et al., 2021): household tasks played as multi-turn text-game episodes.

The data, the protocol and the official source followed: README.md beside this file."""

from genenv_cli.families.alfworld.benchmark import ALFWorld

__all__ = ["ALFWorld"]
