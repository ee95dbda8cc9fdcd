"""TravelPlanner (Xie et al., ICML 2024), sole-planning mode: the agent writes a per-day travel plan as JSON,
checked against the reference database with the official commonsense and hard constraints.

Official sources: github.com/OSU-NLP-Group/TravelPlanner (`evaluation/eval.py`,
`evaluation/commonsense_constraint.py`, `evaluation/hard_constraint.py`, `tools/*/apis.py`,
`agents/prompts.py`, `tools/planner/sole_planning.py`, `postprocess/`) and the Hugging Face dataset
`osunlp/TravelPlanner`. The checks live in `checks.py`, the database in `database.py`, the split files'
query records in `queries.py`, the prompt in `prompt.py`.

Data. `--data` names a folder holding the split file — `validation.csv` as the dataset ships it (also
`.jsonl`, `.json`, `.parquet`, or `validation/*.parquet` as the Hub's parquet export lays it out) —
and `database/`, the official database zip unpacked (its layout is in `database.py`); `--data` may
also name the split file itself, with `database/` beside it. Fields read: org, dest, days,
visiting_city_number, date, people_number, local_constraint (a dict or its Python repr, as in the CSV),
budget, query, level, reference_information (and annotated_plan in train, kept in `gold`). Without
`--data` the split CSV is downloaded from the Hub (`resolve/main/<split>.csv`) and the database zip
from Google Drive (id 1pF1Sw6pBmq2sFkJvm-LzJOqrmfWoQgxE, the README's link), both cached under
GENENV_CACHE; Google Drive often answers a program with a confirmation page instead of the file, and
then the error says to download and unzip the database by hand and pass `--data`. Splits: validation
(default, 180 queries) and train (45, with annotated plans); the test split carries no constraints and
is scored only by the official leaderboard. Sample ids: the official `idx`, the 1-based row of the split,
as a string ("1" .. "180"). Category: the query's level (easy, medium, hard). The official repository's own
release of the training split (std_travelplanner.jsonl and train_ref_info.jsonl beside database/, which has no
flights table) is read by `release.py`: the fields derived from each query's text, its flights from its reference
information (`sample_database`).

Prompt (sole-planning, `direct` strategy: `agents/prompts.py` PLANNER_INSTRUCTION as
`tools/planner/sole_planning.py` fills it, split into system and user turns the way the official
fine-tuning data `finetuning_data/std_travelplanner.jsonl` does). System: the official instruction,
with "the 'current_city' field" for "the 'Current City' section", then the output format of the official
JSON conversion step (`postprocess/openai_request.py`: one object per day with the keys days,
current_city, transportation, breakfast, attraction, lunch, dinner, accommodation; places as
"Name, City"; attractions each ended by ";"; "-" for nothing), asked for inside a ```json block, then
the official example (Ithaca -> Charlotte) written in that JSON form. User:
"Given information: <reference_information, verbatim>\\nQuery: <query>\\nTravel Plan:". No hint about
the commonsense rules is added (the benchmark's rules forbid it).

Answer parser (replaces the official GPT-4 conversion of a prose plan into JSON). `<think>...</think>`
blocks are dropped. The plan is the first ```json (or bare ```) block, else the first balanced `[{...}]`
span (or `{"plan": [...]}`, the official submission line) in the text, whose content decodes — as JSON,
else as a Python literal (the official fine-tuned models write `[{'days': 1, ...}]`; read by
`callparse.parse_literal`, literals only, bounded, never evaluated) — to a non-empty list of objects at least one of which has
a plan key (current_city, transportation, ...). Anything else is "not delivered", as an empty plan is
in `eval.py`. Day objects are scored as given; days past the query's count are not looked at (the
official fine-tuning targets pad plans with `{}` to 7 days).

Verdict: `correct` is the final pass (all 8 commonsense checks and every hard constraint set); `parsed`
the plan; `reason` the failed checks with the paper's names; `scores` 1/0 per check under the official
keys (`is_valid_information_in_sandbox`, ..., `valid_cost`, ...; a hard constraint the query does not
set is absent), plus `delivered`, `hard_evaluated`, `commonsense_pass`, `hard_pass`, `final_pass`
and `total_cost` (the official `get_total_cost`).

Metrics (`evaluation/eval.py`, its denominators generalised from the fixed validation counts to the
samples scored): delivery rate = delivered / N; commonsense micro = passed checks / (8 N); commonsense
macro = plans passing all 8 / N; hard micro = passed hard constraints / the number of hard constraints
the queries set (budget always; house rule, cuisine, room type when set for medium and hard queries;
transportation when set for hard queries — 420 on the validation split); hard macro = plans whose hard
constraints were evaluated (delivered, complete and within the sandbox) and none failed / N; final pass
rate = both / N (as in `eval.py`, a plan counts for commonsense macro only when its hard constraints were
evaluated; the others fail a commonsense check anyway). Reported per level and per trip length too, with
each constraint's pass count (`constraints`, the paper's names). `--protocol paper` (GenEnv, arXiv
2512.19682, Table 1) takes as headline `paper_score`, the mean of commonsense micro, commonsense macro,
hard micro and hard macro (computed under both protocols; `headline` names the headline metric: the
final pass rate officially). The paper's numbers: GenEnv 7B 16.6, Qwen2.5-7B-Instruct 14.3.
"""

