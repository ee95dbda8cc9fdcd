"""TravelPlanner: genenv's checks beside the official evaluator, plan by plan, on the released training split.

    python -m experiments.travelplanner_official --official PATH/TO/TravelPlanner --data DIR \\
        [--python PYTHON] [--out experiments/results/travelplanner_official]

`--official`: a checkout of github.com/OSU-NLP-Group/TravelPlanner (its evaluation/, tools/ and utils/ are used,
from a copy in a temporary folder; nothing of it enters this repository). `--data`: the release's files as
`genenv evaluate --bench travelplanner --data DIR` reads them (std_travelplanner.jsonl, train_ref_info.jsonl,
database/). `--python`: the interpreter that runs the official code (it needs pandas, numpy and tqdm; its
requirements pin pandas 2.0.1).

The plans: the 45 annotated reference plans, the planted errors and perturbations of `travelplanner_plants.py`,
and each reference plan scored against another query of the same length. Both sides get the same query fields
(derived from the release's text by genenv; see families/travelplanner/release.py) and the same flights: the
database has no flights table, so the official code's flight table is set, query by query, to the rows of that
query's reference information, as genenv's checks use them. The official code needs `gradio` only for an import
its checks never use; an empty module stands in for it.

Written to `--out`: `plans.jsonl` (per plan: the case, genenv's and the official verdict per constraint, agree or
not) and `agreement.json` / `agreement.md` (counts per case kind and per constraint, the machine, the versions).
`--outputs FILE` adds a model's answers (`{"id", "output"}` lines, as `genenv evaluate --model ...` writes its
samples, or `travelplanner_model_plans.py`'s, whose `arm` names the case): each answer's plan, read by genenv's
`extract_plan` (the official pipeline has GPT-4 turn prose into JSON instead), is scored against its query. An
answer with no plan is compared too: genenv says not delivered, and the driver does what `evaluation/eval.py` does
with an empty plan (neither box computed).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine

from experiments.travelplanner_plants import Case, cases
from genenv_cli.families.travelplanner import TravelPlanner
from genenv_cli.families.travelplanner.benchmark import sample_database
from genenv_cli.families.travelplanner.checks import COMMONSENSE, HARD, evaluate_plan
from genenv_cli.families.travelplanner.database import FILES
from genenv_cli.families.travelplanner.plans import extract_plan

RESULTS = Path(__file__).parent / "results" / "travelplanner_official"
QUERY_FIELDS = ("org", "dest", "days", "visiting_city_number", "date", "people_number", "local_constraint",
                "budget", "level")
KEYS = [*COMMONSENSE, *HARD]

# Run by --python inside the temporary copy of the official repository (its evaluation/ folder is the cwd the
# official modules expect). Reads cases.jsonl, writes official.jsonl: one verdict per case, or the exception.
DRIVER = r'''
import io, json, sys, types
sys.modules.setdefault("gradio", types.ModuleType("gradio"))
sys.path.insert(0, "..")
import pandas as pd
import commonsense_constraint as cc
import hard_constraint as hc

cols = ["Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate", "OriginCityName",
        "DestCityName", "Distance"]
def verdict(box):
    return None if box is None else {k: (None if v[0] is None else bool(v[0])) for k, v in box.items()}
with open("cases.jsonl") as fh, open("official.jsonl", "w") as out:
    for line in fh:
        case = json.loads(line)
        text = pd.DataFrame(case["flights"], columns=cols).to_csv(index=False)
        rows = pd.read_csv(io.StringIO(text)).dropna()[cols]  # typed as the official loader reads its table
        cc.flight.data = rows
        hc.flight.data = rows
        q, plan = case["query"], case["plan"]
        if not plan:  # eval.py: a plan that is None or empty is not delivered, and neither box is computed
            out.write(json.dumps({"commonsense": None, "hard": None}) + "\n")
            continue
        try:
            cs = cc.evaluation(q, plan)
            hard = hc.evaluation(q, plan) if cs["is_not_absent"][0] and cs["is_valid_information_in_sandbox"][0] else None
            out.write(json.dumps({"commonsense": verdict(cs), "hard": verdict(hard)}) + "\n")
        except Exception as exc:
            out.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
'''


def official_tree(repo: Path, data: Path, work: Path, flights: list[dict[str, Any]]) -> Path:
    """A copy of the official code with database/ beside it: the release's tables (linked) and a flights table
    of every query's reference rows (replaced per query by the driver; the official loader needs the file)."""
    for part in ("evaluation", "tools", "utils"):
        shutil.copytree(repo / part, work / part)
    db = work / "database"
    for sub in (data / "database").iterdir():
        (db / sub.name).parent.mkdir(parents=True, exist_ok=True)
        (db / sub.name).symlink_to(sub.resolve())
    import pandas as pd

    (db / "flights").mkdir()
    pd.DataFrame(flights).drop_duplicates().to_csv(db / FILES["flights"])
    return work / "evaluation"


