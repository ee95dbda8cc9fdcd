"""An example genenv domain plugin: `unitconv` (genenv_unitconv/domain.py), registered in pyproject.toml."""

from genenv_unitconv.domain import UnitConvDomain

__all__ = ["UnitConvDomain"]
