"""No module but the run directory's owners opens a run file by path.

The owners: the `rundir/` package (where every file of a run lives; manifests, evaluation results, metrics.json,
shards, the lock, output folders; the schema of every data file, validated reading and writing), and the
stage contract's commit (`contract.py`, which writes a stage's outputs, manifest and metrics.json together).
`safefiles.py` and `jsonio.py` are the primitives under them: they take any path and know no run's layout.
Every other module asks the owners (`run.read_manifest(...)`, `run.manifests(...)`, `run.read_evals()`,
`datafiles.read_parquet(...)`, ...).

What counts, read from each module's syntax tree (`ast`):

1. **A run path spelled outside the owners**: a run-directory name (`evals`, `report`, `static`, `epochs`,
   `manifests`, `pools`, `logs`, `metrics.json`, `pruned.json`, `genenv.toml`, `.lock`) as an operand of `/`, or
   as an argument of `Path(...)` or `.joinpath(...)`.
2. **A raw open of a path built from a run**: `open`, `os.open`, `io.open`, `json.load`, `tomllib.load`,
   `read_regular`, `open_regular`, `read_record`, `read_json`, `.read_text()`, `.read_bytes()`, `.write_text()`,
   `.write_bytes()`, `.open()`, where the path (an argument, or the object of the method) is built, in the same
   function, from a run: from a run's `.root` (`run.root`, `run_dir.root`) or a `RunDir` path method
   (`epoch_dir`, `manifest_path`, `file`, `evals_dir`, ...) or a stage plan's `inputs`/`outputs`, directly or
   through local names assigned from one (for-loop and comprehension targets included). (`json.loads` of text
   read so is caught at the read.)
3. **Polars reading a file**: `pl.read_parquet`, `pl.scan_parquet`, `pl.read_parquet_schema` anywhere outside
   `rundir/`: the only Parquet files genenv reads are a run's, and `rundir.datafiles` reads them with their schema. (A
   benchmark's own data files are read by its suite: `evals/` and `families/` are exempt from this rule only.)

It is a syntactic rule: a path handed through a function parameter is followed no further than that function
(its caller is checked where it builds the path). A test below shows that each kind of access is caught.
"""

from __future__ import annotations

import ast

import paths

SRC = paths.SRC / "genenv_cli"
OWNERS = {"contract.py", "safefiles.py", "jsonio.py"}
OWNER_PACKAGES = ("rundir/",)
RUN_NAMES = {"evals", "report", "static", "epochs", "manifests", "pools", "logs", "metrics.json", "pruned.json",
             "genenv.toml", ".lock", "trackers"}
RUN_PATH_METHODS = {"epoch_dir", "manifest_path", "manifests_dir", "checkpoint_dir", "metrics_path", "file",
                    "pool_dir", "pool_partition", "pool_partitions", "evals_root", "evals_dir", "logs_dir",
                    "report_dir", "static_tasks", "config_path", "inputs", "outputs", "trackers_dir"}
RAW_CALLS = {"open", "read_regular", "open_regular", "read_record", "read_json"}
RAW_QUALIFIED = {("os", "open"), ("io", "open"), ("json", "load"), ("tomllib", "load")}
RAW_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "open"}
POLARS_READERS = {"read_parquet", "scan_parquet", "read_parquet_schema"}


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _from_run(node: ast.AST, tainted: set[str]) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in RUN_PATH_METHODS:
            return True
        if isinstance(n, ast.Attribute) and n.attr == "root" and "run" in ast.unparse(n.value).lower():
            return True  # a run's root (`run.root`, `run_dir.root`), not any object's (a database's folder)
        if isinstance(n, ast.Name) and n.id in tainted:
            return True
    return False


