"""The `api-bank` domain: API-Bank points in the release's format, the self-consistency check, the environment
parser, and its score agreeing with `genenv evaluate --bench api-bank` item for item."""

import json
import shutil
from pathlib import Path

import pytest

from genenv_cli.domains import get_domain
from genenv_cli.domains.api_bank import gold_answer
from genenv_cli.domains.base import EnvContext, Reject
from genenv_cli.errors import InputError
from genenv_cli.evals.api_bank import APIBank

FIXTURES = Path(__file__).parent / "fixtures" / "api_bank"
STOCK = {"name": "QueryStock", "description": "Price of a stock on a date.",
         "input_parameters": {"stock_code": {"type": "str", "description": "Code."},
                              "date": {"type": "str", "description": "Date, %Y-%m-%d."}},
         "output_parameters": {"stock_price": {"type": "float", "description": "Price."}}}
ROOMS = {"name": "BookRooms", "description": "Book rooms.",
         "input_parameters": {"hotel": {"type": "str", "description": "Hotel."},
                              "rooms": {"type": "int", "description": "Rooms."}},
         "output_parameters": {}}


@pytest.fixture(scope="module")
def dom():
    return get_domain("api-bank")


def ctx(dom):
    s = dom.seeds("train")[0]
    return EnvContext(s.id, s.shape, s.payload, None, None, [])


def item(params=None, apis=None, name="QueryStock", user="What was AAPL worth on 2023-03-02?"):
    return json.dumps({"apis": apis or [STOCK], "dialogue": [
        {"role": "User", "text": user},
        {"role": "API", "api_name": name, "param_dict": params if params is not None else
         {"stock_code": "AAPL", "date": "2023-03-02"}}]})


def test_builtin_seeds_are_self_consistent_and_gold_scores_one(dom):
    seeds = dom.seeds("train") + dom.seeds("validation")
    assert len(seeds) >= 16 and dom.seeds("validation")
    for s in seeds:
        assert dom.check_payload(s.payload) is None, s.id
        assert dom.score(s.payload, gold_answer(s.payload)).reward == 1.0, s.id
        assert dom.score(s.payload, "[NoSuchApi(x='1')]").reward == 0.0


def test_env_output_good_item(dom):
    payload, shape = dom.parse_env_output("Sure:\n" + item(), ctx(dom))
    assert shape == "level-1" and payload["k"] == 0
    assert dom.score(payload, "[QueryStock(stock_code='AAPL', date='2023-03-02')]").reward == 1.0
    assert dom.score(payload, "[QueryStock(stock_code='AAPL', date='2023-03-03')]").reward == 0.0
    rooms = item({"hotel": "Inn", "rooms": "2"}, [ROOMS], "BookRooms", "Book 2 rooms at the Inn.")
    assert dom.parse_env_output(rooms, ctx(dom))[1] == "level-1"


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
        dom.parse_env_output(text, ctx(dom))
    assert reason in str(exc.value)


def _outputs(payload):
    call = [t for t in payload["dialogue"] if t["role"] == "API"][payload["k"]]
    args = call["param_dict"]
    outs = [gold_answer(payload), "", "No call needed.", "[" + call["api_name"] + "()]",
            "[{}({})]".format(call["api_name"], ", ".join(f"{k}='{v}'" for k, v in args.items())),
            "[{}({})]".format(call["api_name"], ", ".join(f"{k}='{str(v).upper()}'" for k, v in args.items())),
            gold_answer(payload) + gold_answer(payload)]
    if args:
        first = next(iter(args))
        outs.append("[{}({})]".format(call["api_name"], ", ".join(f"{k}='{v}'" for k, v in args.items() if k != first)))
    return outs


def test_domain_score_equals_the_suite_verdict_item_for_item(dom):
    suite = APIBank()
    loaded = suite.load(data=FIXTURES, split=None, version=None, protocol="official", cache_dir=FIXTURES)
    by_id = {s.id: s for s in loaded.samples}
    tasks = dom.read_seeds(FIXTURES)
    assert {t.id for t in tasks} == set(by_id) and {t.shape for t in tasks} == {"level-1", "level-2", "level-3"}
    checked = 0
    for t in tasks:
        sample = by_id[t.id]
        assert dom.sample(t.payload).messages == sample.messages, t.id
        for out in _outputs(t.payload):
            assert dom.score(t.payload, out).reward == float(suite.score(sample, out, "official").correct), (t.id, out)
            checked += 1
    assert checked > 100


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
