"""The API descriptions shown to the model: read from the release's `apis/*.py` (parsed with `ast`, literal
class attributes only, never imported); without that folder, from ToolSearcher results seen in the data, else a
stub naming the parameters the data uses. Also the OpenAI-style function schemas of `EvalSample.tools`."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from genenv_cli.core.callparse import CallParseError, literal_value
from genenv_cli.core.safefiles import read_regular
from genenv_cli.families.api_bank.release_files import _Point

# ToolSearcher's interface (the search API levels 2 and 3 offer), used when no apis/ folder is given.
TOOL_SEARCHER_DOC = {
    "name": "ToolSearcher",
    "description": "Searches for relevant tools in library based on the keywords.",
    "input_parameters": {"keywords": {"type": "str", "description": "The keyword to search for."}},
    "output_parameters": {"best_matchs": {"type": "Union[List[dict], dict]",
                                          "description": "The best match tool(s)."}},
}


def _literal(node: ast.AST) -> Any:
    """A class attribute of apis/*.py as data: a literal, strings possibly joined with `+` (never evaluated)."""
    return literal_value(node, concat=True)


def _api_modules(apis_dir: Path) -> Iterator[tuple[Path, ast.Module]]:
    """Each apis/*.py that parses, with its syntax tree (read with `ast`, never imported)."""
    for py in sorted(apis_dir.glob("*.py")):
        if py.name in ("__init__.py", "api.py"):
            continue
        try:
            yield py, ast.parse(read_regular(py).decode("utf-8"))  # never a device or a pipe
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue


def _docs_from_apis_dir(apis_dir: Path) -> tuple[dict[str, dict[str, Any]], list[Path]]:
    docs: dict[str, dict[str, Any]] = {}
    files = []
    for py, tree in _api_modules(apis_dir):
        files.append(py)
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            attrs: dict[str, Any] = {}
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    key = stmt.targets[0].id
                    if key in ("description", "input_parameters", "output_parameters"):
                        with contextlib.suppress(CallParseError, RecursionError):
                            attrs[key] = _literal(stmt.value)
            if {"description", "input_parameters", "output_parameters"} <= set(attrs):
                docs[cls.name] = {"name": cls.name, "description": attrs["description"],
                                  "input_parameters": attrs["input_parameters"],
                                  "output_parameters": attrs["output_parameters"]}
    return docs, files


def api_files(apis_dir: Path) -> dict[str, Path]:
    """Which apis/*.py file declares each API class (read with `ast`, never imported)."""
    out: dict[str, Path] = {}
    for py, tree in _api_modules(apis_dir):
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            out.setdefault(cls.name, py)
    return out


def _catalog(points: list[_Point], apis_dir: Path | None) -> tuple[dict[str, dict[str, Any]], list[Path], str]:
    docs: dict[str, dict[str, Any]] = {}
    files: list[Path] = []
    origin = "apis/ folder"
    if apis_dir is not None:
        docs, files = _docs_from_apis_dir(apis_dir)
    if not docs:
        origin = "reconstructed from the dialogues (no apis/ folder)"
    for point in points:  # ToolSearcher results carry full docs (level 2 and 3)
        for name, doc in point.found_docs.items():
            docs.setdefault(name, doc)
    docs.setdefault("ToolSearcher", dict(TOOL_SEARCHER_DOC))
    used: dict[str, dict[str, Any]] = {}
    for point in points:
        for t in [*point.history, point.call]:
            if t["role"] == "API":
                params = used.setdefault(t["api_name"], {})
                for key in t["param_dict"]:
                    params.setdefault(key, {"type": "str", "description": ""})
    for api, params in used.items():
        docs.setdefault(api, {"name": api, "description": "", "input_parameters": params, "output_parameters": {}})
    return docs, files, origin


_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array",
               "list(str)": "array"}


def _tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    props = {}
    for key, spec in (doc.get("input_parameters") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        props[key] = {"type": _JSON_TYPES.get(str(spec.get("type")), "string"),
                      "description": str(spec.get("description", ""))}
    return {"type": "function", "function": {"name": doc["name"], "description": doc.get("description", ""),
                                             "parameters": {"type": "object", "properties": props,
                                                            "required": list(props)}}}
