"""heldout: the run's own domain on its seed validation split (the agent's held-out success).

The data, the protocol and the official source followed: README.md beside this file."""

from genenv_cli.evals.heldout.benchmark import HeldOut

__all__ = ["HeldOut"]
