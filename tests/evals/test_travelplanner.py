"""TravelPlanner: a hand-written database of four cities and three validation-style queries (easy, medium,
hard), gold plans that pass everything and plans that each break exactly one official check."""

from __future__ import annotations

import copy
import csv
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from genenv_cli.core.callparse import parse_literal
from genenv_cli.core.errors import InputError
from genenv_cli.evals.base import EvalSample
from genenv_cli.families.travelplanner import benchmark as tp
from genenv_cli.families.travelplanner.benchmark import TravelPlanner
from genenv_cli.families.travelplanner.database import Database
from genenv_cli.families.travelplanner.plan_fields import name_city
from genenv_cli.families.travelplanner.plans import extract_plan
from paths import FIXTURES

FIX = FIXTURES / "travelplanner"
GOLD = json.loads((FIX / "gold_plans.json").read_text())


@pytest.fixture(scope="module")
def bench() -> TravelPlanner:
    return TravelPlanner()


@pytest.fixture(scope="module")
def samples(bench, tmp_path_factory) -> dict[str, EvalSample]:
    data = bench.load(data=FIX, split=None, version=None, protocol="official",
                      cache_dir=tmp_path_factory.mktemp("cache"))
    return {s.id: s for s in data.samples}


def fenced(plan) -> str:
    return "Here is the plan.\n```json\n" + json.dumps(plan, indent=1) + "\n```"


def gold(idx: str) -> list[dict]:
    return copy.deepcopy(GOLD[idx])


def edit(idx: str, day: int, **fields) -> list[dict]:
    """The gold plan of query `idx` with some fields of day `day` (1-based) replaced."""
    plan = gold(idx)
    plan[day - 1].update(fields)
    return plan


# One plan per official check, each breaking exactly that check (query id, plan).
COMMONSENSE_BREAKS = {
    "is_valid_information_in_sandbox": ("1", edit("1", 2, lunch="Imaginary Bistro, Charlotte")),
    "is_not_absent": ("1", edit("1", 2, attraction="-")),
    "is_valid_information_in_current_city": ("1", edit(
        "1", 1, transportation="Flight Number: F0001001, Departure Time: 08:00, Arrival Time: 10:05")),
    "is_reasonable_visiting_city": ("1", edit("1", 3, current_city="Charlotte")),
    "is_valid_restaurants": ("1", edit("1", 3, lunch="Cafe Maple Street, Charlotte")),
    "is_valid_attractions": ("1", edit("1", 3, attraction="The Mint Museum, Charlotte;")),
    "is_valid_transportation": ("3", edit(
        "3", 3, transportation="Taxi, from Rockford to Peoria, duration: 2 hours 10 mins, distance: 210 km, cost: 210")),
    "is_valid_accommodation": ("1", [dict(d, accommodation="Quiet Room with Garden View, Charlotte") if i < 2 else d
                                     for i, d in enumerate(gold("1"))]),
}


def _flights_only_plan():
    plan = gold("3")
    plan[0]["transportation"] = ("Flight Number: F0002001, from Ithaca to Rockford, Departure Time: 09:00, "
                                 "Arrival Time: 11:30")
    plan[2]["transportation"] = "Taxi, from Rockford to Peoria, duration: 2 hours 10 mins, distance: 210 km, cost: 210"
    plan[4]["transportation"] = ("Flight Number: F0002002, from Peoria to Ithaca, Departure Time: 17:00, "
                                 "Arrival Time: 19:20")
    return plan


HARD_BREAKS = {
    "valid_cost": ("1", [dict(d, accommodation="Charlotte Penthouse Suite, Charlotte") if i < 2 else d
                         for i, d in enumerate(gold("1"))]),
    "valid_room_type": ("2", [dict(d, accommodation="Shared Bunk in Dilworth, Charlotte") if i < 2 else d
                              for i, d in enumerate(gold("2"))]),
    "valid_room_rule": ("3", [dict(d, accommodation="Maple Street Guest Room, Rockford") if i < 2 else d
                              for i, d in enumerate(gold("3"))]),
    "valid_cuisine": ("3", edit("3", 3, lunch="Corn Stock Kitchen, Peoria")),
    "valid_transportation": ("3", _flights_only_plan()),
}

