"""Bamboogle (Press et al., 2023): two-hop questions, scored by exact match, token F1 and containment.

The data, the protocol and the official source followed: README.md beside this file."""

from genenv_cli.families.bamboogle.benchmark import Bamboogle

__all__ = ["Bamboogle"]