def genenv_verdict(q: dict[str, Any], plan: list[dict[str, Any]] | None, db) -> dict[str, Any]:
    """genenv's values per constraint; a model answer with no plan (`extract_plan` found none) is not delivered."""
    if not plan:
        return {"commonsense": None, "hard": None}
    cs, hard, _ = evaluate_plan(q, plan, db)
    return {"commonsense": {k: bool(v[0]) for k, v in cs.items()},
            "hard": None if hard is None else {k: v[0] for k, v in hard.items()}}


def final_pass(v: dict[str, Any]) -> bool:
    if v.get("error") or v["commonsense"] is None or v["hard"] is None:
        return False
    return all(x is not False for x in v["commonsense"].values()) and all(x is not False for x in v["hard"].values())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--official", type=Path, required=True, help="a checkout of OSU-NLP-Group/TravelPlanner")
    ap.add_argument("--data", type=Path, required=True, help="the release's folder (std_travelplanner.jsonl, ...)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter for the official code")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--outputs", type=Path, action="append", default=[],
                    help="a model's answers ({\"id\", \"output\"} lines, as `genenv evaluate` writes its samples); "
                         "each is compared too, with or without a plan (repeatable)")
    args = ap.parse_args(argv)

    suite = TravelPlanner()
    loaded = suite.load(data=args.data, split="train", version=None, protocol="official",
                        cache_dir=Path(tempfile.gettempdir()))
    samples = loaded.samples
    dbs = {id(s.gold): sample_database(s) for s in samples}
    queries = [s.gold for s in samples]
    plans = [s.gold["annotated_plan"] for s in samples]
    rows = [(n, c) for n, c in cases(queries, plans, lambda q: dbs[id(q)])]
    undelivered = Counter()
    outputs: dict[int, str] = {}  # row index -> the model's answer, kept in plans.jsonl
    for path in args.outputs:
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            # an answer with no plan is compared too: both sides then see no plan (eval.py: not delivered)
            plan, _ = extract_plan(rec.get("output") or "")
            name = f"model:{rec.get('arm') or path.stem}"
            undelivered[name] += plan is None
            outputs[len(rows)] = rec.get("output") or ""
            rows.append((int(rec["id"]) - 1, Case(name, None, queries[int(rec["id"]) - 1], plan)))

    with tempfile.TemporaryDirectory(prefix="travelplanner-official-") as tmp:
        evaluation = official_tree(args.official, args.data, Path(tmp), [f for q in queries for f in
                                                                         _reference_flights(q)])
        with open(evaluation / "cases.jsonl", "w") as fh:
            for n, c in rows:
                fh.write(json.dumps({"query": {k: c.query[k] for k in QUERY_FIELDS}, "plan": c.plan,
                                     "flights": _reference_flights(queries[n])}) + "\n")
        (evaluation / "driver.py").write_text(DRIVER)
        proc = subprocess.run([args.python, "driver.py"], cwd=evaluation, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"the official code failed:\n{proc.stderr[-3000:]}")
        official = [json.loads(x) for x in (evaluation / "official.jsonl").read_text().splitlines()]
        versions = subprocess.run([args.python, "-c", "import pandas, numpy, sys; print(sys.version.split()[0], "
                                   "pandas.__version__, numpy.__version__)"], capture_output=True, text=True).stdout.split()

    args.out.mkdir(parents=True, exist_ok=True)
    per_kind: dict[str, Counter] = {}
    per_key: dict[str, Counter] = {k: Counter() for k in KEYS}
    named_fail = Counter()
    with open(args.out / "plans.jsonl", "w") as fh:
        for row, ((n, c), off) in enumerate(zip(rows, official, strict=True)):
            ours = genenv_verdict({k: c.query[k] for k in QUERY_FIELDS}, c.plan, dbs[id(queries[n])])
            same = not off.get("error") and ours == off
            kind = per_kind.setdefault(c.name, Counter())
            kind["plans"] += 1
            kind["agree"] += same
            kind["final_pass_genenv"] += final_pass(ours)
            kind["final_pass_official"] += final_pass(off)
            kind["official_errors"] += bool(off.get("error"))
            kind["delivered"] += bool(c.plan)
            if c.constraint:
                fails = [_value(v, c.constraint) is False for v in (ours, off)]
                kind["named_fails_both"] += all(fails)
                named_fail[c.name] += all(fails)
            for k in KEYS:
                per_key[k]["agree"] += not off.get("error") and _value(ours, k) == _value(off, k)
                per_key[k]["plans"] += 1
            # the others are rebuilt from the data
            extra = {"plan": c.plan, "output": outputs[row]} if c.name.startswith("model:") else {}
            fh.write(json.dumps({"query": n + 1, "case": c.name, "constraint": c.constraint, "agree": same,
                                 "genenv": ours, "official": off, **extra}) + "\n")
    total = sum(k["plans"] for k in per_kind.values())
    agree = sum(k["agree"] for k in per_kind.values())
    files = "; ".join(Path(x).name for x in loaded.source.split("; "))  # the release's files, not where they lay
    result = {"plans": total, "agree": agree, "per_case": {k: dict(v) for k, v in per_kind.items()},
              "per_constraint": {k: dict(v) for k, v in per_key.items()},
              "model_answers_without_a_plan": {k: v for k, v in undelivered.items() if v}, "source": files, "official_python": versions,
              "commit": git_commit(), "machine": machine()}
    (args.out / "agreement.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "agreement.md").write_text(_table(result))
    print(f"{agree}/{total} plans: the same verdict on every constraint")


def _reference_flights(q: dict[str, Any]) -> list[dict[str, Any]]:
    return q.get("flights") or []


def _value(v: dict[str, Any], key: str) -> bool | None:
    if v.get("error"):
        return None
    if key in COMMONSENSE:
        return None if v["commonsense"] is None else v["commonsense"][key]
    return None if v["hard"] is None else v["hard"].get(key)


def _table(r: dict[str, Any]) -> str:
    lines = ["# genenv's TravelPlanner checks beside the official evaluator\n",
             f"{r['agree']} of {r['plans']} plans get the same verdict on all 13 constraints (and whether the hard "
             f"ones are evaluated).\n", "| case | plans | with a plan | same verdict | named constraint fails in both | final pass "
             "genenv / official | official errors |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, k in r["per_case"].items():
        named = k.get("named_fails_both", "-")
        lines.append(f"| {name} | {k['plans']} | {k['delivered']} | {k['agree']} | {named} | {k['final_pass_genenv']} / "
                     f"{k['final_pass_official']} | {k['official_errors']} |")
    lines += ["", "| constraint | same value |", "|---|---:|"]
    lines += [f"| {k} | {v['agree']} / {v['plans']} |" for k, v in r["per_constraint"].items()]
    if r["model_answers_without_a_plan"]:
        lines += ["", "Model answers with no plan (genenv's reader found none; both then say not delivered, as "
                  "eval.py does for an empty plan): "
                  + ", ".join(f"{k}: {v}" for k, v in r["model_answers_without_a_plan"].items()) + "."]
    lines += ["", f"Data: {r['source']}. Official code run with Python/pandas/numpy {' / '.join(r['official_python'])}. "
              f"genenv commit {r['commit']}; machine: {r['machine']}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