def _targets(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) pairs of the assignments and loops in a function."""
    out: list[tuple[ast.AST, ast.AST]] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Assign):
            out += [(t, n.value) for t in n.targets]
        elif isinstance(n, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and n.value is not None:
            out.append((n.target, n.value))
        elif isinstance(n, ast.For | ast.AsyncFor | ast.comprehension):
            out.append((n.target, n.iter))
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            out.append((n.optional_vars, n.context_expr))
    return out


def _tainted(scope: ast.AST) -> set[str]:
    """Local names that hold a path built from a run (to a fixed point)."""
    pairs = _targets(scope)
    tainted: set[str] = set()
    while True:
        grown = set(tainted)
        for target, value in pairs:
            if _from_run(value, tainted):
                grown |= _names_in(target)
        if grown == tainted:
            return tainted
        tainted = grown


def _raw(call: ast.Call) -> tuple[str, list[ast.AST]] | None:
    """(what, the expressions that hold the path) for a raw open, else None."""
    f = call.func
    if isinstance(f, ast.Name) and f.id in RAW_CALLS:
        return f.id, list(call.args[:1])
    if isinstance(f, ast.Attribute):
        if isinstance(f.value, ast.Name) and (f.value.id, f.attr) in RAW_QUALIFIED:
            return f"{f.value.id}.{f.attr}", list(call.args[:1])
        if f.attr in RAW_METHODS:
            return f".{f.attr}()", [f.value]
    return None


def violations(source: str, name: str) -> list[str]:
    tree = ast.parse(source)
    found = []
    defs = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    module_level = ast.Module(body=[n for n in tree.body if not isinstance(n, defs)], type_ignores=[])
    scopes = [module_level, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
    for scope in scopes:
        tainted = _tainted(scope)
        for n in ast.walk(scope):
            if not isinstance(n, ast.Call):
                continue
            raw = _raw(n)
            if raw and any(_from_run(arg, tainted) for arg in raw[1]):
                found.append(f"{name}:{n.lineno}: {raw[0]} on a path built from the run")
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in POLARS_READERS and isinstance(f.value, ast.Name) \
                    and f.value.id in ("pl", "polars") and not name.startswith(("evals/", "families/")):
                found.append(f"{name}:{n.lineno}: polars reads a run file outside rundir")
    for n in ast.walk(tree):
        spelled: list[ast.AST] = []
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div):
            spelled = [n.left, n.right]
        elif isinstance(n, ast.Call) and ((isinstance(n.func, ast.Name) and n.func.id == "Path")
                                          or (isinstance(n.func, ast.Attribute) and n.func.attr == "joinpath")):
            spelled = list(n.args)
        for s in spelled:
            if isinstance(s, ast.Constant) and s.value in RUN_NAMES:
                found.append(f"{name}:{n.lineno}: the run's {s.value!r} spelled outside rundir")
    return sorted(set(found), key=lambda f: int(f.split(":")[1]))


def test_no_module_but_the_owners_opens_a_run_file():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel not in OWNERS and not rel.startswith(OWNER_PACKAGES):
            found += violations(path.read_text(encoding="utf-8"), rel)
    assert found == []


def test_each_kind_of_run_file_access_is_caught():
    """The rule can fail: a spelled run folder, a raw read of a manifest through a local name, a read inside a loop
    over a run's folder, and polars reading a pool are each found; reading a path handed in is not."""
    source = '''
import json
import polars as pl

def a(run):
    return run.root / "evals" / "bfcl"

def b(run, epoch):
    path = run.manifest_path(epoch, "score")
    return json.loads(path.read_text())

def c(run, epoch):
    for p in run.manifests_dir(epoch).glob("*.json"):
        with open(p) as fh:
            yield fh.read()

def d(run):
    return pl.scan_parquet(run.file("agent_train", 1))

def e(path):
    return path.read_text()
'''
    found = violations(source, "example.py")
    assert [f.split(": ", 1)[1] for f in found] == [
        "the run's 'evals' spelled outside rundir",
        ".read_text() on a path built from the run",
        "open on a path built from the run",
        "polars reads a run file outside rundir",
    ], found