CS_KEYS = ["is_valid_information_in_current_city", "is_valid_information_in_sandbox", "is_reasonable_visiting_city",
           "is_valid_restaurants", "is_valid_transportation", "is_valid_attractions", "is_valid_accommodation",
           "is_not_absent"]


# ---------------------------------------------------------------------------- loading

def test_load_samples(samples):
    assert list(samples) == ["1", "2", "3"]
    assert [s.category for s in samples.values()] == ["easy", "medium", "hard"]
    s3 = samples["3"]
    assert s3.gold["local_constraint"] == {"house rule": "smoking", "cuisine": ["Chinese", "Italian"],
                                           "room type": None, "transportation": "no flight"}
    assert s3.gold["days"] == 5 and s3.gold["budget"] == 3000 and s3.gold["visiting_city_number"] == 2
    assert s3.gold["date"][0] == "2022-03-15"
    system, user = s3.messages
    assert system["role"] == "system" and system["content"].startswith("You are a proficient planner.")
    assert "```json" in system["content"] and "***** Example Ends *****" in system["content"]
    with open(FIX / "validation.csv", newline="", encoding="utf-8") as fh:
        row = list(csv.DictReader(fh))[2]
    assert user == {"role": "user", "content": f"Given information: {row['reference_information']}\n"
                                               f"Query: {row['query']}\nTravel Plan:"}


