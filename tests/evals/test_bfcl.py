"""BFCL: loader, prompt, decoder, AST checker and summaries on hand-written fixtures in BFCL's own layout
(tests/fixtures/bfcl), plus the real data of the bfcl-eval wheel when it is installed.

Expected numbers are worked out by hand from the rules (see each test); the fixture verdicts were also
checked once against BFCL's own checker and tree-sitter parsers outside this repository.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys

import pytest

from genenv_cli.core.callparse import standardize_string
from genenv_cli.core.errors import InputError
from genenv_cli.families.bfcl import BFCL
from genenv_cli.families.bfcl import categories as bfcl_categories
from genenv_cli.families.bfcl import release_files as bfcl_files
from genenv_cli.families.bfcl.ast_checker import check_calls
from genenv_cli.families.bfcl.calls import BCall, DecodeError
from genenv_cli.families.bfcl.decode import decode_answer
from genenv_cli.families.bfcl.multi_turn import render_calls
from genenv_cli.families.bfcl.values import java_value, js_value
from paths import FIXTURES

FIX = FIXTURES / "bfcl"
BENCH = BFCL()


def load(tmp_path, data=FIX, split=None, version=None, protocol="official"):
    return BENCH.load(data=data, split=split, version=version, protocol=protocol, cache_dir=tmp_path / "cache")


def run(samples, preds, protocol="official"):
    verdicts = [BENCH.score(s, preds[s.id], protocol) for s in samples]
    return verdicts, BENCH.summarize(samples, verdicts, protocol)


# ------------------------------------------------------------------ predictions for the v4 fixtures

GOLD = {
    "simple_python_0": "[calculate_triangle_area(base=10, height=5)]",  # unit omitted: "" is allowed
    "simple_python_1": '[get_weather(city="Paris, France", temperature_unit="celsius", days=3)]',
    "simple_python_2": "[compute_mean(numbers=[1.5, 2.0, 3.5], round_to=2)]",
    "simple_python_3": "[convert_currency(amount=100, from_currency='USD', to_currency='EUR')]",  # int for float
    "simple_java_0": '[ConfigManager.setTimeout(service="paymentService", timeoutMs=3000L, retry=true)]',
    "simple_java_1": "[MatrixUtils.sum(values=new int[]{1, 2, 3}, scale=0.5)]",
    "simple_java_2": "[Inventory.addAll(ids=new ArrayList<>(Arrays.asList(101L, 102L)), store=mainStore)]",
    "simple_javascript_0": '[validateForm(formId="signupForm", strict=true, maxErrors=5)]',
    "simple_javascript_1": "[plotSeries(points=[1.5, 2.5], options={color: 'red', width: 2})]",
    "multiple_0": '[get_stock_price(ticker="AAPL")]',
    "multiple_1": "[area_square(side=4)]",
    "parallel_0": '[get_weather(city="Rome"), get_weather(city="Paris")]',  # any order
    "parallel_1": "[book_table(restaurant=\"Chez Marie\", people=2, time=\"19:00\"), "
                  "book_table(restaurant=\"Luigi's\", people=4, time=\"20:30\")]",
    "parallel_multiple_0": '[lookup_word(word="serendipity"), convert_units(value=5, from_unit="miles", to_unit="km")]',
    "parallel_multiple_1": '[send_email(to="bob@example.com", subject="Agenda"), '
                           'schedule_meeting(attendees=["Ann", "Bob"], date="2024-05-02", duration_minutes=30)]',
    "irrelevance_0": "None of the given functions can tell who painted the Mona Lisa.",
    "irrelevance_1": "I cannot answer that with the available functions.",
    # genenv's own tool-call format is accepted too
    "live_simple_0-0-0": '<tool_call>{"name": "search_hotels", "arguments": {"city": "Lisbon", "stars": 4}}</tool_call>',
    "live_simple_1-1-0": "[set_reminder(text='call mom', minutes=20)]",
    "live_multiple_0-0-0": '[Flights_1_Search(origin="Boston, MA", destination="Denver", date="2024-07-04")]',
    "live_multiple_1-1-0": '[search_hotels(city="Austin", pets_allowed=True)]',
    "live_parallel_0-0-0": "[set_reminder(text='stretch', minutes=30), set_reminder(text='drink water', minutes=60)]",
    "live_parallel_multiple_0-0-0": '[Flights_1_Search(origin="Oslo", destination="Bergen", date="2024-09-01"), '
                                    'search_hotels(city="Oslo")]',
    "live_irrelevance_0-0-0": "Sorry, I can only search for hotels.",
    "live_irrelevance_1-1-0": "[]",  # an empty list holds no call
    "live_relevance_0-0-0": '[Flights_1_Search(origin="Chicago", destination="Miami", date="2024-06-01")]',
    "live_relevance_1-1-0": "[set_reminder(text='dentist', minutes=60)]",
}

# one defect per changed item; items marked "ok" carry a variation the rules accept
DEFECT = dict(GOLD)
DEFECT.update({
    "simple_python_0": "[calculate_triangle_area(base=12, height=5)]",                 # wrong value
    "simple_python_1": '[get_weather(temperature_unit="celsius", days=3)]',           # missing required
    "simple_python_2": "[compute_mean(numbers=[1.5, 2, 3.5], round_to=2)]",            # int inside float list
    "simple_python_3": '[convert_currency(amount=100.0, from_currency="usd", to_currency="E.U.R")]',  # ok
    "simple_java_0": '[ConfigManager.setTimeout(service="paymentService", timeoutMs=3000, retry=true)]',  # no L
    "simple_java_1": "[MatrixUtils.sum(values=new int[]{1, 2, 4}, scale=0.5)]",        # wrong element
    "simple_javascript_0": '[validateForm(formId="signupForm", strict=True, maxErrors=5)]',  # not JS
    "simple_javascript_1": "[plotSeries(points=[1.5, 2.5], options={color: 'blue', width: 2})]",
    "multiple_1": "[area_circle(radius=4)]",                                           # wrong function
    "parallel_0": '[get_weather(city="Paris")]',                                       # missing call
    "parallel_1": "[book_table(restaurant=\"Luigi's\", people=4, time=\"20:30\"), "
                  "book_table(restaurant=\"Chez Marie\", people=2, time=\"19:00\")]",  # ok: swapped order
    "parallel_multiple_0": '[lookup_word(word="serendipity"), convert_units(value=5, from_unit="miles", '
                           'to_unit="km"), lookup_word(word="luck")]',                 # extra call
    "parallel_multiple_1": '[send_email(to="bob@example.com", subject="Agenda"), schedule_meeting('
                           'attendees=["Bob", "Ann"], date="2024-05-02", duration_minutes=30)]',  # list order
    "irrelevance_0": "[area_circle(radius=1)]",                                        # a call
    "live_simple_0-0-0": '[search_hotels(city="Lisbon", stars=4, breakfast=True)]',  # unknown parameter
    "live_multiple_0-0-0": '[Flights_1_Search(origin="Boston", destination="Denver")]',  # missing required
    "live_parallel_0-0-0": "[set_reminder(text='stretch', minutes=30), set_reminder(text='drink water', minutes=45)]",
    "live_irrelevance_0-0-0": "[]",                                                    # ok
    "live_irrelevance_1-1-0": "[set_reminder(text='math', minutes=1)]",                # a call
    "live_relevance_0-0-0": "I need more details about where you want to go.",         # no call
})


def test_fixture_loads_in_official_layout(tmp_path):
    data = load(tmp_path)
    counts: dict[str, int] = {}
    for s in data.samples:
        counts[s.category] = counts.get(s.category, 0) + 1
    assert counts == {"simple_python": 4, "simple_java": 3, "simple_javascript": 2, "multiple": 2, "parallel": 2,
                      "parallel_multiple": 2, "irrelevance": 2, "live_simple": 2, "live_multiple": 2,
                      "live_parallel": 1, "live_parallel_multiple": 1, "live_irrelevance": 2,
                      "live_relevance": 2}
    assert {s.id for s in data.samples} == set(GOLD)
    assert data.version == "v4 (local files)" and len(data.fingerprint) == 64
    by_id = {s.id: s for s in data.samples}

    s = by_id["simple_python_0"]
    assert [m["role"] for m in s.messages] == ["system", "user"]
    system = s.messages[0]["content"]
    assert system.startswith("You are an expert in composing functions.")
    assert ("[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"
            in system)
    listing = system.split("Here is a list of functions in json format that you can invoke.\n", 1)[1]
    docs = json.loads(listing)
    assert docs[0]["name"] == "calculate_triangle_area"
    assert docs[0]["description"].endswith(" Note that the provided function is in Python 3 syntax.")
    assert s.tools == docs and s.gold == {"possible_answer": [
        {"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]}

    # a question's own system message is appended to BFCL's after a blank line
    live = by_id["live_simple_0-0-0"]
    assert [m["role"] for m in live.messages] == ["system", "user"]
    assert live.messages[0]["content"].endswith("\n\nYou are a travel assistant.")

    # Java documents are shown with string types, the real type named in the description
    java = by_id["simple_java_2"]
    shown = java.tools[0]["parameters"]["properties"]
    assert {p["type"] for p in shown.values()} == {"string"}
    assert shown["ids"]["description"].endswith("This is Java ArrayList type parameter in string representation. "
                                                "The list elements are of type long; they are not in string "
                                                "representation.")
    assert "items" not in shown["ids"]
    assert java.meta["functions"][0]["parameters"]["properties"]["ids"]["type"] == "ArrayList"
    js = by_id["simple_javascript_1"].tools[0]["parameters"]["properties"]["options"]
    assert "properties" not in js and "following schema" in js["description"]
    assert by_id["irrelevance_0"].gold == {"expect": "no_call"}
    assert by_id["live_relevance_0-0-0"].gold == {"expect": "any_call"}


def test_gold_predictions_score_100(tmp_path):
    data = load(tmp_path)
    verdicts, summary = run(data.samples, GOLD)
    assert [(v.correct, v.reason) for v in verdicts] == [(True, "")] * len(verdicts)
    assert {c: x["accuracy"] for c, x in summary["categories"].items()} == dict.fromkeys(summary["categories"], 100.0)
    for key in ("accuracy", "non_live_acc", "live_acc", "non_live_ast_acc", "simple_ast_acc", "live_ast_acc",
                "irrelevance_acc", "relevance_acc"):
        assert summary["overall"][key] == 100.0, key
    assert summary["overall"]["n"] == 27 and "incomplete" not in summary


def test_one_defect_predictions_score_the_expected_values(tmp_path):
    data = load(tmp_path)
    verdicts, summary = run(data.samples, DEFECT)
    cats = {c: (x["correct"], x["n"]) for c, x in summary["categories"].items()}
    assert cats == {
        "simple_python": (1, 4), "simple_java": (1, 3), "simple_javascript": (0, 2), "multiple": (1, 2),
        "parallel": (1, 2), "parallel_multiple": (0, 2), "irrelevance": (1, 2), "live_simple": (1, 2),
        "live_multiple": (1, 2), "live_parallel": (0, 1), "live_parallel_multiple": (1, 1),
        "live_irrelevance": (1, 2), "live_relevance": (1, 2)}
    o = summary["overall"]
    simple = (25.0 + 100 / 3 + 0.0) / 3                       # unweighted over python, java, javascript
    assert o["simple_ast_acc"] == pytest.approx(simple)
    assert o["non_live_ast_acc"] == pytest.approx((simple + 50.0 + 50.0 + 0.0) / 4)
    assert o["non_live_acc"] == pytest.approx(o["non_live_ast_acc"])   # v4: irrelevance not included
    assert o["live_ast_acc"] == pytest.approx(100 * (1 + 1 + 0 + 1) / (2 + 2 + 1 + 1))  # weighted by count
    assert o["live_acc"] == pytest.approx(50.0)
    assert o["irrelevance_acc"] == pytest.approx((50.0 + 50.0) / 2)
    assert o["relevance_acc"] == pytest.approx(50.0)
    assert o["accuracy"] == pytest.approx(100 * 10 / 27)
    reasons = {s.id: v.reason for s, v in zip(data.samples, verdicts, strict=True)}
    assert reasons["simple_python_1"].startswith("[simple_function_checker:missing_required]")
    assert reasons["simple_python_2"].startswith("[type_error:nested]")
    assert reasons["simple_java_0"].startswith("[type_error:simple]")
    assert reasons["live_simple_0-0-0"].startswith("[simple_function_checker:unexpected_param]")
    assert reasons["parallel_multiple_0"].startswith("[parallel_function_checker_no_order:wrong_count]")
    assert reasons["irrelevance_0"].startswith("[irrelevance_error:decoder_success]")


def test_summary_lists_unsupported_and_incomplete(tmp_path):
    data = load(tmp_path, split="live_simple,java")
    assert {s.category for s in data.samples} == {"live_simple", "simple_java"}
    _, summary = run(data.samples, GOLD)
    assert summary["not_supported"]["categories"] == BFCL.unsupported_categories["v4"]
    assert "multi_turn_base" in summary["not_supported"]["categories"]
    assert summary["incomplete"]["live_ast_acc"] == ["live_multiple", "live_parallel", "live_parallel_multiple"]
    assert "non_live_ast_acc" not in summary["overall"] and "live_ast_acc" not in summary["overall"]
    with pytest.raises(InputError, match="not supported yet"):
        load(tmp_path, split="multi_turn_base")
    with pytest.raises(InputError, match="unknown BFCL category"):
        load(tmp_path, split="simple_cobol")
    with pytest.raises(InputError, match="missing .*BFCL_v4_simple_python.json"):
        load(tmp_path, data=FIX / "v3", split="simple_python", version="v4")
    one = load(tmp_path, data=FIX / "v3" / "BFCL_v3_java.json")  # one question file, answers beside it
    assert [s.id for s in one.samples] == ["java_0"] and one.version == "v3 (local files)"
    with pytest.raises(InputError, match="does not match the --data file"):
        load(tmp_path, data=FIX / "v3" / "BFCL_v3_java.json", split="live")


# ------------------------------------------------------------------ rules, one at a time


def _sample(tmp_path, sid):
    return next(s for s in load(tmp_path).samples if s.id == sid)


@pytest.mark.parametrize(("sid", "output", "ok"), [
    # string normalisation: case, spaces and ,./-_*^ are ignored
    ("simple_python_1", '[get_weather(city="paris,france", days=3)]', True),
    ("simple_python_1", '[get_weather(city="Paris", days=3.0)]', False),           # float for integer
    ("simple_python_1", '[get_weather(city="Lyon", days=3)]', False),
    ("simple_python_1", '[get_weather(city="Paris")]', False),   # 'days' lists no "": it must be given
    ("simple_python_1", '[get_weather(city=Paris, days=3)]', True),                # a bare name is its text
    ("simple_python_1", "[get_weather(city='Paris', days=3, temperature_unit='celsius')]", True),
    ("simple_python_1", "[get_weather(city='Paris', days=1+2)]", True),             # literal arithmetic
    ("simple_python_1", "get_weather(city='Paris', days=3)", True),                 # brackets are added
    ("simple_python_1", "```python\n[get_weather(city='Paris', days=3)]\n```", False),  # BFCL cannot decode
    ("simple_python_1", "Sure! [get_weather(city='Paris', days=3)]", False),
    ("simple_python_1", "<think>Paris, 3 days.</think>[get_weather(city='Paris', days=3)]", True),
    ("simple_python_1", '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}</tool_call>',
     True),
    ("simple_python_1", "[get_weather(city='Paris', days=3), get_weather(city='Paris', days=3)]", False),
    ("simple_python_0", "[calculate_triangle_area(base=10, height=5, unit='units')]", True),
    ("simple_python_0", "[calculate_triangle_area(base=10, height=5, unit='cm')]", False),
    ("simple_python_0", "[calculate_triangle_area(10, height=5)]", False),          # positional: ignored
    ("simple_python_2", "[compute_mean(numbers=[1.5, 2.0, 3.5])]", True),          # round_to may be omitted
    ("simple_python_2", "[compute_mean(numbers=(1.5, 2.0, 3.5), round_to=2)]", False),  # tuple is not a list
    ("multiple_0", "[get_stock_price(ticker='AAPL', exchange='NASDAQ')]", True),
    ("multiple_0", "[get_company_news(ticker='AAPL')]", False),
    ("parallel_multiple_1", '[schedule_meeting(attendees=["Ann", "Bob"], date="2024-05-02", duration_minutes=30), '
                            'send_email(to="bob@example.com", subject="Agenda", body="hi")]', False),  # body: "" only
    ("simple_java_0", '[ConfigManager.setTimeout(service=paymentService, timeoutMs="3000L", retry="true")]', True),
    ("simple_java_0", '<tool_call>{"name": "ConfigManager.setTimeout", "arguments": {"service": "paymentService", '
                      '"timeoutMs": "3000L", "retry": "true"}}</tool_call>', True),
    ("simple_java_0", '<tool_call>{"name": "ConfigManager.setTimeout", "arguments": {"service": "paymentService", '
                      '"timeoutMs": 3000, "retry": true}}</tool_call>', False),       # Java values are strings
    ("simple_java_0", '[ConfigManager.setTimeout(service="payment Service", timeoutMs=3000L, retry=true)]', True),
    ("simple_java_0", '[ConfigManager.setTimeout(service=payment Service, timeoutMs=3000L, retry=true)]', False),
    ("simple_java_1", "[MatrixUtils.sum(values=new int[] { 1,2,3 }, scale=0.5)]", True),
    ("simple_java_1", "[MatrixUtils.sum(values=new int[3], scale=0.5)]", False),
    ("simple_javascript_0", "[validateForm(formId='signupForm', strict=true)]", True),
    ("simple_javascript_1", "[plotSeries(points=new Array(1.5, 2.5), options={color: \"red\"})]", True),
])
def test_ast_rules(tmp_path, sid, output, ok):
    verdict = BENCH.score(_sample(tmp_path, sid), output, "official")
    assert verdict.correct is ok, verdict.reason


def test_standardize_string_and_converters():
    assert standardize_string("April 1, 2024") == standardize_string("april 1 2024") == "april12024"
    assert standardize_string("O'Neil_-*^./") == 'o"neil'
    assert java_value("42", "integer") == 42 and java_value("42L", "long") == 42
    assert java_value("42", "long") == "42" and java_value("1.5f", "float") == 1.5
    assert java_value("true", "boolean") is True and java_value("True", "boolean") == "True"
    assert java_value("new String[]{a, b}", "Array", "String") == ["a", "b"]
    assert java_value('new ArrayList<>(Arrays.asList("a", "b"))', "ArrayList", "String") == ["a", "b"]
    assert java_value('new HashMap<String, Object>() {{ put("k", 1); put("v", "x"); }}', "HashMap") == {"k": 1, "v": "x"}
    assert js_value("'abc'", "String") == "abc" and js_value("12n", "Bigint") == 12
    assert js_value("[1, 2]", "array", "integer") == [1, 2]
    assert js_value("{a: 'x', b: [1, 2]}", "dict") == {"a": "x", "b": [1, 2]}


def test_decoder_keeps_bfcl_quirks():
    # Java: an object creation keeps its ", "-joined arguments and loses an anonymous class body
    calls, form = decode_answer('[X.y(m=new HashMap<String, Object>() {{ put("a", 1); }}, s="t u")]', "java")
    assert form == "prompt" and calls[0].args == {"m": "new HashMap<String,Object>()", "s": "t u"}
    calls, _ = decode_answer("[X.y(a=new int[] {1, 2}, l=new ArrayList<>(Arrays.asList(1,  2)))]", "java")
    assert calls[0].args == {"a": "new int[]{1,2}", "l": "new ArrayList<>(Arrays.asList(1,  2))"}
    calls, _ = decode_answer("[f(x=[1, 2], y='s', z={k: 1})]", "javascript")
    assert calls[0].args == {"x": "[1, 2]", "y": "s", "z": "{k: 1}"}
    calls, _ = decode_answer("[f(a=g(b=1), c=h(), d=v[0], e=-3, t=(1, 2))]")
    assert calls[0].args == {"a": {"g": {"b": 1}}, "c": "h()", "d": "v[0]", "e": -3, "t": (1, 2)}
    for bad in ("[f(x=a.b)]", "[f(x=lambda: 1)]", "[f(x=[i for i in y])]", "[1, 2]", "hello there"):
        with pytest.raises(DecodeError):
            decode_answer(bad)
    with pytest.raises(DecodeError):
        decode_answer("<tool_call>{not json}</tool_call>")


def test_check_calls_parallel_is_greedy_and_order_free():
    doc = [{"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}]
    possible = [{"f": {"x": [1, 2]}}, {"f": {"x": [1]}}]
    # greedy matching, as BFCL does: answer 0 takes the first call that fits (x=1), leaving x=2 for answer 1
    assert check_calls(doc, [BCall("f", {"x": 1}), BCall("f", {"x": 2})], possible, "python", "parallel")[0] is False
    assert check_calls(doc, [BCall("f", {"x": 2}), BCall("f", {"x": 1})], possible, "python", "parallel")[0] is True


# ------------------------------------------------------------------ versions and data sources


def test_v3_layout_names_and_summary_rules(tmp_path):
    data = load(tmp_path, data=FIX / "v3")  # version detected from the file names
    assert data.version == "v3 (local files)"
    assert {s.id: s.category for s in data.samples} == {
        "simple_0": "simple_python", "simple_1": "simple_python", "java_0": "simple_java",
        "javascript_0": "simple_javascript", "multiple_0": "multiple", "parallel_0": "parallel",
        "parallel_multiple_0": "parallel_multiple", "irrelevance_0": "irrelevance"}
    system = data.samples[0].messages[0]["content"]
    assert "Here is a list of functions in JSON format that you can invoke.\n[{'name': " in system  # v3 listing
    preds = {"simple_0": "[calculate_triangle_area(base=10, height=5)]",
             "simple_1": "[convert_currency(amount=10, from_currency='USD', to_currency='EUR')]",   # wrong value
             "java_0": "[MatrixUtils.sum(values=new int[]{1, 2, 3}, scale=0.5)]",
             "javascript_0": "[validateForm(formId='signupForm', strict=true)]",
             "multiple_0": "[area_square(side=4.0)]",
             "parallel_0": "[book_table(restaurant='Chez Marie', people=2, time='19:00')]",          # missing call
             "parallel_multiple_0": "[convert_units(value=5, from_unit='mi', to_unit='km'), lookup_word(word='serendipity')]",
             "irrelevance_0": "[area_circle(radius=2)]"}                                              # a call
    _, summary = run(data.samples, preds)
    o = summary["overall"]
    simple = (50.0 + 100.0 + 100.0) / 3
    assert o["non_live_ast_acc"] == pytest.approx((simple + 100.0 + 0.0 + 100.0) / 4)
    assert o["non_live_acc"] == pytest.approx((simple + 100.0 + 0.0 + 100.0 + 0.0) / 5)  # v3 adds irrelevance
    assert "live_acc" not in o and summary["version"] == "v3"
    assert summary["not_supported"]["categories"] == BFCL.unsupported_categories["v3"]


def test_download_goes_to_the_cache_with_pinned_urls(tmp_path, monkeypatch):
    requested = []

    def fake_download(url, dest, tried):
        requested.append(url)
        rel = url.split("/bfcl_eval/data/", 1)[1]
        src = FIX / "v3" / rel
        if not src.exists():
            tried.append(f"{url}: 404")
            return None
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
        return dest

    monkeypatch.setattr(bfcl_files, "wheel_data_dir", lambda: None)
    monkeypatch.setattr(bfcl_files, "try_download", fake_download)
    data = load(tmp_path, data=None, split="simple_python,java", version="v3")
    assert requested == [bfcl_categories.RAW_URL.format(commit=bfcl_categories.COMMITS["v3"], path=p) for p in (
        "BFCL_v3_simple.json", "possible_answer/BFCL_v3_simple.json", "BFCL_v3_java.json",
        "possible_answer/BFCL_v3_java.json")]
    assert data.version == "v3 (gorilla@cd9429c)" and len(data.samples) == 3
    assert (tmp_path / "cache" / "v3" / "possible_answer" / "BFCL_v3_java.json").is_file()
    requested.clear()
    assert len(load(tmp_path, data=None, split="simple_python,java", version="v3").samples) == 3
    assert requested == []  # served from the cache
    # nothing reachable: the error names the sources and --data
    with pytest.raises(InputError, match=r"no bfcl data available .*404.*--data PATH"):
        load(tmp_path, data=None, split="live", version="v3")


def test_bad_data_names_file_and_line(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(FIX, root)
    path = root / "BFCL_v4_multiple.json"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n{broken\n")
    with pytest.raises(InputError, match=r"BFCL_v4_multiple.json, line 2: not valid JSON"):
        load(tmp_path, data=root, split="multiple")
    path.write_text(json.dumps({"id": "multiple_0", "question": "hi", "function": []}) + "\n")
    with pytest.raises(InputError, match=r"line 1 \(id multiple_0\): \"question\" must be"):
        load(tmp_path, data=root, split="multiple")
    (root / "possible_answer" / "BFCL_v4_parallel.json").unlink()
    with pytest.raises(InputError, match="missing possible answers"):
        load(tmp_path, data=root, split="parallel")
    with pytest.raises(InputError, match="unknown BFCL version"):
        load(tmp_path, version="v9")


# ------------------------------------------------------------------ paper protocol


PAPER_GOLD = {
    "multi_turn_long_context_0#turn0": "[cd(folder='docs'), mkdir(dir_name='old')]",
    "multi_turn_long_context_0#turn1": "[mv(source='notes.txt', destination='old')]",
    "multi_turn_long_context_0#turn2": "[cd(folder='old'), ls()]",
    "multi_turn_long_context_1#turn0": "[mean(numbers=[3, 5, 10])]",
    "multi_turn_long_context_1#turn1": "I can't book taxis with these tools.",
}
PAPER_DEFECT = {
    "multi_turn_long_context_0#turn0": "[mkdir(dir_name='old'), cd(folder='docs')]",      # ok, but not ordered
    "multi_turn_long_context_0#turn1": "[mv(source='notes.txt', destination='docs')]",    # wrong value
    "multi_turn_long_context_0#turn2": "[cd('old'), ls(a=False)]",                        # ok: default, positional
    "multi_turn_long_context_1#turn0": "[mean(numbers=[3.0, 5.0, 10.0])]",                # ok: 3 == 3.0
    "multi_turn_long_context_1#turn1": "[mean(numbers=[1])]",                             # a call, none expected
}


def test_paper_protocol_turns_history_and_scores(tmp_path):
    data = load(tmp_path, protocol="paper")
    assert [s.id for s in data.samples] == list(PAPER_GOLD)
    s = data.samples[2]
    assert s.category == "multi_turn_long_context" and s.meta["turn"] == 2
    assert [(m["role"], m["content"]) for m in s.messages[1:]] == [
        ("user", "Go into the 'docs' folder and make a directory called 'old'."),
        ("assistant", "[cd(folder='docs'), mkdir(dir_name='old')]"),
        ("user", "Move 'notes.txt' into it."),
        ("assistant", "[mv(source='notes.txt', destination='old')]"),
        ("user", "Now show me what is in 'old'.")]
    assert s.gold["calls"] == [{"name": "cd", "arguments": {"folder": "old"}}, {"name": "ls", "arguments": {}}]
    system = s.messages[0]["content"]
    assert '"name": "mkdir"' in system and '"name": "mean"' not in system  # only the involved classes
    assert data.samples[4].messages[-2] == {"role": "assistant", "content": "[mean(numbers=[3, 5, 10])]"}

    _, summary = run(data.samples, PAPER_GOLD, "paper")
    assert summary["overall"]["accuracy"] == 100.0 and summary["overall"]["ordered_accuracy"] == 100.0
    verdicts, summary = run(data.samples, PAPER_DEFECT, "paper")
    assert [v.correct for v in verdicts] == [True, False, True, True, False]
    assert summary["overall"]["accuracy"] == pytest.approx(100 * 3 / 5)
    assert summary["overall"]["ordered_accuracy"] == pytest.approx(100 * 2 / 5)
    assert summary["overall"]["n"] == 5 and summary["overall"]["dialogues"] == 2
    assert summary["paper_reference"] == {"GenEnv 7B": 41.8, "Qwen2.5-7B-Instruct": 7.0}
    assert "mv(destination='docs', source='notes.txt')" in verdicts[1].reason
    with pytest.raises(InputError, match="paper protocol scores only"):
        load(tmp_path, protocol="paper", split="live")


# ------------------------------------------------------------------ the real data (bfcl-eval wheel)

# Items of bfcl-eval 2026.3.23 (BFCL v4) whose gold-derived answer (first allowed value of each parameter,
# optional parameters whose first value is "" left out) BFCL's own checker rejects -- verified against the
# official checker and parsers; this scorer gives the same verdicts:
KNOWN_GOLD_FAILURES = {
    "simple_python_200": "the first allowed value of the required 'fuel_efficiency' is \"\", so it is left out",
    "simple_java_36": "ArrayList with element type 'any': BFCL converts every element to a string, the "
                      "possible answer holds 42 and True",
    "simple_java_65": "same as simple_java_36 (True elements)",
    "simple_java_64": "HashMap possible answer {'format': 'epoch_millis'} is not a map of allowed-value lists",
    "parallel_multiple_26": "the possible answer gives 'type', which bank.calculate_balance does not document",
    "live_simple_106-63-0": "required parameters with an empty allowed-value list: nothing can match",
    "live_simple_112-68-0": "required parameters with an empty allowed-value list: nothing can match",
    "live_multiple_144-56-0": "first allowed value of the required 'perPage' is \"\"",
    "live_multiple_507-149-4": "the required 'origin_airport' only allows \"\"",
    "live_multiple_834-178-9": "first allowed value of the required 'track' is \"\"",
    "live_multiple_862-181-3": "the possible answer gives 'journey_start_time', which Trains_1_FindTrains does "
                               "not document",
    "live_multiple_964-207-0": "the possible answer names 'question'; the function requires 'statement'",
}
BELOW_99 = {"simple_java": 97.0}  # three of its hundred possible answers cannot pass (above)


def _gold_args(doc, params):
    props = doc["parameters"]["properties"]
    args = {}
    for name, allowed in params.items():
        if not allowed or allowed[0] == "":
            continue
        value, spec = allowed[0], props.get(name, {})
        kind, item = spec.get("type"), (spec.get("items") or {}).get("type")
        if kind in ("dict", "HashMap") and isinstance(value, dict):  # one level: first allowed per key
            value = {k: v[0] for k, v in value.items() if not (isinstance(v, list) and v and v[0] == "")}
        elif kind in ("array", "ArrayList", "Array") and item == "dict" and isinstance(value, list):
            value = [{k: v[0] for k, v in d.items() if v and v[0] != ""} for d in value]
        args[name] = value
    return args


def _java_text(v, kind, item):
    if isinstance(v, str) and kind not in ("Array", "ArrayList", "HashMap"):
        return v
    if kind in ("long",):
        return f"{v}L"
    if kind == "float":
        return f"{v}f"
    if kind == "boolean":
        return "true" if v else "false"
    if kind in ("Array", "ArrayList") and not isinstance(v, str):
        if kind == "Array":  # BFCL keeps the quotes of String array elements, so they are written bare
            return "new Object[]{" + ", ".join(_java_text(x, item, None) for x in v) + "}"
        quote = item in ("String", "char")
        return "new ArrayList<>(Arrays.asList(" + ", ".join(
            f'"{x}"' if quote else _java_text(x, item, None) if item else json.dumps(x) for x in v) + "))"
    if kind == "HashMap" and isinstance(v, dict):
        return "new HashMap<String, Object>() {{ " + " ".join(
            f'put("{k}", {json.dumps(x)});' for k, x in v.items()) + " }}"
    return str(v)


def _js_text(v, kind, item):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str) or kind in ("String", "any"):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return json.dumps(v)  # arrays and objects in JavaScript literal syntax


@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="bfcl-eval is not installed")
@pytest.mark.slow
def test_real_data_gold_answers_pass(tmp_path):
    """Each possible answer of the installed wheel's data turned into an answer: Python categories in BFCL
    syntax; Java/JavaScript as genenv tool calls whose values are the Java/JavaScript source strings (as a
    function-calling model gives them). Every AST category scores >= 99% except simple_java (97%), and the
    failing items are exactly those BFCL's own checker rejects (KNOWN_GOLD_FAILURES)."""
    data = load(tmp_path, data=None)  # the wheel, found without importing it
    assert "bfcl_eval" not in sys.modules
    assert data.version.startswith("v4 (bfcl-eval ")
    failures, tally = {}, {}
    for s in data.samples:
        language = s.meta["language"]
        if "relevance" in s.category:
            out = "I cannot help with that." if "irrelevance" in s.category else (
                "[" + s.meta["functions"][0]["name"] + "(x=1)]")
        else:
            docs = {f["name"]: f for f in s.meta["functions"]}
            calls = []
            for answer in s.gold["possible_answer"]:
                name, params = next(iter(answer.items()))
                args = _gold_args(docs[name], params)
                if language != "python":
                    props = docs[name]["parameters"]["properties"]
                    text = _java_text if language == "java" else _js_text
                    args = {k: text(v, props[k]["type"], (props[k].get("items") or {}).get("type"))
                            for k, v in args.items()}
                calls.append(BCall(name, args))
            if language == "python":
                out = render_calls(calls)
            else:
                out = "".join("<tool_call>" + json.dumps(c.to_json()) + "</tool_call>" for c in calls)
        verdict = BENCH.score(s, out, "official")
        t = tally.setdefault(s.category, [0, 0])
        t[0] += verdict.correct
        t[1] += 1
        if not verdict.correct:
            failures[s.id] = verdict.reason
    assert set(failures) <= set(KNOWN_GOLD_FAILURES), {k: v for k, v in failures.items()
                                                      if k not in KNOWN_GOLD_FAILURES}
    for cat, (ok, n) in tally.items():
        assert 100 * ok / n >= BELOW_99.get(cat, 99.0), (cat, ok, n)

    paper = load(tmp_path, data=None, protocol="paper")
    assert len(paper.samples) == 734
    for s in paper.samples:
        out = render_calls([BCall(c["name"], c["arguments"]) for c in s.gold["calls"]])
        assert BENCH.score(s, out, "paper").correct, s.id
        raw = "[" + ", ".join(s.gold["ground_truth"]) + "]"  # BFCL's own strings, positional arguments too
        assert BENCH.score(s, raw, "paper").correct, s.id