from __future__ import annotations

import functools
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.evals.base import PROTOCOLS, Benchmark, EvalSample, LoadedData, PaperColumn, Verdict
from genenv_cli.evals.datasource import no_data_error, sha256_paths, try_download
from genenv_cli.families.travelplanner.checks import (
    COMMONSENSE,
    HARD,
    evaluate_plan,
    hard_total,
)
from genenv_cli.families.travelplanner.database import FILES, Database, QueryDatabase, find_database
from genenv_cli.families.travelplanner.plans import extract_plan
from genenv_cli.families.travelplanner.prompt import make_sample
from genenv_cli.families.travelplanner.queries import (
    LEVELS,
    default_split,
    parse_query,
    read_records,
    split_file,
)
from genenv_cli.families.travelplanner.release import (
    CHATS,
    find_ref_info,
    flight_rows,
    read_ref_info,
    ref_info_name,
    release_records,
)

PAPER_REFERENCE = {"GenEnv 7B": 16.6, "Qwen2.5-7B-Instruct": 14.3}
HF_URL = "https://huggingface.co/datasets/osunlp/TravelPlanner/resolve/{version}/{split}.csv"
DRIVE_ID = "1pF1Sw6pBmq2sFkJvm-LzJOqrmfWoQgxE"
DRIVE_URL = f"https://drive.usercontent.google.com/download?id={DRIVE_ID}&export=download&confirm=t"


def open_database(root: Path) -> Database:
    """The database in this folder, shared by every instance in the process, so `score` works on samples loaded
    elsewhere and each table is read once. The most recently used 64 are kept: a long run of the travelplanner
    domain opens one small database per generated item, and they must not pile up in memory."""
    return _open_database(str(Path(root).resolve()))


@functools.lru_cache(maxsize=64)
def _open_database(key: str) -> Database:
    return Database(Path(key))


def sample_database(sample: EvalSample, loaded: Database | None = None) -> Database:
    """The database a sample is checked against: its folder's (or `loaded`), with the query's own flight rows in
    place of the flights table when the sample carries them (a database without that table)."""
    root = sample.meta.get("database")
    db = open_database(Path(root)) if root else loaded
    if db is None:
        raise InputError(f"TravelPlanner sample {sample.id} names no database; load the benchmark first.")
    flights = sample.gold.get("flights")
    return QueryDatabase(db, flights) if flights is not None else db


# ---------------------------------------------------------------------------- benchmark

