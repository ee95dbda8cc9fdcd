"""What BFCL's checker works on: a decoded call (`BCall`) and the two ways an item fails before a verdict
(`DecodeError`: the answer holds no readable calls; `CheckError`: the data asks for a rule BFCL does not define)."""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from typing import Any


class DecodeError(ValueError):
    """The answer cannot be read as function calls (BFCL: "Failed to decode AST")."""


class CheckError(ValueError):
    """The data asks for a rule BFCL does not define (an unknown type): the item fails with this reason."""


@dataclass
class BCall:
    """One decoded call. `positional` holds positional argument nodes (Python syntax only): BFCL's AST
    checker ignores them; the multi-turn decomposition maps them to parameter names."""

    name: str
    args: dict[Any, Any]
    positional: list[ast.AST] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": json_safe(self.args)}


def json_safe(value: Any) -> Any:
    """The parsed form of a value as JSON can hold it (tuples -> lists, odd constants -> their repr)."""
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else json.dumps(json_safe(k))): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return repr(value)
