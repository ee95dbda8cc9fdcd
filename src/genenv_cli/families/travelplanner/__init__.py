"""TravelPlanner (Xie et al., 2024): sole-planning travel plans checked against the official database.

The data, the protocol and the official source followed: README.md beside this file."""

from genenv_cli.families.travelplanner.benchmark import TravelPlanner

__all__ = ["TravelPlanner"]