class TravelPlanner(Benchmark):
    name = "travelplanner"
    paper_column = PaperColumn(5, "TravelPlanner", PAPER_REFERENCE)
    description = ("TravelPlanner sole-planning: a per-day travel plan (JSON) checked against the reference "
                   "database; delivery, commonsense and hard-constraint micro/macro pass rates, final pass rate")
    categories = list(LEVELS)
    sources = [
        "queries: https://huggingface.co/datasets/osunlp/TravelPlanner (validation.csv, train.csv), "
        "downloaded and cached",
        f"database: the zip linked from https://github.com/OSU-NLP-Group/TravelPlanner (Google Drive id "
        f"{DRIVE_ID}); fetched when Google serves it to a program, else unzip it by hand next to the split "
        f"file and pass the folder with --data",
    ]
    splits = ["validation", "train"]
    versions = ["main"]

    def __init__(self) -> None:
        self._db: Database | None = None

    # ------------------------------------------------------------------ loading
    def load(self, *, data: Path | None, split: str | None, version: str | None, protocol: str,
             cache_dir: Path) -> LoadedData:
        split = split or default_split(data)
        version = version or self.versions[0]
        self._check_request(split, version, protocol)
        split_path, db_root, source_kind = self._locate(data, split, version, cache_dir)
        db = open_database(db_root)
        missing = db.missing()
        if missing:
            raise InputError(f"the TravelPlanner database at {db_root} is incomplete: missing "
                             f"{', '.join(missing)}. Unzip the official database there (layout: "
                             f"{', '.join(FILES.values())}).")
        records, read = _split_records(split_path, split, db)
        samples = []
        for idx, rec in enumerate(records, 1):
            gold, query, ref = parse_query(rec, idx, split_path)
            samples.append(make_sample(str(idx), gold, query, ref, db.root))
        self._db = db
        where = "local file" if source_kind == "local" else f"Hub revision {version}"
        flights = "" if db.has_flight_table() else ", each query's flights from its reference information"
        return LoadedData(
            samples=samples,
            version=f"osunlp/TravelPlanner {split} ({where}, {len(samples)} queries) + database{flights}",
            source="; ".join(map(str, [*read, db.root])),
            fingerprint=sha256_paths([*read, *db.paths()]))

    def _check_request(self, split: str, version: str, protocol: str) -> None:
        """InputError unless the protocol, split and data version are ones this suite has."""
        if protocol not in PROTOCOLS:
            raise InputError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}.")
        if split == "test":
            raise InputError("the TravelPlanner test split has no constraint fields (only level, days and query); "
                             "it is scored by the official leaderboard "
                             "(https://huggingface.co/spaces/osunlp/TravelPlannerLeaderboard). Use validation or train.")
        if split not in self.splits:
            raise InputError(f"unknown TravelPlanner split {split!r}; expected one of {', '.join(self.splits)}.")
        if version not in self.versions:
            raise InputError(f"unknown TravelPlanner data version {version!r}; expected one of "
                             f"{', '.join(self.versions)}.")

    def _locate(self, data: Path | None, split: str, version: str, cache_dir: Path) -> tuple[Path, Path, str]:
        """(split file, database folder, "local" or "hub"): from --data, else downloaded into the cache; InputError
        saying what was tried when either cannot be had."""
        tried: list[str] = []
        split_path: Path | None = None
        db_root: Path | None = None
        if data is not None:
            data = Path(data).expanduser()
            if data.is_file():
                split_path, db_root = data, find_database(data.parent)
            elif data.is_dir():
                split_path, db_root = split_file(data, split), find_database(data)
            else:
                raise InputError(f"--data {data} does not exist; expected a folder holding {split}.csv (or .jsonl, "
                                 f".json, .parquet) and database/, or the split file itself.")
            if split_path is None:
                tried.append(f"{data}: no {split}.csv/.jsonl/.json/.parquet")
            if db_root is None:
                tried.append(f"{data}: no database/ folder (expected {FILES['restaurants']} and the other "
                             f"official tables under it)")
        source_kind = "local"
        if split_path is None:
            url = HF_URL.format(version=version, split=split)
            split_path = try_download(url, cache_dir / version / f"{split}.csv", tried)
            source_kind = "hub"
        if db_root is None and split_path is not None:
            db_root = self._cached_database(cache_dir / version, tried)
        if split_path is None or db_root is None:
            err = no_data_error(self.name, self.sources, tried)
            raise InputError(f"{err} Expected layout: FOLDER/{split}.csv (or .jsonl/.json/.parquet) and "
                             f"FOLDER/database/ with {', '.join(FILES.values())}; pass --data FOLDER.")
        return split_path, db_root, source_kind

    def _cached_database(self, base: Path, tried: list[str]) -> Path | None:
        """The database under the cache, fetching and unpacking the official zip on first use."""
        found = find_database(base)
        if found is not None and not Database(found).missing():
            return found
        zpath = try_download(DRIVE_URL, base / "database.zip", tried)
        if zpath is None:
            return None
        if not zipfile.is_zipfile(zpath):
            zpath.unlink(missing_ok=True)
            zpath.with_name(zpath.name + ".source.json").unlink(missing_ok=True)
            tried.append(f"{DRIVE_URL}: Google Drive sent a web page instead of the zip (it asks for a confirmation "
                         f"a program cannot give); download it in a browser")
            return None
        tmp = base / f".unzip-{os.getpid()}"
        try:
            with zipfile.ZipFile(zpath) as zf:
                members = [m for m in zf.namelist() if not m.startswith("__MACOSX/")
                           and not Path(m).is_absolute() and ".." not in Path(m).parts]
                zf.extractall(tmp, members)
            hits = sorted(tmp.rglob(Path(FILES["restaurants"]).name))
            if not hits:
                tried.append(f"{zpath}: the zip holds no {FILES['restaurants']}")
                return None
            root = hits[0].parent.parent
            dest = base / "database"
            if dest.exists():
                shutil.rmtree(dest)
            os.replace(root, dest)
        except (OSError, zipfile.BadZipFile) as exc:
            tried.append(f"{zpath}: cannot unpack ({exc})")
            return None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        zpath.unlink(missing_ok=True)
        return dest

    def _db_for(self, sample: EvalSample) -> Database:
        return sample_database(sample, self._db)

    # ------------------------------------------------------------------ scoring
    def score(self, sample: EvalSample, output: str, protocol: str) -> Verdict:
        plan, why = extract_plan(output if isinstance(output, str) else "")
        if plan is None:
            return Verdict(False, None, f"not delivered: {why}", {"delivered": 0.0})
        q = sample.gold
        cs, hard, cost = evaluate_plan(q, plan, self._db_for(sample))
        scores: dict[str, float] = {"delivered": 1.0}
        reasons = []
        for key, (ok, msg) in cs.items():
            scores[key] = float(bool(ok))
            if not ok:
                reasons.append(f"{COMMONSENSE[key]}: {msg}")
        cs_pass = all(ok is not False for ok, _ in cs.values())
        scores["hard_evaluated"] = float(hard is not None)
        hard_pass = False
        if hard is None:
            reasons.append("hard constraints not evaluated (the plan is incomplete or leaves the sandbox)")
        else:
            for key, (ok, msg) in hard.items():
                if ok is not None:
                    scores[key] = float(bool(ok))
                if ok is False:
                    reasons.append(f"{HARD[key]}: {msg}")
            hard_pass = all(ok is not False for ok, _ in hard.values())
            if cost is not None:
                scores["total_cost"] = float(cost)
        # eval.py counts a commonsense pass only for plans whose hard constraints were evaluated
        cs_pass = cs_pass and hard is not None
        scores["commonsense_pass"] = float(cs_pass)
        scores["hard_pass"] = float(hard_pass)
        final = cs_pass and hard_pass
        scores["final_pass"] = float(final)
        return Verdict(final, plan, "; ".join(reasons), scores)

    # ------------------------------------------------------------------ summary
    def summarize(self, samples: list[EvalSample], verdicts: list[Verdict], protocol: str) -> dict[str, Any]:
        if len(samples) != len(verdicts):
            raise ValueError(f"{len(samples)} samples but {len(verdicts)} verdicts")
        groups: dict[str, list[tuple[EvalSample, Verdict]]] = {}
        for s, v in zip(samples, verdicts, strict=True):
            groups.setdefault(s.category, []).append((s, v))
        pairs = list(zip(samples, verdicts, strict=True))
        overall = _metrics(pairs)
        out: dict[str, Any] = {
            "overall": overall,
            "categories": {c: _metrics(groups[c]) for c in LEVELS if c in groups}
            | {c: _metrics(g) for c, g in groups.items() if c not in LEVELS},
            "by_days": {str(d): _metrics([p for p in pairs if p[0].gold.get("days") == d])
                        for d in sorted({s.gold.get("days") for s in samples if isinstance(s.gold.get("days"), int)})},
            "constraints": _constraint_counts(pairs),
            "headline": "paper_score" if protocol == "paper" else "final_pass_rate",
        }
        if protocol == "paper":
            out["paper_reference"] = dict(PAPER_REFERENCE)
        return out


