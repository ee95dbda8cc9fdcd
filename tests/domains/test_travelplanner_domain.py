"""The `travelplanner` training domain: hand-written items in the official record format with their own sandbox,
the self-consistency rules (each broken item rejected for its reason), agreement with the `travelplanner`
evaluate suite on every constraint's score (plans broken on purpose), `genenv init --seeds` from the official
files, and the built-in seeds' spread. The contract every domain keeps (seeds self-consistent, gold scores 1, the
reward equal to the suite's verdict) is test_domain_contract.py."""

from __future__ import annotations

import copy
import csv
import json
import shutil

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.domains.base import EnvContext, Reject
from genenv_cli.families.travelplanner.benchmark import TravelPlanner
from genenv_cli.families.travelplanner.domain import travelplanner_sandbox
from paths import FIXTURES, SRC
from travel_item import ITEM

DOMAIN = "travelplanner"
FIX = FIXTURES / "travelplanner"
GOLD = json.loads((FIX / "gold_plans.json").read_text())
SEEDS = SRC / "genenv_cli" / "families" / "travelplanner" / "data" / "travelplanner_seeds.jsonl"

# A 3-day, one-city, easy item written by hand in the official record format, with its own sandbox.

PLAN = [
    {"days": 1, "current_city": "from Tulsa to Omaha",
     "transportation": "Flight Number: F7000001, from Tulsa to Omaha, Departure Time: 07:00, Arrival Time: 08:30",
     "breakfast": "Morning Crust, Omaha", "attraction": "Riverfront Walk, Omaha;", "lunch": "Bison Grill, Omaha",
     "dinner": "Lotus Garden, Omaha", "accommodation": "Prairie Guest Room, Omaha"},
    {"days": 2, "current_city": "Omaha", "transportation": "-", "breakfast": "Casa Verde, Omaha",
     "attraction": "Henry Doorly Zoo, Omaha;", "lunch": "Trattoria Nove, Omaha", "dinner": "Spice Route, Omaha",
     "accommodation": "Prairie Guest Room, Omaha"},
    {"days": 3, "current_city": "from Omaha to Tulsa",
     "transportation": "Flight Number: F7000002, from Omaha to Tulsa, Departure Time: 18:00, Arrival Time: 19:30",
     "breakfast": "-", "attraction": "Joslyn Hall, Omaha;", "lunch": "-", "dinner": "-", "accommodation": "-"},
]


def fenced(plan) -> str:
    return "The plan:\n```json\n" + json.dumps(plan) + "\n```"


def item(**changes):
    obj = copy.deepcopy(ITEM)
    for key, value in changes.items():
        if "." in key:
            obj["database"][key.split(".")[1]] = value
        else:
            obj[key] = value
    return obj


CTX = EnvContext(parent_id="t", parent_shape="easy", parent=ITEM, parent_p=None, stats=None, frontier=[])


def test_a_good_item_is_accepted_and_shaped_by_level(dom):
    payload, shape = dom.parse_env_output("Here it is:\n```json\n" + json.dumps(ITEM) + "\n```", CTX)
    assert shape == "easy" and payload == ITEM
    assert dom.check_payload(ITEM) is None
    assert json.loads(dom.render_item(ITEM)) == ITEM
    assert dom.dedup_text(ITEM) == ITEM["query"]


def test_the_environment_sees_at_most_12_rows_a_city(dom):
    many = [{"Name": f"Diner {i}", "City": "Omaha", "Cuisines": "American", "Average Cost": 10 + i} for i in range(30)]
    big = item(**{"database.restaurants": many})
    shown = json.loads(dom.render_item(big))
    assert shown["database"]["restaurants"] == many[:12]
    assert {k: v for k, v in shown.items() if k != "database"} == {k: v for k, v in big.items() if k != "database"}


