"""TravelPlanner's split files and their query records: which file holds a split (`split_file`), reading it
(`read_records`: the dataset's CSV, JSON lines, a JSON list or parquet) and checking one record into the gold query
the checks read (`parse_query`). The fields read are listed in `benchmark.py`."""

from __future__ import annotations

import contextlib
import csv
import os
from pathlib import Path
from typing import Any

from genenv_cli.core.callparse import parse_literal
from genenv_cli.core.errors import InputError
from genenv_cli.core.jsonio import json_document, json_lines
from genenv_cli.core.safefiles import open_regular
from genenv_cli.evals.datasource import csv_field_limit
from genenv_cli.families.travelplanner.checks import LOCAL_CONSTRAINTS
from genenv_cli.families.travelplanner.release import CHATS

LEVELS = ["easy", "medium", "hard"]
SPLIT_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")


def default_split(data: Path | None) -> str:
    """validation, unless --data is the official repository's training release (no validation file there)."""
    if data is not None:
        folder = Path(data).expanduser()
        if folder.is_file():
            return "train" if folder.name == CHATS else "validation"
        if (folder / CHATS).is_file() and split_file(folder, "validation") is None:
            return "train"
    return "validation"


def read_records(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            with csv_field_limit(2**31 - 1), open(open_regular(path), newline="", encoding="utf-8-sig") as fh:
                return list(csv.DictReader(fh))
        if suffix == ".parquet":
            import polars as pl

            os.close(open_regular(path))  # a regular file, never a device or a pipe
            return pl.read_parquet(path).to_dicts()
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"TravelPlanner split file {path} cannot be read ({exc}).") from None
    except Exception as exc:  # polars' parquet errors
        raise InputError(f"TravelPlanner split file {path} is not a readable parquet file ({exc}).") from None
    if suffix == ".json":
        data = json_document(path, "a JSON list of query records")
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise InputError(f"{path}: expected a JSON list of query records, got {type(data).__name__}.")
        return data
    return [rec for _, rec in json_lines(path, "one query record per line")]


def _int(value: Any, field: str, where: str) -> int:
    if isinstance(value, bool):
        raise InputError(f"{where}: field {field!r} must be a whole number, got {value!r}.")
    if isinstance(value, int):
        return value
    try:
        f = float(str(value).strip())
    except ValueError:
        f = float("nan")
    if not f.is_integer():
        raise InputError(f"{where}: field {field!r} must be a whole number, got {value!r}.")
    return int(f)


def _number(value: Any, field: str, where: str) -> int | float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    try:
        f = float(str(value).replace(",", "").strip())
    except ValueError:
        raise InputError(f"{where}: field {field!r} must be a number, got {value!r}.") from None
    return int(f) if f.is_integer() else f


def parse_query(rec: Any, idx: int, path: Path) -> tuple[dict[str, Any], str, str]:
    """(gold query record, query text, reference information) of record `idx` (1-based) of a split file;
    InputError names the record."""
    where = f"{path}, record {idx}"
    if not isinstance(rec, dict):
        raise InputError(f"{where}: expected an object with the TravelPlanner fields, got {type(rec).__name__}.")
    need = ["org", "dest", "days", "visiting_city_number", "people_number", "local_constraint", "budget",
            "query", "level"]
    absent = [k for k in need if rec.get(k) in (None, "")]
    if absent:
        raise InputError(f"{where}: missing field(s) {', '.join(absent)}. Expected the osunlp/TravelPlanner "
                         f"columns org, dest, days, visiting_city_number, date, people_number, local_constraint, "
                         f"budget, query, level, reference_information (the test split lacks them: it is scored "
                         f"by the official leaderboard only).")
    lc = _local_constraint(rec["local_constraint"], where)
    level = str(rec["level"]).strip()
    if level not in LEVELS:
        raise InputError(f"{where}: level must be one of easy, medium, hard, got {rec['level']!r}.")
    date = rec.get("date")
    if isinstance(date, str):
        with contextlib.suppress(ValueError):
            date = parse_literal(date)
    ref = rec.get("reference_information")
    if ref is None or ref == "":
        raise InputError(f"{where}: reference_information is missing; sole-planning needs the split file of the "
                         f"osunlp/TravelPlanner dataset with that column.")
    if not isinstance(ref, str):
        ref = str(ref)  # the CSV holds the Python repr of the list; reproduce it
    gold: dict[str, Any] = {
        "idx": idx,
        "org": str(rec["org"]),
        "dest": str(rec["dest"]),
        "days": _int(rec["days"], "days", where),
        "visiting_city_number": _int(rec["visiting_city_number"], "visiting_city_number", where),
        "date": date,
        "people_number": _int(rec["people_number"], "people_number", where),
        "local_constraint": {k: lc.get(k) for k in LOCAL_CONSTRAINTS},
        "budget": _number(rec["budget"], "budget", where),
        "level": level,
    }
    if isinstance(rec.get("flights"), list):  # the query's own flight rows (a database without a flights table)
        gold["flights"] = rec["flights"]
    if gold["days"] < 1:
        raise InputError(f"{where}: days must be at least 1, got {rec['days']!r}.")
    plan = rec.get("annotated_plan")
    if plan not in (None, ""):
        if isinstance(plan, str):
            with contextlib.suppress(ValueError):
                plan = parse_literal(plan)
        if isinstance(plan, list):  # annotation files may lead with the query record itself
            plan = [d for d in plan if not (isinstance(d, dict) and "org" in d and "current_city" not in d)]
        gold["annotated_plan"] = plan
    return gold, str(rec["query"]), ref



def split_file(folder: Path, split: str) -> Path | None:
    """The split's file in a folder: `<split>.csv` (or .jsonl, .json, .parquet), the training release's chats, or
    the first parquet shard of the Hub's export; None when there is none."""
    for suffix in SPLIT_SUFFIXES:
        if (folder / f"{split}{suffix}").is_file():
            return folder / f"{split}{suffix}"
    if split == "train" and (folder / CHATS).is_file():
        return folder / CHATS
    for pattern in (f"{split}-*.parquet", f"{split}/*.parquet", f"data/{split}-*.parquet"):
        found = sorted(folder.glob(pattern))
        if found:
            return found[0]
    return None


def _local_constraint(value: Any, where: str) -> dict[str, Any]:
    """A record's local_constraint: a dict, or its Python repr as the CSV holds it."""
    lc = value
    if isinstance(lc, str):
        try:
            lc = parse_literal(lc)
        except ValueError:
            lc = None
    if not isinstance(lc, dict):
        raise InputError(f"{where}: local_constraint must be a dict such as {{'house rule': None, 'cuisine': "
                         f"None, 'room type': None, 'transportation': None}}, got {str(value)[:80]!r}.")
    return lc