def _metrics(pairs: list[tuple[EvalSample, Verdict]]) -> dict[str, Any]:
    n = len(pairs)
    delivered = cs_passed = cs_plans = hard_passed = hard_plans = final = hard_den = 0
    for s, v in pairs:
        sc = v.scores or {}
        hard_den += hard_total(s.gold.get("level", ""), s.gold.get("local_constraint") or {})
        if not sc.get("delivered"):
            continue
        delivered += 1
        cs_passed += sum(int(sc.get(k, 0.0) == 1.0) for k in COMMONSENSE)
        hard_passed += sum(int(sc.get(k, 0.0) == 1.0) for k in HARD)
        cs_plans += int(sc.get("commonsense_pass", 0.0) == 1.0)
        hard_plans += int(sc.get("hard_pass", 0.0) == 1.0)
        final += int(sc.get("final_pass", 0.0) == 1.0)

    def pct(k: int, m: int) -> float:
        return 100.0 * k / m if m else 0.0

    m = {
        "delivery_rate": pct(delivered, n),
        "commonsense_micro": pct(cs_passed, 8 * n),
        "commonsense_macro": pct(cs_plans, n),
        "hard_micro": pct(hard_passed, hard_den),
        "hard_macro": pct(hard_plans, n),
        "final_pass_rate": pct(final, n),
    }
    m["paper_score"] = (m["commonsense_micro"] + m["commonsense_macro"] + m["hard_micro"] + m["hard_macro"]) / 4
    m.update({"delivered": delivered, "commonsense_passed": cs_passed, "commonsense_total": 8 * n,
              "hard_passed": hard_passed, "hard_total": hard_den, "n": n})
    return m


