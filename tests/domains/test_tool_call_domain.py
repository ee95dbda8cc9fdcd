"""The tool_call scorer on hand-written cases, and the environment-output parser (the contract every domain keeps
is test_domain_contract.py)."""

from pathlib import Path

import pytest

from genenv_cli.catalogue.domains import get_domain
from genenv_cli.domains.answers.tool_call import tool_call_block as block
from genenv_cli.domains.base import EnvContext, Reject

D = get_domain("tool_call")

FORECAST = {"request": "Forecast for Oslo for the next 3 days in fahrenheit.",
            "tools": ["get_forecast", "get_weather"],
            "calls": [{"name": "get_forecast", "arguments": {"city": "Oslo", "days": 3, "unit": "fahrenheit"}}]}
PARALLEL = {"request": "Convert 100 USD to EUR and 100 USD to GBP.", "tools": ["convert_currency"],
            "calls": [{"name": "convert_currency", "arguments": {"amount": 100, "from_currency": "USD", "to_currency": "EUR"}},
                      {"name": "convert_currency", "arguments": {"amount": 100, "from_currency": "USD", "to_currency": "GBP"}}]}
NO_TOOL = {"request": "Tell me a joke about cats.", "tools": ["get_weather"], "calls": []}


@pytest.mark.parametrize("completion,reward,valid,error", [
    # correct, with BFCL-style string normalisation and an integral float for an integer
    (block("get_forecast", city="oslo", days=3.0, unit="Fahrenheit"), 1.0, True, None),
    # wrong argument type: days as a string
    (block("get_forecast", city="Oslo", days="3", unit="fahrenheit"), 0.0, False, "get_forecast.days must be integer"),
    # missing argument (unit defaults to celsius, gold says fahrenheit)
    (block("get_forecast", city="Oslo", days=3), 0.0, True, "does not match"),
    # missing required argument
    (block("get_forecast", city="Oslo", unit="fahrenheit"), 0.0, True, "missing required argument 'days'"),
    # extra (unknown) argument
    (block("get_forecast", city="Oslo", days=3, unit="fahrenheit", hourly=True), 0.0, False, "unknown argument 'hourly'"),
    # misspelt argument
    (block("get_forecast", citty="Oslo", days=3, unit="fahrenheit"), 0.0, False, "unknown argument 'citty'"),
    # wrong tool among the offered ones
    (block("get_weather", city="Oslo", unit="fahrenheit"), 0.0, True, "does not match"),
    # a tool that is not offered
    (block("send_email", to="a", subject="b", body="c"), 0.0, False, "not offered"),
    # no call when one is needed
    ("The forecast is sunny.", 0.0, True, "no call, expected 1"),
    # malformed and truncated JSON
    ('<tool_call>{"name": "get_forecast", "arguments": {"city": "Oslo", "days": 3,}}</tool_call>', 0.0, False, "unparseable"),
    ('<tool_call>{"name": "get_forecast", "arguments": {"city": "Oslo", "da', 0.0, False, "unparseable"),
    # an extra call
    (block("get_forecast", city="Oslo", days=3, unit="fahrenheit") + block("get_weather", city="Oslo"), 0.0, True,
     "2 calls, expected 1"),
])
def test_single_call_cases(completion, reward, valid, error):
    s = D.score(FORECAST, completion)
    assert (s.reward, s.valid) == (reward, valid)
    if error is None:
        assert s.error is None
    else:
        assert error in s.error


def test_optional_argument_at_its_default_equals_omission():
    payload = {"request": "Weather in Oslo", "tools": ["get_weather"],
               "calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}
    assert D.score(payload, block("get_weather", city="Oslo", unit="celsius")).reward == 1.0


def test_parallel_calls_in_any_order():
    eur, gbp = (block("convert_currency", amount=100, from_currency="USD", to_currency=c) for c in ("EUR", "GBP"))
    assert D.score(PARALLEL, eur + gbp).reward == 1.0
    assert D.score(PARALLEL, gbp + "\n" + eur).reward == 1.0
    one = D.score(PARALLEL, gbp)
    assert one.reward == 0.0 and one.partial == pytest.approx(0.5)       # one of two calls right
    twice = D.score(PARALLEL, gbp + gbp)
    assert twice.reward == 0.0


def test_no_tool_tasks():
    assert D.score(NO_TOOL, "Why did the cat sit on the computer? To keep an eye on the mouse.").reward == 1.0
    s = D.score(NO_TOOL, block("get_weather", city="Paris"))
    assert s.reward == 0.0 and "no offered tool fits" in s.error


def test_partial_credit_is_recorded_not_rewarded():
    s = D.score(FORECAST, block("get_forecast", city="Oslo", days=4, unit="fahrenheit"))
    assert s.reward == 0.0
    assert s.partial == pytest.approx(3 / 4)  # city, unit, include_hourly default agree; days differs


def test_code_and_shell_text_is_data(tmp_path):
    marker = tmp_path / "pwned"
    for evil in [f"import os\nos.system('touch {marker}')",
                 f"$(touch {marker}); `touch {marker}`",
                 f'<tool_call>{{"name": "__import__(\'os\').system(\'touch {marker}\')", "arguments": {{}}}}</tool_call>',
                 f"<tool_call>__import__('os').system('touch {marker}')</tool_call>",
                 f"[get_forecast(city=__import__('os').system('touch {marker}'))]"]:
        s = D.score(FORECAST, evil)
        assert s.reward == 0.0
    assert not Path(marker).exists()


def test_the_seed_set_covers_every_shape_and_a_library_of_tools():
    seeds = D.seeds("train") + D.seeds("validation")
    assert len(seeds) >= 150 and len(D.library) >= 20
    assert {s.shape for s in seeds} == set(D.shapes)


CTX = EnvContext("tc-0004", "parallel", {"request": "x", "tools": ["get_weather"], "calls": []}, None, None, [])


def test_env_output_parsing():
    text = ('REQUEST: Weather in Lima and Quito please\nTOOLS: get_weather\nCALLS: [{"name": "get_weather", '
            '"arguments": {"city": "Lima"}}, {"name": "get_weather", "arguments": {"city": "Quito"}}]\n\n'
            'REQUEST: a second task the model went on to write')
    payload, shape = D.parse_env_output(text, CTX)
    assert shape == "parallel" and len(payload["calls"]) == 2
    for bad, why in [("Here is a task!", "parse: no REQUEST"),
                     ("REQUEST: Weather in Lima\nTOOLS: get_weather\nCALLS: [{name: x}]", "parse: CALLS is not JSON"),
                     ("REQUEST: Weather in Lima\nTOOLS: get_wether\nCALLS: []", "invalid: unknown tool"),
                     ('REQUEST: Weather in Lima\nTOOLS: get_weather\nCALLS: [{"name": "get_weather", "arguments": {}}]',
                      "missing required argument 'city'"),
                     ('REQUEST: Weather in Lima\nTOOLS: get_weather\nCALLS: [{"name": "send_email", "arguments": {}}]',
                      "not offered")]:
        with pytest.raises(Reject, match=why):
            D.parse_env_output(bad, CTX)
