"""Reading and writing a run's data files with their schema (`rundir.schemas.SCHEMAS`): JSON lines and Parquet,
each record or frame checked, so a malformed line or a wrong column fails with the file, the line and what was
expected, before anything is written."""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.core.jsonio import json_lines
from genenv_cli.core.safefiles import open_new, open_regular
from genenv_cli.core.sizecaps import RUN_FILES
from genenv_cli.rundir.episode_rows import check_episode_rows
from genenv_cli.rundir.schemas import SCHEMAS, FileSchema

_JSON_TYPES = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
}


def _type_ok(value: Any, base: str) -> bool:
    if base == "json":
        return True
    if base in ("list[int]", "list[float]"):
        if not isinstance(value, list):
            return False
        inner = int if base == "list[int]" else (int, float)
        return all(isinstance(v, inner) and not isinstance(v, bool) for v in value)
    if base in ("int", "float") and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES[base])


def validate_record(schema: FileSchema, rec: Any, where: str) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise InputError(f"{where}: expected a JSON object with keys {', '.join(schema.names())}; got {type(rec).__name__}.")
    for col in schema.columns:
        if col.name not in rec:
            if col.nullable:
                continue
            raise InputError(f"{where}: missing key `{col.name}` ({col.type}: {col.doc}). See docs/pools.md, {schema.path}.")
        value = rec[col.name]
        if value is None:
            if not col.nullable:
                raise InputError(f"{where}: `{col.name}` is null but must be {col.type}. See docs/pools.md, {schema.path}.")
            continue
        if not _type_ok(value, col.base):
            raise InputError(f"{where}: `{col.name}` must be {col.base}, got {json.dumps(value)[:80]}. "
                             f"See docs/pools.md, {schema.path}.")
    return rec


def read_jsonl(path: Path, schema_key: str) -> list[dict[str, Any]]:
    """Every record of a JSONL file, validated; the first bad line raises InputError naming it."""
    return list(iter_jsonl(path, schema_key))


def iter_jsonl(path: Path, schema_key: str, validate: bool = True) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file, each checked against the schema (`validate=False`: JSON only, for a file the
    caller knows its own stage wrote and nothing changed since)."""
    schema = SCHEMAS[schema_key]
    if not path.exists():
        raise InputError(f"{path}: file not found (expected {schema.doc.lower()} written by `{schema.writer}`).")
    expected = f"one JSON object per line with keys {', '.join(schema.names())}"
    for where, rec in json_lines(path, expected, RUN_FILES):
        yield validate_record(schema, rec, where) if validate else rec


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records (to a staging path: the stage contract renames it into place). Returns the count."""
    n = 0
    try:
        with open_new(path, "w", encoding="utf-8") as fh:  # never through a link left at the temporary name
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
                fh.write("\n")
                n += 1
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:  # nothing half-written stays behind (the path is a staging path, never the output)
        with contextlib.suppress(OSError):
            if not os.path.islink(path):  # a link found there was refused, not made by us: leave it
                os.unlink(path)
        raise
    return n


# ---------------------------------------------------------------- Parquet

def polars_schema(schema_key: str) -> dict[str, Any]:
    import polars as pl

    mapping = {"str": pl.String, "int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean,
               "list[int]": pl.List(pl.Int64), "list[float]": pl.List(pl.Float64), "json": pl.String}
    return {c.name: mapping[c.base] for c in SCHEMAS[schema_key].columns}


def check_frame(df: Any, schema_key: str, where: str) -> Any:
    """Check a polars DataFrame against a schema; returns it with the columns in schema order. A `late` column
    the frame lacks (a file written before it existed) is added as nulls, and so is an `episodic` one (a file of
    single-turn rollouts, written without it)."""
    import polars as pl

    expected = polars_schema(schema_key)
    late = [c.name for c in SCHEMAS[schema_key].columns if (c.late or c.episodic) and c.name not in df.columns]
    if late:
        df = df.with_columns(pl.lit(None, expected[n]).alias(n) for n in late)
    missing = [n for n in expected if n not in df.columns]
    if missing:
        raise InputError(f"{where}: missing column(s) {', '.join(missing)}. See docs/pools.md, {SCHEMAS[schema_key].path}.")
    for name, dtype in expected.items():
        if df.schema[name] != dtype:
            raise InputError(f"{where}: column `{name}` has type {df.schema[name]}, expected {dtype}. "
                             f"See docs/pools.md, {SCHEMAS[schema_key].path}.")
    for col in SCHEMAS[schema_key].columns:
        if not col.nullable and df[col.name].null_count():
            raise InputError(f"{where}: column `{col.name}` has nulls but must not. See docs/pools.md.")
    return df.select(list(expected))


