"""Move modules of genenv_cli with `git mv` and rewrite every reference to them, so that a move is a commit of
moves and import fixes only (git's rename detection then carries other branches' edits to the moved files).

    python dev/move_modules.py MAP        # from the repository root; then ruff check --fix (import order), tests

MAP has one move a line, `old.module new.module`, both relative to genenv_cli; a package moves with everything
below it. Rewritten in every tracked text file (recorded results, tests/fixtures and dev/LOG.md excepted, since they
record what was): dotted names (`genenv_cli.old.module`, registry rows' "module:attribute" strings included),
`from genenv_cli.old import module` (as `from genenv_cli.new import module as module` where the name changes) and
paths (`genenv_cli/old/module.py`, `genenv_cli/old/package/`). Paths written relative to the package (docs tables:
`evals/bfcl/`) and data files a module finds beside itself are left to the mover. For example, the map that moved the
last two benchmark families out of evals/ and domains/:

    evals.travelplanner families.travelplanner
    domains.travelplanner families.travelplanner.domain
    domains.answers.travelplanner families.travelplanner.answers
    evals.alfworld families.alfworld
    domains.alfworld families.alfworld.domain
    domains.answers.alfworld families.alfworld.answers

(and `git mv` of their seed files from domains/data/ to families/NAME/data/).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path.cwd()
SRC = ROOT / "src" / "genenv_cli"
SKIP = re.compile(r"(^|/)results/|^tests/fixtures/|^dev/LOG\.md$|\.(json|jsonl|parquet|png|csv|gz|bin|lock)$")


def move(old: str, new: str) -> bool:
    """`git mv` one module or package; True for a package."""
    src = SRC.joinpath(*old.split("."))
    package = src.is_dir()
    if not package:
        src = src.with_suffix(".py")
    dst = SRC.joinpath(*new.split("."))
    if not package:
        dst = dst.with_suffix(".py")
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "mv", str(src), str(dst)], check=True)
    return package


def _split_import(m: re.Match[str], oparent: str, oname: str, nparent: str, nname: str) -> str:
    """`from OLDPARENT import a, moved, b` as two imports: the rest from the old parent, the moved one from the new."""
    keep, out = [], []
    for item in (x.strip() for x in m.group(3).split(",")):
        base, _, alias = item.partition(" as ")
        if base.strip() == oname:
            alias = alias.strip() or oname
            out.append(f"{m.group(1)}from {nparent} import {nname}" + ("" if alias == nname else f" as {alias}"))
        else:
            keep.append(item)
    if not out:
        return m.group(0)
    if keep:
        out.insert(0, f"{m.group(1)}from {oparent} import {', '.join(keep)}")
    return "\n".join(out)


def rewrite(text: str, moves: list[tuple[str, str, bool]]) -> str:
    for old, new, package in moves:  # longest first: a module inside a moved package by its own row
        o, n = "genenv_cli." + old, "genenv_cli." + new
        text = re.sub(r"(?<![\w.])" + re.escape(o) + r"(?![\w])", n, text)
        op, np_ = "genenv_cli/" + old.replace(".", "/"), "genenv_cli/" + new.replace(".", "/")
        text = re.sub(r"(?<![\w])" + re.escape(op) + (r"(?=/)" if package else r"(?=\.py\b)"), np_, text)
        oparent, _, oname = o.rpartition(".")
        nparent, _, nname = n.rpartition(".")

        text = re.sub(r"(?m)^([ \t]*)from (" + re.escape(oparent) + r") import ([\w ,]+)$",
                      lambda m, names=(oparent, oname, nparent, nname): _split_import(m, *names), text)
    return text


def main() -> None:
    rows = [line.split() for line in Path(sys.argv[1]).read_text().splitlines() if line.strip() and line[0] != "#"]
    moves = sorted(((old, new, move(old, new)) for old, new in rows), key=lambda m: -len(m[0]))
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.splitlines()
    for name in files:
        path = ROOT / name
        if SKIP.search(name) or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(text, moves)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print("rewrote", name)


if __name__ == "__main__":
    main()