BROKEN = {
    "parse: no JSON object": None,
    "parse: the item lacks database": {k: v for k, v in ITEM.items() if k != "database"},
    "parse: level must be one of easy, medium, hard": item(level="extreme"),
    "parse: field 'days' must be a whole number": item(days="three"),
    "invalid: days must be 3, 5 or 7": item(days=4, date=["2022-04-02", "2022-04-03", "2022-04-04", "2022-04-05"]),
    "invalid: a 3-day trip visits 1 city(ies), not 2": item(visiting_city_number=2),
    "invalid: the dates must be consecutive days": item(date=["2022-04-02", "2022-04-03", "2022-04-05"]),
    "invalid: date must be a list of 3 dates": item(date=["2022-04-02", "2022-04-03"]),
    "invalid: an easy query is for one person": item(local_constraint=dict(ITEM["local_constraint"], cuisine=["Chinese"])),
    "invalid: a medium query sets exactly one": item(level="medium", people_number=2, local_constraint=dict(
        ITEM["local_constraint"], transportation="no flight")),
    "invalid: house rule 'dancing' is not one of": item(level="medium", local_constraint=dict(
        ITEM["local_constraint"], **{"house rule": "dancing"})),
    "invalid: the query text does not state the budget 900": item(query=ITEM["query"].replace("$900", "$1,000")),
    "invalid: the query text does not name its dest 'Omaha'": item(query="A 3-day trip from Tulsa, $900."),
    "invalid: destination 'Omaha' is not in database.cities": item(**{"database.cities": {"Tulsa": "Oklahoma",
                                                                                         "Lincoln": "Nebraska"}}),
    "invalid: database.restaurants row 2 has no 'Average Cost'": item(**{"database.restaurants": [
        r if i != 1 else {k: v for k, v in r.items() if k != "Average Cost"}
        for i, r in enumerate(ITEM["database"]["restaurants"])]}),
    "invalid: database.flights row 1 has no 'Price'": item(**{"database.flights": [
        dict(f, Price="NA") for f in ITEM["database"]["flights"]]}),
    "invalid: Omaha has no accommodation meeting": item(level="medium", local_constraint=dict(
        ITEM["local_constraint"], **{"house rule": "parties"}), query=ITEM["query"],
        **{"database.accommodations": [dict(r, house_rules="No parties")
                                       for r in ITEM["database"]["accommodations"]]}),
    "invalid: no destination restaurant serves French": item(level="medium", local_constraint=dict(
        ITEM["local_constraint"], cuisine=["French"])),
    "invalid: no plan fits the budget": item(budget=200, query=ITEM["query"].replace("$900", "$200")),
    "invalid: no allowed way from Tulsa": item(level="hard", local_constraint=dict(
        ITEM["local_constraint"], transportation="no flight", cuisine=["Chinese"]), **{"database.distance": []}),
    "invalid: Omaha has no attractions": item(**{"database.attractions": []}),
}


@pytest.mark.parametrize("reason", list(BROKEN))
def test_a_broken_item_is_rejected_with_its_reason(dom, reason):
    text = "no json here" if BROKEN[reason] is None else json.dumps(BROKEN[reason])
    with pytest.raises(Reject) as exc:
        dom.parse_env_output(text, CTX)
    assert str(exc.value).startswith(reason), str(exc.value)


def test_the_budget_bound_counts_rooms_for_every_person(dom):
    # four people need two rooms of occupancy 2 (Prairie, 80) for each of two nights
    four = item(level="medium", people_number=4, local_constraint=dict(ITEM["local_constraint"],
                                                                      **{"room type": "private room"}))
    bound = 31 + 31 + 2 * 2 * 80  # one car each way (int(620 km * 0.05)) is cheaper than 4 x (110 + 120) in flights
    assert dom.check_payload(dict(four, budget=bound, query=ITEM["query"].replace("$900", f"${bound}"))) is None
    low = dict(four, budget=bound - 1, query=ITEM["query"].replace("$900", f"${bound - 1}"))
    assert dom.check_payload(low).startswith("no plan fits the budget")


# ---------------------------------------------------------------------------- scoring

def test_a_good_plan_scores_1_and_broken_plans_0(dom):
    assert dom.score(ITEM, fenced(PLAN)).reward == 1.0
    assert dom.agent_messages(ITEM)[1]["content"].startswith("Given information: [{'Description': 'Flight from Tulsa")
    over = copy.deepcopy(PLAN)
    over[0]["accommodation"] = over[1]["accommodation"] = "Old Market Penthouse, Omaha"
    repeated = copy.deepcopy(PLAN)
    repeated[1]["lunch"] = "Bison Grill, Omaha"
    invented = copy.deepcopy(PLAN)
    invented[1]["dinner"] = "Imaginary Bistro, Omaha"
    for plan, why in ((over, "Budget"), (repeated, "Diverse Restaurants"), (invented, "Within Sandbox")):
        s = dom.score(ITEM, fenced(plan))
        assert s.reward == 0.0 and s.valid and why in s.error, s.error
    s = dom.score(ITEM, "I cannot plan this.")
    assert s.reward == 0.0 and not s.valid


def test_a_hand_written_item_scores_as_the_suite_scores_it_from_a_split_file(dom, tmp_path):
    """The item as a split-file record beside its sandbox, loaded and scored by the evaluate suite."""
    root = travelplanner_sandbox(ITEM["database"], tmp_path)
    rec = {k: v for k, v in ITEM.items() if k != "database"}
    rec["reference_information"] = dom.sample(ITEM).messages[1]["content"].split("Given information: ")[1].split(
        "\nQuery: ")[0]
    (root / "validation.jsonl").write_text(json.dumps(rec) + "\n")
    suite = TravelPlanner()
    (sample,) = suite.load(data=root / "validation.jsonl", split=None, version=None, protocol="official",
                           cache_dir=tmp_path / "cache").samples
    assert sample.messages == dom.sample(ITEM).messages
    over = [dict(d, accommodation="Old Market Penthouse, Omaha") if d["days"] < 3 else d for d in PLAN]
    for out in (fenced(PLAN), fenced(over), fenced(PLAN[:2]), "no plan"):
        want = suite.score(sample, out, "official")
        got = dom.verdict(ITEM, out)
        assert (got.correct, got.scores) == (want.correct, want.scores)