def read_parquet(path: Path, schema_key: str, columns: list[str] | None = None) -> Any:
    import polars as pl

    if not path.exists():
        schema = SCHEMAS[schema_key]
        raise InputError(f"{path}: file not found (expected {schema.doc.lower()} written by `{schema.writer}`).")
    os.close(open_regular(path))  # a FIFO or a device is refused, never opened for reading (it would block)
    try:
        df = pl.read_parquet(path)
    except Exception as exc:  # polars raises several error types for a damaged file
        raise InputError(f"{path}: not a readable Parquet file ({exc}).") from None
    df = check_frame(df, schema_key, str(path))
    check_episode_rows(df, str(path))  # masks, turns and verdicts of the episodes, whatever a manifest says
    return df.select(columns) if columns else df


def scan_parquet(path: Path) -> Any:
    """A lazy polars scan of a run's Parquet file, to read a few columns of a large pool without loading it. Check
    its schema first (`check_parquet`) and collect inside `reading`, which names a file damaged past its footer."""
    import polars as pl

    return pl.scan_parquet(path)


def check_parquet(path: Path, schema_key: str) -> None:
    """Check a Parquet file's schema from its footer alone, before anything heavy reads it: InputError naming the
    file when it is missing, empty, truncated, not Parquet or of the wrong schema."""
    import polars as pl

    schema = SCHEMAS[schema_key]
    if path.exists() and not path.is_dir():
        os.close(open_regular(path))  # a FIFO or a device: refused, never read
    if not path.is_file():
        raise InputError(f"{path}: {'a folder' if path.is_dir() else 'missing'}; expected {schema.doc.lower()} "
                         f"written by `{schema.writer}`.")
    try:
        found = pl.read_parquet_schema(path)
    except Exception as exc:  # noqa: BLE001 - polars raises several error types for a damaged file
        raise InputError(f"{path}: not a readable Parquet file ({str(exc)[:160]}); it is empty, truncated or "
                         f"damaged. Rerun `genenv {schema.writer} --force` for its epoch to write it again.") from None
    check_frame(pl.DataFrame(schema=found), schema_key, str(path))


TRAINED_NUMBERS = ("reward", "r_env", "weight", "advantage")  # what an update weights its samples by


def refuse_non_finite(path: Path, schema_key: str, needed_by: str, columns: tuple[str, ...] = TRAINED_NUMBERS) -> None:
    """InputError naming the file, the column and the row when one of `columns` (those of the file that are
    floating point) holds NaN or an infinity: a reward, advantage or weight that is not a number would be trained
    on as if it were one (a NaN reward makes every group look informative). Called before any training; the file
    is damaged or was not written by genenv, so it is named with the stage that writes it."""
    import polars as pl

    lf = scan_parquet(path)
    schema = lf.collect_schema()
    cols = [c for c in columns if c in schema and schema[c].is_float()]
    if not cols:
        return
    with reading([path], needed_by):
        bad = (lf.select(*cols).with_row_index("_row")
               .filter(pl.any_horizontal([pl.col(c).is_nan() | pl.col(c).is_infinite() for c in cols]))
               .collect())
    if bad.height:
        row = bad.row(0, named=True)
        col = next(c for c in cols if row[c] is not None and not math.isfinite(row[c]))
        raise InputError(f"{path}: row {row['_row']}: {col} is {row[col]} ({bad.height} row(s) with a {', '.join(cols)} "
                         f"that is not a finite number); `{needed_by}` refuses to train on it. The file is damaged or "
                         f"was not written by genenv: rerun `genenv {SCHEMAS[schema_key].writer} --force` for its epoch.")


@contextmanager
def reading(paths: list[Path], what: str):
    """Around polars scans of several files: a file damaged past its footer (which check_parquet reads) becomes
    an InputError naming the files, not a polars ComputeError."""
    import polars as pl

    try:
        yield
    except (pl.exceptions.PolarsError, OSError) as exc:
        names = ", ".join(str(p) for p in paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        raise InputError(f"{what}: cannot read {names} ({str(exc)[:160]}); a file is truncated or damaged. Rerun "
                         f"the stage that wrote it with --force.") from None


def frame(records: list[dict[str, Any]] | dict[str, list[Any]], schema_key: str) -> Any:
    """A polars DataFrame of the schema's columns and types from rows or columns."""
    import polars as pl

    schema = polars_schema(schema_key)
    if isinstance(records, dict):
        df = pl.DataFrame(records, schema=schema)
    else:
        df = pl.DataFrame(records, schema=schema, orient="row") if records and not isinstance(records[0], dict) \
            else pl.DataFrame(records, schema=schema)
    return check_frame(df, schema_key, f"<{schema_key} being written>")


def write_parquet(df: Any, path: Path, schema_key: str) -> int:
    df = check_frame(df, schema_key, f"<{schema_key} being written>")
    empty = [c.name for c in SCHEMAS[schema_key].columns if c.episodic and df[c.name].null_count() == df.height]
    if empty:  # an episode's columns stay out of the files of single-turn rollouts, which stay as they always were
        df = df.drop(empty)
    # lz4: about twice as fast to write as zstd and faster to read, for files about 1.6x larger
    df.write_parquet(path, compression="lz4", statistics=True)
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())
    return df.height