def _constraint_counts(pairs: list[tuple[EvalSample, Verdict]]) -> dict[str, dict[str, int]]:
    """Per constraint (the paper's names): plans passing it and plans it applies to (eval.py's detail)."""
    out: dict[str, dict[str, int]] = {}
    for key, label in COMMONSENSE.items():
        out[label] = {"pass": sum(int((v.scores or {}).get(key) == 1.0) for _, v in pairs), "total": len(pairs)}
    for key, label in HARD.items():
        total = 0
        for s, _ in pairs:
            lc, level = s.gold.get("local_constraint") or {}, s.gold.get("level")
            if key == "valid_cost":
                total += 1
            else:
                field = {"valid_room_rule": "house rule", "valid_cuisine": "cuisine", "valid_room_type": "room type",
                         "valid_transportation": "transportation"}[key]
                counted = level == "hard" or (level == "medium" and field != "transportation")
                total += int(counted and lc.get(field) is not None)
        out[label] = {"pass": sum(int((v.scores or {}).get(key) == 1.0) for _, v in pairs), "total": total}
    return out


def _split_records(split_path: Path, split: str, db: Database) -> tuple[list[Any], list[Path]]:
    """(query records, files read) of a split file: the training release's chats rebuilt with their reference
    information, or the split file's records, each given its flights from the reference information when the
    database has no flights table."""
    read = [split_path]
    ref_info = find_ref_info(split_path.parent, split) or find_ref_info(db.root.parent, split)
    if split_path.name == CHATS:  # the official repository's release of the training split
        if ref_info is None:
            raise InputError(f"{split_path} is the training split's chat examples; their reference information "
                             f"({ref_info_name('train')}) must be beside it or in its database/ folder.")
        records = release_records(split_path, ref_info, db.cities)
        read.append(ref_info)
    else:
        records = read_records(split_path)
        if not db.has_flight_table():
            if ref_info is None:
                raise InputError(f"the TravelPlanner database at {db.root} has no flights table "
                                 f"({FILES['flights']}); give the split's reference information "
                                 f"({ref_info_name(split)}) beside {split_path.name} to take each query's "
                                 f"flights from it, or add the official flights table.")
            refs = read_ref_info(ref_info)
            if len(refs) != len(records):
                raise InputError(f"{ref_info} holds {len(refs)} queries, {split_path} {len(records)}: expected "
                                 f"the same queries line for line.")
            for n, (rec, ref) in enumerate(zip(records, refs, strict=True), 1):
                if isinstance(rec, dict):
                    rec["flights"] = flight_rows(ref, f"{ref_info}, line {n}")
            read.append(ref_info)
    if not records:
        raise InputError(f"{split_path}: no query records.")
    return records, read
