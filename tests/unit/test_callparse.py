import ast

import pytest

from genenv_cli.core.callparse import (
    CallParseError,
    literal_value,
    parse_literal,
    parse_python_calls,
    parse_tool_calls,
)


def test_tool_call_blocks():
    text = 'ok <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>\n<tool_call>[{"name": "b", "arguments": {}}]</tool_call>'
    assert [(c.name, c.arguments) for c in parse_tool_calls(text)] == [("a", {"x": 1}), ("b", {})]


def test_bare_json_and_fenced_json():
    assert parse_tool_calls('{"name": "a", "arguments": {"x": 1}}')[0].name == "a"
    assert parse_tool_calls('```json\n[{"name": "a", "arguments": {}}]\n```')[0].name == "a"


def test_prose_is_no_call():
    assert parse_tool_calls("I cannot help with that.") == []
    assert parse_tool_calls("[1, 2, 3] are numbers") == []


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "a", "arguments": {"x": 1}',          # truncated
    '<tool_call>{"name": "a", "arguments": {"x": 1,}}</tool_call>',  # malformed
    "<tool_call></tool_call>",
    '<tool_call>{"arguments": {}}</tool_call>',                # no name
    '<tool_call>{"name": "a", "arguments": [1]}</tool_call>',  # arguments not an object
])
def test_malformed_calls_raise(text):
    with pytest.raises(CallParseError):
        parse_tool_calls(text)


def test_python_calls_are_parsed_not_run():
    calls = parse_python_calls("[get_weather(city='Paris', days=-3, opts={'a': [1, 2.5, True, None]}), m.f(x=\"y\")]")
    assert calls[0].arguments == {"city": "Paris", "days": -3, "opts": {"a": [1, 2.5, True, None]}}
    assert calls[1].name == "m.f"
    for evil in ["__import__('os').system('touch /tmp/pwned')", "f(x=open('/etc/passwd').read())",
                 "f(x=1+1)", "f(x=[i for i in range(3)])", "f(1)", "f(**{'a': 1})", "lambda: 0"]:
        with pytest.raises(CallParseError):
            parse_python_calls(evil)


def test_python_literals_are_read_as_json_data():
    assert parse_literal(" {'a': [1, -2.5, None, True], 'b': (1,), 'c': null, 1: {'x'}} ") == {
        "a": [1, -2.5, None, True], "b": [1], "c": None, 1: ["x"]}
    for text in ["b'x'", "1j", "...", "{[1]: 2}", "{(1, 2): 3}", "{**a}", "f(1)", "'a' + 'b'", "[1", "-'x'"]:
        with pytest.raises(CallParseError):
            parse_literal(text)
    with pytest.raises(CallParseError, match="nests brackets"):  # bounded like every reader of model text
        parse_literal("[" * 101 + "]" * 101)


def test_string_joins_only_where_asked():
    node = ast.parse("'a' + 'b' + 'c'", mode="eval").body
    assert literal_value(node, concat=True) == "abc"
    with pytest.raises(CallParseError):
        literal_value(node)
    with pytest.raises(CallParseError):
        literal_value(ast.parse("'a' + 1", mode="eval").body, concat=True)


def test_unhashable_or_odd_values_in_calls_are_errors_not_crashes():
    for text in ["[f(x={[1]: 2})]", "[f(x=b'a')]", "[f(x=1j)]"]:
        with pytest.raises(CallParseError):
            parse_python_calls(text)