def _records():
    with open(FIX / "validation.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _with_db(folder: Path) -> Path:
    shutil.copytree(FIX / "database", folder / "database")
    return folder


@pytest.mark.parametrize("fmt", ["jsonl", "json", "parquet", "file"])
def test_load_other_formats(bench, tmp_path, fmt):
    folder = _with_db(tmp_path)
    recs = _records()
    for r in recs:  # as a `datasets` JSON export could hold them: numbers as numbers, the dict as a dict
        r["days"] = int(r["days"])
        r["local_constraint"] = parse_literal(r["local_constraint"])
    if fmt == "jsonl":
        (folder / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    elif fmt == "json":
        (folder / "validation.json").write_text(json.dumps(recs))
    elif fmt == "parquet":
        import polars as pl

        (folder / "validation").mkdir()
        pl.DataFrame([{k: str(v) if k == "local_constraint" else v for k, v in r.items()} for r in _records()]
                     ).write_parquet(folder / "validation" / "0000.parquet")
    data = folder
    if fmt == "file":
        shutil.copy(FIX / "validation.csv", folder / "my_split.csv")
        data = folder / "my_split.csv"
    loaded = bench.load(data=data, split="validation", version=None, protocol="official", cache_dir=tmp_path / "c")
    assert [s.id for s in loaded.samples] == ["1", "2", "3"]
    assert loaded.samples[2].gold["local_constraint"]["cuisine"] == ["Chinese", "Italian"]
    v = bench.score(loaded.samples[2], fenced(gold("3")), "official")
    assert v.correct, v.reason


def test_load_errors(bench, tmp_path, monkeypatch):
    def no_network(url, dest, tried):
        tried.append(f"{url}: offline")
        return None

    monkeypatch.setattr(tp, "try_download", no_network)
    # no split file, no database, no network
    with pytest.raises(InputError, match="--data"):
        bench.load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path / "c")
    # a split file without the database beside it
    (tmp_path / "only").mkdir()
    shutil.copy(FIX / "validation.csv", tmp_path / "only" / "validation.csv")
    with pytest.raises(InputError, match="database"):
        bench.load(data=tmp_path / "only", split=None, version=None, protocol="official", cache_dir=tmp_path / "c")
    # a database with a table missing
    folder = _with_db(tmp_path / "partial")
    shutil.copy(FIX / "validation.csv", folder / "validation.csv")
    (folder / "database" / "flights" / "clean_Flights_2022.csv").unlink()
    with pytest.raises(InputError, match="clean_Flights_2022.csv"):
        bench.load(data=folder, split=None, version=None, protocol="official", cache_dir=tmp_path / "c")
    # a malformed record names the file and the record
    folder = _with_db(tmp_path / "bad")
    recs = _records()
    recs[1]["local_constraint"] = "room type = shared"
    with open(folder / "validation.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(recs[0]))
        w.writeheader()
        w.writerows(recs)
    with pytest.raises(InputError, match=r"validation.csv, record 2: local_constraint"):
        bench.load(data=folder, split=None, version=None, protocol="official", cache_dir=tmp_path / "c")
    with pytest.raises(InputError, match="leaderboard"):
        bench.load(data=FIX, split="test", version=None, protocol="official", cache_dir=tmp_path / "c")


def test_load_from_cache_download(bench, tmp_path, monkeypatch):
    """Without --data: the split CSV from the Hub and the database zip, unpacked into the cache."""
    calls = []

    def fake_download(url, dest, tried):
        calls.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if url.endswith("/validation.csv"):
            shutil.copy(FIX / "validation.csv", dest)
        else:
            with zipfile.ZipFile(dest, "w") as zf:
                for p in sorted((FIX / "database").rglob("*")):
                    if p.is_file():
                        zf.write(p, "database/" + p.relative_to(FIX / "database").as_posix())
                zf.writestr("__MACOSX/database/._x", "junk")
        return dest

    monkeypatch.setattr(tp, "try_download", fake_download)
    cache = tmp_path / "cache"
    loaded = bench.load(data=None, split=None, version=None, protocol="official", cache_dir=cache)
    assert calls == [tp.HF_URL.format(version="main", split="validation"), tp.DRIVE_URL]
    assert (cache / "main" / "database" / "restaurants" / "clean_restaurant_2022.csv").is_file()
    assert not (cache / "main" / "database.zip").exists()
    assert bench.score(loaded.samples[0], fenced(gold("1")), "official").correct
    calls.clear()
    bench.load(data=None, split=None, version=None, protocol="official", cache_dir=cache)
    assert calls == [tp.HF_URL.format(version="main", split="validation")]  # cached CSV is re-"fetched" by try_download


def test_drive_confirmation_page_is_reported(bench, tmp_path, monkeypatch):
    def fake_download(url, dest, tried):
        dest.parent.mkdir(parents=True, exist_ok=True)
        if url.endswith(".csv"):
            shutil.copy(FIX / "validation.csv", dest)
        else:
            dest.write_text("<html>Google Drive can't scan this file for viruses.</html>")
        return dest

    monkeypatch.setattr(tp, "try_download", fake_download)
    with pytest.raises(InputError, match="web page instead of the zip.*--data"):
        bench.load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path / "c")
    assert not (tmp_path / "c" / "main" / "database.zip").exists()


# ---------------------------------------------------------------------------- answer parsing

def test_extract_plan_forms():
    plan = gold("1")
    assert extract_plan(fenced(plan))[0] == plan
    assert extract_plan(json.dumps(plan))[0] == plan
    assert extract_plan("Plan:\n" + repr(plan) + "\nEnjoy!")[0] == plan  # Python literal (official SFT models)
    assert extract_plan(json.dumps({"idx": 1, "plan": plan}))[0] == plan  # an official submission line
    decoy = "<think>maybe [{'days': 1, 'current_city': 'Nowhere'}]</think>"
    assert extract_plan(decoy + fenced(plan))[0] == plan
    ref = "I read [{'Description': 'Attractions in Charlotte', 'Content': 'x'}] and [1, 2]. "
    assert extract_plan(ref + json.dumps(plan))[0] == plan
    padded = plan + [{}, {}, {}, {}]
    assert extract_plan(repr(padded))[0] == padded
    for bad in ["", "I cannot plan this trip.", "[]", "```json\n[{\"days\": 1, \"current_city\": \"from A", "[1, 2]",
                "[{'Description': 'x', 'Content': 'y'}]", "[__import__('os').system('true')]"]:
        assert extract_plan(bad)[0] is None, bad


def test_extract_plan_reads_the_last_complete_plan():
    """A draft, then a corrected plan: the answer is the last complete one (README: Answer), fenced or not."""
    draft, final = gold("1"), gold("2")
    assert draft != final
    assert extract_plan(fenced(draft) + "\nCorrected plan:\n" + fenced(final))[0] == final
    assert extract_plan(json.dumps(draft) + "\nCorrected plan:\n" + json.dumps(final))[0] == final
    assert extract_plan(fenced(draft) + "\nCorrected plan: " + repr(final) + "\nDone.")[0] == final
    assert extract_plan(json.dumps(draft) + "\nCorrected plan:\n" + fenced(final))[0] == final
    # a last plan cut off mid-way is not complete: the one before it stands
    cut = fenced(final)[:-20]
    assert extract_plan(fenced(draft) + "\nCorrected plan:\n" + cut)[0] == draft
    # a later fence that is no plan (a note, a reference) does not replace the plan
    assert extract_plan(fenced(final) + "\n```json\n{\"note\": 1}\n```")[0] == final
    # a corrected plan inside a reasoning block is never read
    assert extract_plan(fenced(draft) + "<think>" + fenced(final) + "</think>")[0] == draft


def test_name_city_official_split():
    assert name_city("Cafe Maple Street, Charlotte") == ("Cafe Maple Street", "Charlotte")
    assert name_city("Lux 2 Bed, Loft, Peoria(Illinois)") == ("Lux 2 Bed, Loft", "Peoria")
    assert name_city("Catfish Charlie's, Myrtle Beach; Cost: 14") == ("Catfish Charlie's", "Myrtle Beach; Cost: 14")
    assert name_city("no comma") == ("-", "-")


# ---------------------------------------------------------------------------- per-plan verdicts

def test_gold_plans_pass(bench, samples):
    for idx, s in samples.items():
        v = bench.score(s, fenced(gold(idx)), "official")
        assert v.correct and v.reason == "", (idx, v.reason)
        assert v.parsed == gold(idx)
        # the official fine-tuning targets pad plans with {} up to 7 days: days past the query's are ignored
        padded = gold(idx) + [{}] * (7 - len(gold(idx)))
        assert bench.score(s, repr(padded), "official").correct
    # total cost by hand: Q1 flights 120+135, meals 25+20 / 35+18+28 / 15+30+45, loft 200 x 2 nights
    assert bench.score(samples["1"], fenced(gold("1")), "official").scores["total_cost"] == 871
    # Q2, 2 people: flights (110+140)x2, meals (35+45+15+20+30+25+18)x2, loft 200 x 1 room x 2 nights
    assert bench.score(samples["2"], fenced(gold("2")), "official").scores["total_cost"] == 1276
    # Q3, 2 people: one car (59+10+63), meals 380x2, bungalow 150x2 + studio 120x2
    assert bench.score(samples["3"], fenced(gold("3")), "official").scores["total_cost"] == 1432


@pytest.mark.parametrize("key", CS_KEYS)
def test_each_commonsense_break(bench, samples, key):
    idx, plan = COMMONSENSE_BREAKS[key]
    v = bench.score(samples[idx], fenced(plan), "official")
    assert not v.correct
    failed = [k for k in CS_KEYS if v.scores[k] == 0.0]
    assert failed == [key], (failed, v.reason)
    # eval.py evaluates hard constraints only for complete plans inside the sandbox
    evaluated = key not in ("is_valid_information_in_sandbox", "is_not_absent")
    assert v.scores["hard_evaluated"] == float(evaluated)
    if evaluated:
        assert v.scores["hard_pass"] == 1.0
    assert v.scores["commonsense_pass"] == 0.0


@pytest.mark.parametrize("key", list(HARD_BREAKS))
def test_each_hard_break(bench, samples, key):
    idx, plan = HARD_BREAKS[key]
    v = bench.score(samples[idx], fenced(plan), "official")
    assert all(v.scores[k] == 1.0 for k in CS_KEYS), v.reason
    assert [k for k in tp.HARD if v.scores.get(k) == 0.0] == [key], v.reason
    assert v.scores["commonsense_pass"] == 1.0 and v.scores["hard_pass"] == 0.0 and not v.correct


def test_not_applicable_hard_constraints(bench, samples):
    v = bench.score(samples["1"], fenced(gold("1")), "official")
    assert {k for k in tp.HARD if k in v.scores} == {"valid_cost"}
    v = bench.score(samples["3"], fenced(gold("3")), "official")
    assert {k for k in tp.HARD if k in v.scores} == {"valid_cost", "valid_room_rule", "valid_cuisine",
                                                     "valid_transportation"}


def test_undelivered(bench, samples):
    v = bench.score(samples["2"], "Sorry, I cannot help with that.", "official")
    assert not v.correct and v.parsed is None and v.reason.startswith("not delivered")
    assert v.scores == {"delivered": 0.0}


# ---------------------------------------------------------------------------- official quirks, kept on purpose

def test_official_quirks(bench, samples):
    def cs(idx, plan):
        return bench.score(samples[idx], fenced(plan), "official").scores

    # the last attraction of a string without a closing ';' is dropped (split(';')[:-1]): no repeat seen
    assert cs("1", edit("1", 3, attraction="The Mint Museum, Charlotte"))["is_valid_attractions"] == 1.0
    # pandas .dropna(): Freedom Park has an empty Website field, so it is not in the sandbox
    s = cs("1", edit("1", 2, attraction="The Mint Museum, Charlotte;Freedom Park, Charlotte;"))
    assert s["is_valid_information_in_sandbox"] == 0.0
    # a flight row with a missing field is dropped too
    s = cs("1", edit("1", 1, transportation="Flight Number: F0009999, from Ithaca to Charlotte, Departure Time: 06:00"))
    assert s["is_valid_information_in_sandbox"] == 0.0
    # on a non-travel day the city name is iterated by character: a Rockford restaurant passes in Charlotte
    s = cs("1", edit("1", 2, dinner="Dragon Palace, Rockford"))
    assert s["is_valid_information_in_current_city"] == 1.0 and s["final_pass"] == 1.0
    # cuisine: a meal in the origin city skips the rest of that day's meals (Dragon Palace no longer counts)
    s = cs("3", edit("3", 1, breakfast="Ithaca Bagel Co, Ithaca"))
    assert all(s[k] == 1.0 for k in CS_KEYS) and s["valid_cuisine"] == 0.0
    # minimum nights only when exactly one row matches: "Sunny Room" matches two rows, "Sunny Room Deluxe" one
    two = [dict(d, accommodation="Sunny Room, Peoria") if i in (2, 3) else d for i, d in enumerate(gold("3"))]
    one = [dict(d, accommodation="Sunny Room Deluxe, Peoria") if i in (2, 3) else d for i, d in enumerate(gold("3"))]
    assert cs("3", two)["is_valid_accommodation"] == 1.0
    assert cs("3", one)["is_valid_accommodation"] == 0.0
    # a day object the official script could not read (no current_city) fails the checks that read it
    broken = gold("1")
    del broken[1]["current_city"]
    s = cs("1", broken)
    assert s["delivered"] == 1.0 and s["is_reasonable_visiting_city"] == 0.0 and s["is_not_absent"] == 0.0
    assert s["is_valid_restaurants"] == 1.0 and s["hard_evaluated"] == 0.0


def test_database_lookups():
    db = Database(FIX / "database")
    assert db.distance_cost("Ithaca", "Chicago", "self-driving") is None  # "1 day 2 hours"
    assert db.distance_cost("Charlotte", "Rockford", "taxi") is None  # no duration / distance
    assert db.distance_cost("Chicago", "Rockford", "taxi") == 140  # the first of two rows
    assert db.distance_cost("Rockford(Illinois)", "Peoria", "self-driving") == 10  # int(210 * 0.05)
    assert db.distance_cost("Ithaca", "Charlotte", "self-driving") == 52  # int(1050 * 0.05)
    assert db.flight_price("F0001003") == 110 and db.flight_price("F0009999") is None
    assert db.flight_in_sandbox("F0002002", "Peoria", "Ithaca")
    assert not db.flight_in_sandbox("F0002002", "Ithaca", "Peoria")
    assert db.cities["Peoria"] == "Illinois"
    assert [a.name for a in db.accommodations("Sunny Room", "Peoria")] == ["Sunny Room", "Sunny Room Deluxe"]
    assert db.accommodations("Empty Rules Cottage", "Peoria") == []


# ---------------------------------------------------------------------------- metrics

def test_summary_by_hand(bench, samples):
    """17 plans: 3 gold, 8 commonsense breaks, 5 hard breaks, 1 undelivered."""
    cases = [("1", gold("1")), ("2", gold("2")), ("3", gold("3"))]
    cases += [COMMONSENSE_BREAKS[k] for k in CS_KEYS]
    cases += list(HARD_BREAKS.values())
    ss = [samples[idx] for idx, _ in cases] + [samples["2"]]
    outs = [fenced(plan) for _, plan in cases] + ["no plan today"]
    verdicts = [bench.score(s, o, "official") for s, o in zip(ss, outs, strict=True)]
    res = bench.summarize(ss, verdicts, "official")
    o = res["overall"]
    n = 17
    # commonsense checks passed: gold 3x8, one-check breaks 8x7, hard breaks 5x8, undelivered 0
    cs_pass = 24 + 56 + 40
    # hard constraints set: 9 easy plans x1 (budget), 3 medium x2 (budget, room type), 5 hard x4
    hard_den = 9 * 1 + 3 * 2 + 5 * 4
    # passed: gold 1+2+4; current-city/route/restaurants/attractions/min-nights breaks 1 each (budget);
    # transport conflict 4; sandbox/absent breaks not evaluated; budget break 0; room type 1; room rule,
    # cuisine, transportation breaks 3 each; undelivered 0
    hard_pass = 7 + 5 + 4 + 0 + 1 + 3 * 3
    assert (o["commonsense_passed"], o["hard_passed"], o["hard_total"]) == (cs_pass, hard_pass, hard_den)
    assert o["n"] == n and o["delivered"] == 16
    assert o["delivery_rate"] == pytest.approx(100 * 16 / 17)
    assert o["commonsense_micro"] == pytest.approx(100 * 120 / 136)
    assert o["commonsense_macro"] == pytest.approx(100 * 8 / 17)  # gold 3 + hard breaks 5
    assert o["hard_micro"] == pytest.approx(100 * 26 / 35)
    assert o["hard_macro"] == pytest.approx(100 * 9 / 17)  # gold 3 + five breaks whose budget holds + conflict
    assert o["final_pass_rate"] == pytest.approx(100 * 3 / 17)
    paper = (100 * 120 / 136 + 100 * 8 / 17 + 100 * 26 / 35 + 100 * 9 / 17) / 4
    assert o["paper_score"] == pytest.approx(paper)
    c = res["categories"]
    assert list(c) == ["easy", "medium", "hard"]
    e, m, h = c["easy"], c["medium"], c["hard"]
    assert (e["n"], m["n"], h["n"]) == (9, 3, 5)
    assert e["commonsense_micro"] == pytest.approx(100 * 65 / 72)
    assert e["commonsense_macro"] == pytest.approx(100 * 2 / 9)
    assert e["hard_micro"] == pytest.approx(100 * 6 / 9) and e["hard_macro"] == pytest.approx(100 * 6 / 9)
    assert e["final_pass_rate"] == pytest.approx(100 / 9)
    assert m["delivery_rate"] == pytest.approx(100 * 2 / 3)
    assert m["commonsense_micro"] == pytest.approx(100 * 16 / 24) and m["commonsense_macro"] == pytest.approx(200 / 3)
    assert m["hard_micro"] == pytest.approx(50.0) and m["hard_macro"] == pytest.approx(100 / 3)
    assert h["commonsense_micro"] == pytest.approx(100 * 39 / 40) and h["commonsense_macro"] == pytest.approx(80.0)
    assert h["hard_micro"] == pytest.approx(100 * 17 / 20) and h["hard_macro"] == pytest.approx(40.0)
    assert h["final_pass_rate"] == pytest.approx(20.0)
    k = res["constraints"]
    assert k["Within Sandbox"] == {"pass": 15, "total": 17}
    assert k["Complete Information"] == {"pass": 15, "total": 17}
    assert k["Non-conf. Transportation"] == {"pass": 15, "total": 17}
    assert k["Budget"] == {"pass": 13, "total": 17}
    assert k["Room Type"] == {"pass": 1, "total": 3}
    assert k["Transportation"] == {"pass": 4, "total": 5}
    assert res["headline"] == "final_pass_rate" and "paper_reference" not in res
    assert res["by_days"]["5"]["n"] == 5


def test_gold_summary_and_paper_protocol(bench, samples):
    ss = list(samples.values())
    verdicts = [bench.score(s, fenced(gold(s.id)), "paper") for s in ss]
    res = bench.summarize(ss, verdicts, "paper")
    for metric in ("delivery_rate", "commonsense_micro", "commonsense_macro", "hard_micro", "hard_macro",
                   "final_pass_rate", "paper_score"):
        assert res["overall"][metric] == 100.0
    assert res["headline"] == "paper_score"
    assert res["paper_reference"] == {"GenEnv 7B": 16.6, "Qwen2.5-7B-Instruct": 14.3}


def test_bad_database_column_is_an_input_error(tmp_path):
    shutil.copytree(FIX / "database", tmp_path / "database")
    path = tmp_path / "database" / "restaurants" / "clean_restaurant_2022.csv"
    path.write_text(path.read_text().replace("Cuisines", "Cuisine", 1))
    with pytest.raises(InputError, match="clean_restaurant_2022.csv lacks the column.*Cuisines"):
        Database(tmp_path / "database").restaurant("Subway", "Charlotte")


def test_degenerate_plans_are_not_delivered_never_a_crash():
    for output in ['[{"days": ' + "1" * 5000 + "}]", "[{'days': " + "[" * 600 + "]" * 600 + "}]", "[" * 3000]:
        assert extract_plan(output)[0] is None


# ---------------------------------------------------------------------------- the release's training split

def test_fields_are_derived_from_a_training_query_text():
    from genenv_cli.families.travelplanner.release import derive_fields

    states = {"Denver": "Colorado", "Aspen": "Colorado", "Boise": "Idaho"}
    ref = {"Attractions in Denver": [], "Accommodations in Aspen": [], "Flight from Boise to Denver on 2022-03-11": [],
           "Self-driving from Denver to Aspen": "x", "Taxi from Aspen to Boise": "x"}
    text = ("Can you help with a 5-day plan for a party of 5? We're setting off from Boise to explore 2 cities in "
            "Colorado from March 11th to March 15th, 2022, with a budget of $15,100. We'll be bringing our pets. "
            "We hope to find Indianapolis-style Mexican and Indian food. Entire rooms would be ideal, and we do "
            "not plan to drive ourselves.")
    got = derive_fields(text, ref, states, "q1")
    assert got == {"org": "Boise", "dest": "Colorado", "days": 5, "visiting_city_number": 2,
                   "date": ["2022-03-11", "2022-03-12", "2022-03-13", "2022-03-14", "2022-03-15"],
                   "people_number": 5, "budget": 15100, "level": "hard",
                   "local_constraint": {"house rule": "pets", "cuisine": ["Mexican", "Indian"],
                                        "room type": "entire room", "transportation": "no self-driving"}}
    for broken, why in ((text.replace("$15,100", "$15,100 or $9,000"), "budget"),
                        (text.replace("bringing our pets", "bringing pets to parties"), "more than one house rule"),
                        (text.replace("a party of 5", "us"), "group size"),
                        (text.replace("5-day", "4-day"), r"says \[4\] days")):
        with pytest.raises(InputError, match=why):
            derive_fields(broken, ref, states, "q1")
