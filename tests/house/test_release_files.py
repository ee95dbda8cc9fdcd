"""The family domains on files laid out as the benchmarks release them (hand-written, in the official formats):
API-Bank's single dialogue with apis/ two levels up, level folders with call-less dialogues, the API files copied
once; Bamboogle's chain-less records as environment examples; BFCL items that only BFCL's own rules admit; and
the smaller points (the Java decoder, the --seeds wording, missing predictions, Java/JavaScript gold answers)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.domains import get_domain
from genenv_cli.cli import app
from genenv_cli.domains.base import EnvContext
from genenv_cli.families.api_bank import APIBank
from genenv_cli.families.bfcl.calls import DecodeError
from genenv_cli.families.bfcl.decode import decode_answer
from paths import FIXTURES

FIX = FIXTURES
runner = CliRunner()


def invoke(*args, ok=True):
    result = runner.invoke(app, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output + str(result.exception)
    return result


@pytest.fixture
def api_bank(tmp_path) -> Path:
    """The API-Bank fixture as the release lays it out, plus two dialogues without API calls (one empty)."""
    root = tmp_path / "api-bank"
    shutil.copytree(FIX / "api_bank", root)
    level1 = root / "lv1-lv2-samples" / "level-1-given-desc"
    (level1 / "SearchEngine-level-1-1.jsonl").write_text("")
    (level1 / "RegisterUser-level-2-1.jsonl").write_text(
        json.dumps({"role": "User", "text": "I forgot my password."}) + "\n"
        + json.dumps({"role": "AI", "text": "Please contact support to reset it."}) + "\n")
    return root


BOOK = "BookHotel-level-1-1"


def test_api_bank_single_dialogue_reads_the_api_descriptions_two_levels_up(api_bank):
    dom = get_domain("api-bank")
    single = api_bank / "lv1-lv2-samples" / "level-1-given-desc" / f"{BOOK}.jsonl"
    (task,) = dom.read_seeds(single)
    (doc,) = task.payload["apis"]
    assert doc["description"] == "Book rooms in a hotel."
    assert doc["input_parameters"]["room_count"]["type"] == "int"
    suite = APIBank()
    whole = {s.id: s for s in suite.load(data=api_bank, split=None, version=None, protocol="official",
                                         cache_dir=api_bank).samples}
    alone = suite.load(data=single, split=None, version=None, protocol="official", cache_dir=api_bank).samples
    assert dom.sample(task.payload).messages == whole[f"{BOOK}#0"].messages == alone[0].messages
    # an int parameter compares as a number under evaluate's scorer, and so in training
    answer = ("[BookHotel(hotel_name='Harbor Inn', check_in_time='2023-05-10', check_out_time='2023-05-12', "
              "room_count='01', adult_count='2', child_count='0')]")
    assert suite.score(whole[f"{BOOK}#0"], answer, "official").correct
    assert dom.score(task.payload, answer).reward == 1.0


def test_api_bank_level_folder_imports_and_lists_the_call_less_files(api_bank, tmp_path):
    level1 = api_bank / "lv1-lv2-samples" / "level-1-given-desc"
    out = invoke("init", tmp_path / "run", "--domain", "api-bank", "--seeds", level1).output
    assert "2 files without tasks left out" in out
    assert "SearchEngine-level-1-1.jsonl" in out and "RegisterUser-level-2-1.jsonl" in out
    manifest = json.loads((tmp_path / "run" / "seeds" / "manifest.json").read_text())
    assert sorted(Path(f["file"]).name for f in manifest["skipped_files"]) == [
        "RegisterUser-level-2-1.jsonl", "SearchEngine-level-1-1.jsonl"]
    assert all(f["reason"] == "no API calls in the dialogue" for f in manifest["skipped_files"])
    seeds = [json.loads(x) for x in (tmp_path / "run" / "seeds" / "seeds.jsonl").read_text().splitlines()]
    assert {s["id"].split("#")[0] for s in seeds} == {"AddAlarm-GetUserToken-level-2-1", "AddMeeting-level-1-1", BOOK}
    # a call-less file among the sources is skipped, not fatal; alone it gives nothing to import
    empty = level1 / "SearchEngine-level-1-1.jsonl"
    invoke("init", tmp_path / "run2", "--domain", "api-bank", "--seeds", empty, "--seeds", level1 / f"{BOOK}.jsonl")
    res = invoke("init", tmp_path / "run3", "--domain", "api-bank", "--seeds", empty, ok=False)
    assert res.exit_code == 2 and "no API calls" in res.output and not (tmp_path / "run3" / "seeds").exists()


def test_api_bank_copies_the_api_files_it_needs_once(api_bank, tmp_path):
    level1 = api_bank / "lv1-lv2-samples" / "level-1-given-desc"
    (api_bank / "apis" / "unused_api.py").write_text(
        'class UnusedApi:\n    description = "Never called."\n    input_parameters = {}\n    output_parameters = {}\n')
    invoke("init", tmp_path / "run", "--domain", "api-bank", "--seeds", level1 / f"{BOOK}.jsonl",
           "--seeds", level1 / "AddAlarm-GetUserToken-level-2-1.jsonl")
    files = tmp_path / "run" / "seeds" / "files"
    copied = sorted(str(p.relative_to(files)) for p in files.rglob("*") if p.is_file())
    assert copied == ["0/level-1-given-desc/BookHotel-level-1-1.jsonl",
                      "1/level-1-given-desc/AddAlarm-GetUserToken-level-2-1.jsonl",
                      "shared/apis/add_alarm.py", "shared/apis/book_hotel.py", "shared/apis/get_user_token.py"]


def _ctx(payload):
    return EnvContext("p", "person", payload, None, None, [])


def test_bamboogle_release_seeds_are_shown_in_the_checked_format_and_read_back(tmp_path):
    dom = get_domain("bamboogle")
    tasks = dom.read_seeds(FIX / "bamboogle" / "bamboogle.json")
    assert tasks and all("facts" not in t.payload for t in tasks)
    for t in tasks:
        ctx = _ctx(t.payload)
        payload, shape = dom.parse_env_output(dom.render_item(t.payload), ctx)
        assert payload == t.payload and shape == t.shape
        user = dom.env_messages(ctx)[1]["content"]
        assert '"Facts": [' in user and '"Bridge": ' in user and user.index('"Facts"') < user.index("Example item")
    # an invented item without its chain is still refused
    other = json.dumps({"Question": "Who invented the polio vaccine?", "Answer": "Jonas Salk"})
    with pytest.raises(Exception, match="Facts and Bridge"):
        dom.parse_env_output(other, _ctx(tasks[0].payload))


def _bfcl_files(tmp_path: Path, name: str, questions: list[dict], answers: list[dict] | None) -> Path:
    root = tmp_path / "bfcl"
    (root / "possible_answer").mkdir(parents=True, exist_ok=True)
    (root / name).write_text("".join(json.dumps(q) + "\n" for q in questions))
    if answers is not None:
        (root / "possible_answer" / name).write_text("".join(json.dumps(a) + "\n" for a in answers))
    return root / name


def _fn(name, props, required):
    return {"name": name, "description": f"{name}.", "parameters": {
        "type": "dict", "properties": {k: {"type": t, "description": k} for k, t in props.items()},
        "required": required}}


def test_bfcl_release_items_follow_bfcls_own_rules(tmp_path):
    dom = get_domain("bfcl")
    volt = _fn("calculate_voltage_difference", {"electric_field": "float", "distance": "float"},
               ["electric_field", "distance"])
    field = _fn("calculate_magnetic_field", {"current": "float", "distance": "float"}, ["current", "distance"])
    pm = _bfcl_files(tmp_path, "BFCL_v4_parallel_multiple.json", [
        {"id": "parallel_multiple_12", "question": [[{"role": "user", "content": "Field of a 4 A wire at 2 m, and "
                                                      "the voltage across 3 m in a 5 N/C field."}]],
         "function": [field, volt]}],
        [{"id": "parallel_multiple_12", "ground_truth": [
            {"calculate_magnetic_field": {"current": [4.0], "distance": [2.0]}},
            {"calculate_voltage_difference": {"electric_field": [5.0], "distance": [3.0], "charge": [0.0, ""]}}]}])
    providers = _fn("get_service_providers", {"province_id": "integer", "avg_rating": "float"}, ["province_id"])
    lm = _bfcl_files(tmp_path, "BFCL_v4_live_multiple.json", [
        {"id": "live_multiple_984-215-8", "question": [[{"role": "user", "content": "ID 3726"}]],
         "function": [providers, _fn("get_weather", {"city": "string"}, ["city"])]}],
        [{"id": "live_multiple_984-215-8", "ground_truth": [
            {"get_service_providers": {"province_id": [3726], "avg_rating": ["", None]}}]}])
    li = _bfcl_files(tmp_path, "BFCL_v4_live_irrelevance.json", [
        {"id": "live_irrelevance_120-9-0", "question": [[{"role": "user", "content": "Weather in Boston?"}]],
         "function": []},
        {"id": "live_irrelevance_104-4-0", "question": [[{"role": "user", "content": "Whopper"}]],
         "function": [_fn("get_weather", {"city": "string"}, ["city"])]}], None)
    for path, n in ((pm, 1), (lm, 1), (li, 2)):
        tasks = dom.read_seeds(path)
        assert len(tasks) == n and not dom.seed_skips, dom.seed_skips
        loaded = {s.id: s for s in dom.suite.load(data=path, split=None, version=None, protocol="official",
                                                  cache_dir=tmp_path).samples}
        from genenv_cli.families.bfcl.domain import gold_answer

        for t in tasks:
            gold = gold_answer(t.payload)
            assert dom.score(t.payload, gold).reward == 1.0 == float(
                dom.suite.score(loaded[t.id], gold, "official").correct), (t.id, gold)
    # the environment's own items are still held to the stricter rules
    with pytest.raises(Exception, match="at least 8 characters"):
        dom.parse_env_output(json.dumps({"question": "ID 3726", "function": [providers], "ground_truth": [
            {"get_service_providers": {"province_id": [3726]}}]}), EnvContext("p", "simple", {}, None, None, []))


def test_java_array_initializer_with_bare_colons_is_not_decodable():
    bad = "[RedissonConnection.bitOp(keys=new String[]{user:online:today, user:online:yesterday})]"
    with pytest.raises(DecodeError):
        decode_answer(bad, "java")
    good = '[RedissonConnection.bitOp(keys=new String[]{"user:online:today", "user:online:yesterday"})]'
    assert decode_answer(good, "java")[0][0].name == "RedissonConnection.bitOp"
    assert decode_answer("[A.b(x=new int[]{a ? 1 : 2})]", "java")[0][0].args == {"x": "new int[]{a?1:2}"}


def test_init_seeds_errors_name_the_seeds_option(tmp_path):
    bad = tmp_path / "BFCL_v4_memory.json"
    bad.write_text("{}\n")
    res = invoke("init", tmp_path / "run", "--domain", "bfcl", "--seeds", bad, ok=False)
    assert res.exit_code == 2 and "--seeds" in res.output and "--data" not in res.output, res.output
    res = invoke("init", tmp_path / "run", "--domain", "bfcl", "--seeds", tmp_path / "nowhere.json", ok=False)
    assert res.exit_code == 2 and "--seeds" in res.output and "no such file" in res.output


def test_evaluate_says_on_the_console_when_predictions_are_missing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = FIX / "bamboogle" / "bamboogle.json"
    export = tmp_path / "export.jsonl"
    invoke("evaluate", "--bench", "bamboogle", "--data", data, "--export", export)
    first = json.loads(export.read_text().splitlines()[0])
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": first["id"], "output": "<answer>x</answer>"}) + "\n")
    n = len(export.read_text().splitlines())
    out = invoke("evaluate", "--bench", "bamboogle", "--data", data, "--predictions", preds, "--quiet").output
    assert f"{n - 1} of {n} bamboogle samples have no prediction" in out, out


@pytest.mark.parametrize("cat", ["simple_java", "simple_javascript"])
def test_gold_answers_are_written_in_the_items_language(cat):
    from genenv_cli.families.bfcl.domain import gold_answer

    dom = get_domain("bfcl")
    tasks = dom.read_seeds(FIX / "bfcl" / f"BFCL_v4_{cat}.json")
    assert tasks
    for t in tasks:
        gold = gold_answer(t.payload)
        assert "True" not in gold and "False" not in gold
        assert dom.score(t.payload, gold).reward == 1.0, (t.id, gold)


def _lengths(run: Path) -> tuple[int, int]:
    from genenv_cli.catalogue.config import load_config

    cfg = load_config(run / "genenv.toml")
    return cfg.generate.max_new_tokens, cfg.rollout.max_new_tokens


def test_domains_with_long_items_get_their_own_output_length_unless_one_is_set(tmp_path):
    invoke("init", tmp_path / "bfcl", "--domain", "bfcl")
    assert _lengths(tmp_path / "bfcl") == (2560, 256)
    invoke("init", tmp_path / "ab", "--domain", "api-bank")
    assert _lengths(tmp_path / "ab") == (1536, 256)
    invoke("init", tmp_path / "paper", "--domain", "bfcl", "--preset", "paper")
    assert _lengths(tmp_path / "paper") == (2560, 1024)
    invoke("init", tmp_path / "set", "--domain", "bfcl", "--set", "generate.max_new_tokens=300")
    assert _lengths(tmp_path / "set") == (300, 256)
    invoke("init", tmp_path / "mixed", "--domain", "bfcl=0.5", "--domain", "api-bank=0.5")
    assert _lengths(tmp_path / "mixed")[0] == 2560
    for name in ("arith", "tool_call"):
        invoke("init", tmp_path / name, "--domain", name)
        assert _lengths(tmp_path / name) == (256, 256)
    # a hand-written config that leaves the key out gets the domain's length too
    (tmp_path / "hand").mkdir()
    (tmp_path / "hand" / "genenv.toml").write_text('[run]\ndomain = "api-bank"\n')
    assert _lengths(tmp_path / "hand") == (1536, 256)