def _fixture_breaks() -> list[tuple[str, list[dict]]]:
    out = [(i, copy.deepcopy(p)) for i, p in GOLD.items()]
    lunch = copy.deepcopy(GOLD["1"])
    lunch[2]["lunch"] = lunch[0]["lunch"]
    out.append(("1", lunch))
    room = copy.deepcopy(GOLD["2"])
    room[0]["accommodation"] = room[1]["accommodation"] = "Shared Bunk in Dilworth, Charlotte"
    out.append(("2", room))
    fly = copy.deepcopy(GOLD["3"])
    fly[0]["transportation"] = "Flight Number: F0002001, from Ithaca to Rockford, Departure Time: 09:00, Arrival Time: 11:30"
    out.append(("3", fly))
    return out


def test_items_imported_from_the_official_files_score_as_the_suite_scores_them(dom, tmp_path):
    suite = TravelPlanner()
    samples = suite.load(data=FIX, split=None, version=None, protocol="official", cache_dir=tmp_path).samples
    by_id = {s.id: s for s in samples}
    payloads = {s.id: dom.seed_from_sample(s).payload for s in samples}
    assert all(dom.check_payload(p) is None for p in payloads.values())
    assert [dom.seed_from_sample(s).shape for s in samples] == ["easy", "medium", "hard"]
    results = []
    for idx, plan in _fixture_breaks():
        want = suite.score(by_id[idx], fenced(plan), "official")
        got = dom.verdict(payloads[idx], fenced(plan))
        assert (got.correct, got.scores) == (want.correct, want.scores), (idx, got.reason, want.reason)
        assert dom.agent_messages(payloads[idx]) == by_id[idx].messages
        results.append(want.correct)
    assert results == [True, True, True, False, False, False]  # the gold plans pass, each break fails


# ---------------------------------------------------------------------------- seeds

def test_the_builtin_seeds_spread_over_levels_and_lengths(dom):
    rows = [json.loads(x) for x in SEEDS.read_text().splitlines()]
    assert 12 <= len(rows) <= 20
    for r in rows:
        assert r["shape"] == r["payload"]["level"]
    for split in ("train", "validation"):
        assert {s.shape for s in dom.seeds(split)} == {"easy", "medium", "hard"}
    assert {r["payload"]["days"] for r in rows} == {3, 5, 7}


def test_init_with_official_files_and_a_malformed_record(tmp_path):
    runner = CliRunner()
    src = tmp_path / "tp"
    shutil.copytree(FIX, src)
    (src / "validation.csv").rename(src / "train.csv")  # the fixture's queries, as a training split
    for seeds_from in (src / "train.csv", src):  # the split file, or the folder holding it
        run = tmp_path / f"run-{seeds_from.name}"
        res = runner.invoke(app, ["init", str(run), "--domain", "travelplanner", "--seeds", str(seeds_from)])
        assert res.exit_code == 0, res.output
        seeds = [json.loads(x) for x in (run / "seeds" / "seeds.jsonl").read_text().splitlines()]
        assert sorted(s["shape"] for s in seeds) == ["easy", "hard", "medium"]
    with open(src / "train.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    rows[1]["level"] = "extreme"
    with open(src / "train.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = runner.invoke(app, ["init", str(tmp_path / "run2"), "--domain", "travelplanner", "--seeds",
                              str(src / "train.csv")])
    assert res.exit_code != 0
    assert "train.csv, record 2" in res.output and "level must be one of" in res.output, res.output
    assert not (tmp_path / "run2" / "seeds").exists()


def test_init_refuses_the_evaluation_splits(tmp_path):
    """The domain trains on the training split only: validation and test queries are what the suite evaluates."""
    runner = CliRunner()
    for name in ("validation.csv", "test.csv"):
        shutil.copy(FIX / "validation.csv", tmp_path / name)
        res = runner.invoke(app, ["init", str(tmp_path / f"run-{name}"), "--domain", "travelplanner", "--seeds",
                                  str(tmp_path / name)])
        assert res.exit_code != 0 and "training split only" in res.output, res.output
        assert not (tmp_path / f"run-{name}" / "seeds").exists()


def test_open_databases_are_shared_and_bounded(tmp_path):
    """One instance per folder while in use; a long run's many small item databases do not pile up in memory."""
    from genenv_cli.families.travelplanner.benchmark import open_database

    first = open_database(tmp_path / "db-first")
    assert open_database(tmp_path / "db-first") is first
    for i in range(64):
        open_database(tmp_path / f"db-{i}")
    assert open_database(tmp_path / "db-first") is not first
