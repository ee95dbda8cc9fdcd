"""API-Bank: loading the official layouts, the official and paper (ToolRL) scorers, against hand-written
fixtures (tests/fixtures/api_bank). Expected numbers are computed by hand in each test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from genenv_cli.core.callparse import Call
from genenv_cli.core.errors import InputError
from genenv_cli.families.api_bank import APIBank
from genenv_cli.families.api_bank import release_files as ab_files
from genenv_cli.families.api_bank.prompts import OFFICIAL_PROMPT, PAPER_FINAL_USER
from genenv_cli.families.api_bank.scoring import check_official
from paths import FIXTURES

FIX = FIXTURES / "api_bank"
L1 = FIX / "lv1-lv2-samples" / "level-1-given-desc"
L2 = FIX / "lv1-lv2-samples" / "level-2-toolsearcher"

OFFICIAL_IDS = [
    "AddAlarm-GetUserToken-level-2-1#0", "AddAlarm-GetUserToken-level-2-1#1", "AddMeeting-level-1-1#0",
    "AddMeeting-level-1-1#1", "BookHotel-level-1-1#0",
    "AddReminder-level-3-1#0", "AddReminder-level-3-1#1", "AddReminder-level-3-1#2",
    "QueryStock-level-3-1#0", "QueryStock-level-3-1#1",
    "level-3-0#0", "level-3-0#1", "level-3-0#2", "level-3-0#3",
]


def load(protocol="official", data=FIX, split=None):
    return APIBank().load(data=data, split=split, version=None, protocol=protocol, cache_dir=Path("/nonexistent"))


def py_call(name, args):
    return "[{}({})]".format(name, ", ".join(f"{k}={v!r}" for k, v in args.items()))


def run(bench, samples, outputs, protocol):
    by_id = {s.id: s for s in samples}
    assert set(outputs) == set(by_id)
    verdicts = [bench.score(by_id[i], outputs[i], protocol) for i in by_id]
    return bench.summarize(list(by_id.values()), verdicts, protocol), dict(zip(by_id, verdicts, strict=True))


# ---------------------------------------------------------------- loading

def test_ids_levels_and_gold():
    data = load()
    assert [s.id for s in data.samples] == OFFICIAL_IDS
    assert [s.category for s in data.samples] == ["level-1"] * 5 + ["level-2"] * 5 + ["level-3"] * 4
    by = {s.id: s for s in data.samples}
    assert by["BookHotel-level-1-1#0"].gold == {"name": "BookHotel", "arguments": {
        "hotel_name": "Harbor Inn", "check_in_time": "2023-05-10", "check_out_time": "2023-05-12",
        "room_count": "1", "adult_count": "2", "child_count": "0"}}
    assert by["AddReminder-level-3-1#0"].gold["retrieves"] == ["GetUserToken", "AddReminder"]
    assert by["level-3-0#3"].gold == {"name": "GetWeather", "arguments": {"latitude": 45.76, "longitude": 4.84}}
    assert data.version.endswith("API docs: apis/ folder")
    assert len(data.fingerprint) == 64


def test_official_prompt_level1():
    s = {s.id: s for s in load().samples}["AddAlarm-GetUserToken-level-2-1#1"]
    system = s.messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith(OFFICIAL_PROMPT)
    docs = [json.loads(line) for line in system["content"][len(OFFICIAL_PROMPT):].splitlines()]
    # every API of the dialogue, in order of first use, described from apis/*.py (implicit concatenation read)
    assert [d["name"] for d in docs] == ["GetUserToken", "AddAlarm"]
    assert docs[1]["description"] == "Set an alarm at a given time."
    assert s.messages[1:] == [
        {"role": "user", "content": "Please wake me up at 6:30 on June 3rd."},
        {"role": "assistant", "content": "Sure. I need to log in first: what are your username and password?"},
        {"role": "user", "content": "Username mia, password sunflower7."},
        {"role": "system", "content": "[GetUserToken(username='mia', password='sunflower7')] Response: "
                                      "{'token': 'tk-mia-001'}"},
        {"role": "assistant", "content": "Logged in. Setting the alarm now."},
    ]
    assert [t["function"]["name"] for t in s.tools] == ["GetUserToken", "AddAlarm"]
    assert s.tools[0]["function"]["parameters"]["required"] == ["username", "password"]


def test_official_prompt_levels_2_and_3_offer_only_toolsearcher():
    by = {s.id: s for s in load().samples}
    for sid in ("AddReminder-level-3-1#2", "level-3-0#3"):
        docs = by[sid].messages[0]["content"][len(OFFICIAL_PROMPT):].splitlines()
        assert [json.loads(d)["name"] for d in docs] == ["ToolSearcher"]
    lv3 = by["level-3-0#1"].messages
    assert lv3[1] == {"role": "user", "content": "Find the coordinates of Lyon and tell me the weather there."}
    assert lv3[2]["role"] == "system" and lv3[2]["content"].startswith("[ToolSearcher(keywords='Geocoding')] Response: ")


def test_paper_samples_and_prompt():
    data = load("paper")
    ids = [s.id for s in data.samples]
    assert ids == [i for i in OFFICIAL_IDS if i not in (
        "AddReminder-level-3-1#0", "QueryStock-level-3-1#0", "level-3-0#0", "level-3-0#2")]
    s = {s.id: s for s in data.samples}["AddReminder-level-3-1#2"]
    system, user = s.messages[0]["content"], s.messages[1]["content"]
    # tools = what the dialogue's ToolSearcher returned, described as that result describes them
    assert "1. Name: GetUserToken\nDescription: Get the user token.\n" in system
    assert "2. Name: AddReminder\nDescription: Add a reminder with content and time.\n" in system
    assert "ToolSearcher" not in system and "ToolSearcher" not in user
    assert user.startswith("**Dialogue Records History**\n<user>Remind me to call the dentist")
    assert '<tool_call>\n{"name": "GetUserToken", "parameters": {"username": "leo", "password": "pine88"}}\n' \
           "</tool_call>\n<obs> {'token': 'tk-leo-3'} </obs>" in user
    assert user.endswith(PAPER_FINAL_USER + "\n")


def test_layouts(tmp_path):
    assert [s.id for s in load(data=L1).samples] == OFFICIAL_IDS[:5]
    assert {s.category for s in load(data=L2).samples} == {"level-2"}
    assert [s.id for s in load(data=L2 / "QueryStock-level-3-1.jsonl").samples] == OFFICIAL_IDS[8:10]
    assert [s.id for s in load(data=FIX / "test-data" / "level-3.json").samples] == OFFICIAL_IDS[10:]
    assert [s.id for s in load(data=FIX / "lv1-lv2-samples").samples] == OFFICIAL_IDS  # parent release found
    assert [s.id for s in load(split="level-2").samples] == OFFICIAL_IDS[5:10]
    # without apis/ the docs come from ToolSearcher results, else a stub of the parameters the data uses
    shutil.copytree(FIX / "lv1-lv2-samples", tmp_path / "lv1-lv2-samples")
    data = load(data=tmp_path)
    assert "reconstructed" in data.version
    s = {s.id: s for s in data.samples}["BookHotel-level-1-1#0"]
    doc = json.loads(s.messages[0]["content"][len(OFFICIAL_PROMPT):])
    assert doc["name"] == "BookHotel" and list(doc["input_parameters"]) == list(s.gold["arguments"])


def test_bad_data(tmp_path):
    bad = tmp_path / "level-1-given-desc"
    bad.mkdir()
    (bad / "X-level-1-1.jsonl").write_text('{"role": "User", "text": "hi"}\n{"role": "API", "api_name": "X"}\n')
    with pytest.raises(InputError, match=r"X-level-1-1.jsonl, line 2: an API turn needs"):
        load(data=bad)
    (bad / "X-level-1-1.jsonl").write_text('{"role": "User", "text": "hi"}\nnot json\n')
    with pytest.raises(InputError, match=r"line 2: not valid JSON"):
        load(data=bad)
    other = tmp_path / "mydialogues"
    other.mkdir()
    (other / "a.jsonl").write_text('{"role": "User", "text": "hi"}\n')
    with pytest.raises(InputError, match="cannot tell the API-Bank level"):
        load(data=other)
    with pytest.raises(InputError, match="does not exist"):
        load(data=tmp_path / "missing")
    with pytest.raises(InputError, match="no split"):
        load(split="level-9")


def test_no_data_no_network(monkeypatch, tmp_path):
    def offline(url, dest, tried):
        tried.append(f"{url}: offline")
        return None
    monkeypatch.setattr(ab_files, "try_download", offline)
    with pytest.raises(InputError, match="--data PATH") as err:
        APIBank().load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path)
    assert "api.github.com" in str(err.value) and "offline" in str(err.value)


def test_download_layout(monkeypatch, tmp_path):
    """The downloader lists the folders, fetches each file into the release layout and marks completion."""
    calls = []

    def fake(url, dest, tried):
        calls.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if url.startswith("https://api.github.com/"):
            folder = url.split("/contents/api-bank/")[1].split("?")[0]
            src = FIX / folder
            assert f"?ref={ab_files.COMMIT}" in url
            dest.write_text(json.dumps([{"name": p.name, "type": "file"} for p in sorted(src.iterdir())]))
        elif url == ab_files._LEVEL3_URL:
            shutil.copy(FIX / "test-data" / "level-3.json", dest)
        else:
            assert url.startswith(f"https://raw.githubusercontent.com/{ab_files.REPO}/{ab_files.COMMIT}/api-bank/")
            shutil.copy(FIX / url.split(f"{ab_files.COMMIT}/api-bank/")[1], dest)
        return dest

    monkeypatch.setattr(ab_files, "try_download", fake)
    data = APIBank().load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path)
    assert [s.id for s in data.samples] == OFFICIAL_IDS
    assert data.version.startswith(ab_files.VERSION) and data.fingerprint == load().fingerprint
    n = len(calls)
    assert n == 3 + 3 + 2 + 3 + 1  # 3 listings, 3 + 2 dialogues, 3 api files, level-3.json
    APIBank().load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path)
    assert len(calls) == n  # the completion marker: nothing fetched again


# ---------------------------------------------------------------- official scoring

def test_gold_scores_100_in_both_forms():
    bench, samples = APIBank(), load().samples
    for form in ("python", "tool_call"):
        outs = {}
        for s in samples:
            g = s.gold
            outs[s.id] = (py_call(g["name"], g["arguments"]) if form == "python" else
                          "<tool_call>" + json.dumps({"name": g["name"], "arguments": g["arguments"]}) + "</tool_call>")
        summary, _ = run(bench, samples, outs, "official")
        assert summary["overall"] == {"accuracy": 100.0, "correct": 14, "n": 14}
        assert {k: v["accuracy"] for k, v in summary["categories"].items()} == {
            "level-1": 100.0, "level-2": 100.0, "level-3": 100.0}
        assert summary["errors"] == {}


def test_one_defect_per_item_official():
    bench, samples = APIBank(), load().samples
    outs = {
        # level 1: 2 of 5 pass
        "AddAlarm-GetUserToken-level-2-1#0": py_call("GetUserToken", {"username": "mia", "password": "sunflower8"}),
        "AddAlarm-GetUserToken-level-2-1#1": py_call("AddAlarm", {"token": "tk-mia-001"}),               # missing
        "BookHotel-level-1-1#0": "[BookHotel(hotel_name='Harbor Inn', check_in_time='2023-05-10', "
                                 "check_out_time='2023-05-12', room_count=1, adult_count=2, child_count=0)]",  # typed: ok
        "AddMeeting-level-1-1#0": "[GetUserToken(username='kai', password='orbit42'), GetToday()]",       # extra call
        "AddMeeting-level-1-1#1": py_call("AddMeeting", {
            "token": "tk-kai-9", "meeting_topic": "Quarterly budget review meeting",                       # Jaccard 3/4
            "start_time": "2023-04-14 10:00:00", "end_time": "2023-04-14 11:00:00", "location": "Room B",
            "attendees": ["Ann Lee", "Bo Chen"]}),                                                         # list: ok
        # level 2: 2 of 5 pass
        "AddReminder-level-3-1#0": "[ToolSearcher(keywords='weather forecast')]",                          # wrong search
        "AddReminder-level-3-1#1": py_call("GetToken", {"username": "leo", "password": "pine88"}),         # wrong name
        "AddReminder-level-3-1#2": py_call("AddReminder", {"token": "tk-leo-3", "content": "Call the dentist",
                                                           "time": "2023-08-01 10:00:00"}),                # wrong time
        "QueryStock-level-3-1#0": "API-Request: [ToolSearcher(keywords='QueryStock')]",                    # names the tool
        "QueryStock-level-3-1#1": "<think>[x(]</think>[QueryStock(stock_code='aapl', date='2023-3-14')]",  # ci + date
        # level 3: 2 of 4 pass
        "level-3-0#0": "[ToolSearcher(keywords='Geocoding')]",
        "level-3-0#1": "Lyon is a city in France.",                                                        # no call
        "level-3-0#2": "[ToolSearcher(keywords='get weather')]",                                          # camel split
        "level-3-0#3": "[GetWeather(latitude=45.67, longitude=4.84)]",                                     # wrong value
    }
    summary, v = run(bench, samples, outs, "official")
    assert summary["categories"]["level-1"] == {"correct": 2, "n": 5, "accuracy": 40.0}
    assert summary["categories"]["level-2"] == {"correct": 2, "n": 5, "accuracy": 40.0}
    assert summary["categories"]["level-3"] == {"correct": 2, "n": 4, "accuracy": 50.0}
    assert summary["overall"]["correct"] == 6 and summary["overall"]["accuracy"] == pytest.approx(600 / 14)
    assert summary["errors"] == {"extra_call": 1, "missing": 1, "name": 1, "no_call": 1, "value": 4}
    assert v["AddAlarm-GetUserToken-level-2-1#1"].reason == "missing parameter(s) time"
    assert v["AddReminder-level-3-1#1"].reason == "API name mismatch: GetToken vs GetUserToken"
    assert v["level-3-0#3"].parsed["calls"] == [{"name": "GetWeather",
                                                 "arguments": {"latitude": 45.67, "longitude": 4.84}}]


def test_parse_errors_and_unknown_parameter():
    bench = APIBank()
    s = {s.id: s for s in load().samples}["AddAlarm-GetUserToken-level-2-1#0"]
    v = bench.score(s, "[GetUserToken(username=user_name, password='x')]", "official")
    assert not v.correct and v.parsed["error"] == "parse"
    v = bench.score(s, '<tool_call>{"name": "GetUserToken", "arguments": </tool_call>', "official")
    assert not v.correct and v.parsed["error"] == "parse"
    v = bench.score(s, py_call("GetUserToken", {"username": "mia", "password": "sunflower7", "email": "m@x.org"}),
                    "official")
    assert not v.correct and v.parsed["error"] == "unknown"


@pytest.mark.parametrize(("api", "key", "gold", "pred", "ok"), [
    ("AddAgenda", "content", "Dinner with Sam", "Dinner with Sam tonight", True),       # 3/4 > 0.5
    ("AddAgenda", "content", "Dinner with Sam", "dinner with Sam", False),              # case-sensitive: 2/4
    ("AddReminder", "content", "Call the dentist", "call the dentist", True),           # reminders lower-case
    ("AddAgenda", "time", "2023-01-02 10:00:00", "2023-1-2 10:00:00", False),          # exact for AddAgenda
    ("RecordHealthData", "time", "2023-01-02 10:00:00", "2023-1-2 10:00:00", True),    # its format_check
    ("QueryRegistration", "date", "2023-04-05", "2023-04-06", False),
    ("QueryHistoryToday", "date", "2023-10-06", "10-06", True),                         # month-day only
    ("Calculator", "formula", "(3+4)*2", "( 3 + 4 ) * 2", True),
    ("Dictionary", "keyword", "machine_learning", "Machine Learning", True),
    ("DeleteAgenda", "content", "Lunch", "anything", True),                            # not checked
    ("BookHotel", "room_count", "2", 2.0, True),                                        # int parameter
    ("BookHotel", "room_count", "2", "3", False),
    ("OpenBankAccount", "account", "007", "7", False),                                  # str parameter
    ("OpenBankAccount", "account", "7", 7, True),                                       # unquoted: same text
    ("GetUserToken", "password", "Abc", "abc", False),
    ("AddScene", "devices", "[{'name': 'Lamp', 'description': 'on'}, {'name': 'fan', 'description': 'off'}]",
     [{"name": "fan ", "description": "off"}, {"name": "lamp", "description": "on"}], True),
])
def test_value_rules(api, key, gold, pred, ok):
    types = {"room_count": "int", "account": "str"}
    err, _ = check_official({"name": api, "arguments": {key: gold}}, Call(api, {key: pred}), types=types)
    assert (err is None) is ok


def test_toolsearcher_rule():
    gold = {"name": "ToolSearcher", "arguments": {"keywords": "schedule meeting"}, "retrieves": ["GetUserToken",
                                                                                                  "AddMeeting"]}
    for kw, ok in [("schedule a meeting", True), ("AddMeeting", True), ("add new meeting", True),
                   ("meeting", False), ("", False), ("book hotel", False)]:
        err, _ = check_official(gold, Call("ToolSearcher", {"keywords": kw}))
        assert (err is None) is ok, kw


# ---------------------------------------------------------------- paper (ToolRL) scoring

def tc(obj):
    return "<think>ok</think>\n<tool_call>\n" + json.dumps(obj) + "\n</tool_call>"


def test_paper_gold_100():
    bench, samples = APIBank(), load("paper").samples
    outs = {s.id: tc({"name": s.gold["name"], "parameters": s.gold["arguments"]}) for s in samples}
    summary, _ = run(bench, samples, outs, "paper")
    assert summary["overall"] == {"accuracy": 100.0, "correct": 10, "n": 10}
    assert summary["paper_reference"] == {"GenEnv 7B": 79.1, "Qwen2.5-7B-Instruct": 61.6}


def test_one_defect_per_item_paper():
    bench, samples = APIBank(), load("paper").samples
    outs = {
        # level 1: 2 of 5
        "AddAlarm-GetUserToken-level-2-1#0": "<tool_call>\n" + json.dumps(
            {"name": "GetUserToken", "parameters": {"username": "mia", "password": "sunflower7"}}) + "\n"
            + json.dumps({"name": "GetToday", "parameters": {}}) + "\n</tool_call>",                 # extra call: ok
        "AddAlarm-GetUserToken-level-2-1#1": tc({"name": "AddAlarm", "parameters": {
            "token": "tk-mia-001", "time": "2023-06-03 06:30"}}),                                    # value
        "BookHotel-level-1-1#0": tc({"name": "BookHotel", "parameters": {
            "hotel_name": "Harbor Inn", "check_in_time": "2023-05-10", "check_out_time": "2023-05-12",
            "room_count": 1, "adult_count": "2", "child_count": "0"}}),                             # 1 != "1"
        "AddMeeting-level-1-1#0": tc({"username": "kai", "password": "orbit42"}),                  # bare: ToolRL ok
        "AddMeeting-level-1-1#1": tc({"name": "AddMeeting", "parameters": {
            "token": "tk-kai-9", "meeting_topic": "Quarterly budget review", "start_time": "2023-04-14 10:00:00",
            "end_time": "2023-04-14 11:00:00", "location": "Room B", "attendees": ["Ann Lee", "Bo Chen"]}}),  # list
        # level 2: 1 of 3
        "AddReminder-level-3-1#1": py_call("GetUserToken", {"username": "leo", "password": "pine88"}),
        "AddReminder-level-3-1#2": tc({"name": "AddReminder", "parameters": {
            "token": "tk-leo-3", "content": "call the dentist", "time": "2023-08-01 09:00:00"}}),  # exact match
        "QueryStock-level-3-1#1": tc({"name": "StockQuery", "parameters": {"stock_code": "AAPL",
                                                                           "date": "2023-03-14"}}),
        # level 3: 1 of 2
        "level-3-0#1": tc({"name": "Geocoding", "arguments": {"address": "Lyon"}}),
        "level-3-0#3": tc({"name": "GetWeather", "parameters": {"latitude": 45.76}}),                # missing
    }
    summary, v = run(bench, samples, outs, "paper")
    assert summary["categories"]["level-1"] == {"correct": 2, "n": 5, "accuracy": 40.0}
    assert summary["categories"]["level-2"]["correct"] == 1 and summary["categories"]["level-2"]["n"] == 3
    assert summary["categories"]["level-3"] == {"correct": 1, "n": 2, "accuracy": 50.0}
    assert summary["overall"] == {"accuracy": 40.0, "correct": 4, "n": 10}
    assert v["QueryStock-level-3-1#1"].parsed["error"] == "name"
    # the same extra call fails the official protocol
    s = {s.id: s for s in load().samples}["AddAlarm-GetUserToken-level-2-1#0"]
    assert not bench.score(s, outs[s.id], "official").correct
