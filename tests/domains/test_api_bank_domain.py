"""The `api-bank` domain: its environment parser (each broken item rejected for its reason) and its reader of the
release's dialogue files. The contract every domain keeps (seeds self-consistent, gold scores 1, the score equal
to `genenv evaluate --bench api-bank`'s verdict item for item) is test_domain_contract.py."""

import json
import shutil

import pytest

import paths
from domain_cases import seed_context
from genenv_cli.core.errors import InputError
from genenv_cli.domains.base import Reject
from genenv_cli.families.api_bank import APIBank

DOMAIN = "api-bank"
FIXTURES = paths.FIXTURES / "api_bank"
STOCK = {"name": "QueryStock", "description": "Price of a stock on a date.",
         "input_parameters": {"stock_code": {"type": "str", "description": "Code."},
                              "date": {"type": "str", "description": "Date, %Y-%m-%d."}},
         "output_parameters": {"stock_price": {"type": "float", "description": "Price."}}}
ROOMS = {"name": "BookRooms", "description": "Book rooms.",
         "input_parameters": {"hotel": {"type": "str", "description": "Hotel."},
                              "rooms": {"type": "int", "description": "Rooms."}},
         "output_parameters": {}}


def item(params=None, apis=None, name="QueryStock", user="What was AAPL worth on 2023-03-02?"):
    return json.dumps({"apis": apis or [STOCK], "dialogue": [
        {"role": "User", "text": user},
        {"role": "API", "api_name": name, "param_dict": params if params is not None else
         {"stock_code": "AAPL", "date": "2023-03-02"}}]})


def test_builtin_seeds_are_enough_and_an_unknown_api_scores_zero(dom):
    seeds = dom.seeds("train") + dom.seeds("validation")
    assert len(seeds) >= 16
    for s in seeds:
        assert dom.score(s.payload, "[NoSuchApi(x='1')]").reward == 0.0


def test_env_output_good_item(dom):
    payload, shape = dom.parse_env_output("Sure:\n" + item(), seed_context(dom))
    assert shape == "level-1" and payload["k"] == 0
    assert dom.score(payload, "[QueryStock(stock_code='AAPL', date='2023-03-02')]").reward == 1.0
    assert dom.score(payload, "[QueryStock(stock_code='AAPL', date='2023-03-03')]").reward == 0.0
    rooms = item({"hotel": "Inn", "rooms": "2"}, [ROOMS], "BookRooms", "Book 2 rooms at the Inn.")
    assert dom.parse_env_output(rooms, seed_context(dom))[1] == "level-1"


@pytest.mark.parametrize("text, reason", [
    ("nothing", "parse: no JSON object"),
    ('{"apis": []}', "parse: the item has no dialogue"),
    (item(name="QueryWeather"), "no API description describes"),
    (item({"stock_code": "AAPL", "date": "2023-03-02", "exchange": "X"}), "no input parameter 'exchange'"),
    (item({"stock_code": "AAPL"}), "leaves out QueryStock's parameter(s) date"),
    (item({"hotel": "Inn", "rooms": "two"}, [ROOMS], "BookRooms"), "declared int"),
    (item({"hotel": "Inn", "rooms": 2}, [{**ROOMS, "input_parameters": {"hotel": {"type": "str"}, "rooms": {"type": "integer"}}}],
          "BookRooms"), "types must be one of"),
    (json.dumps({"apis": [STOCK], "dialogue": [{"role": "User", "text": "hi there"}]}), "must end with the API call"),
    (json.dumps({"apis": [STOCK], "dialogue": [{"role": "API", "api_name": "QueryStock",
                                                 "param_dict": {"stock_code": "A", "date": "2023-01-01"}}]}),
     "no User turn"),
])
def test_env_output_broken_items_are_rejected_with_reasons(dom, text, reason):
    with pytest.raises(Reject) as exc:
        dom.parse_env_output(text, seed_context(dom))
    assert reason in str(exc.value)


def test_read_seeds_reads_one_item_per_evaluation_point_of_the_release_folder(dom):
    suite = APIBank()
    loaded = suite.load(data=FIXTURES, split=None, version=None, protocol="official", cache_dir=FIXTURES)
    tasks = dom.read_seeds(FIXTURES)
    assert {t.id for t in tasks} == {s.id for s in loaded.samples}
    assert {t.shape for t in tasks} == {"level-1", "level-2", "level-3"}


def test_read_seeds_names_the_bad_line(dom, tmp_path):
    folder = tmp_path / "level-1-given-desc"
    folder.mkdir()
    src = FIXTURES / "lv1-lv2-samples" / "level-1-given-desc" / "BookHotel-level-1-1.jsonl"
    lines = src.read_text().splitlines()
    (folder / src.name).write_text("\n".join([lines[0], '{"role": "Robot", "text": "x"}'] + lines[1:]) + "\n")
    with pytest.raises(InputError, match=r"BookHotel-level-1-1.jsonl, line 2"):
        dom.read_seeds(folder / src.name)
    shutil.copy(src, folder / src.name)
    assert [t.shape for t in dom.read_seeds(folder / src.name)] == ["level-1"]
