"""The arith domain: its parser computes answers without eval, and its scorer and env parser (the contract every
domain keeps is test_domain_contract.py)."""

import re
from pathlib import Path

import pytest

from genenv_cli.catalogue.domains import get_domain
from genenv_cli.domains import arith_seeds
from genenv_cli.domains.arith import (
    ArithError,
    describe_shape,
    evaluate_expression,
    expression_shape,
    read_answer,
)
from genenv_cli.domains.base import EnvContext, Reject

D = get_domain("arith")
CTX = EnvContext("ar-0001", "1op-1d", {"expression": "9 + 2", "answer": 11}, None, None, [])


@pytest.mark.parametrize("expr,value,ops,digits", [
    ("3 + 4 * 2", 11, 2, 1), ("(3 + 4) * 2", 14, 2, 1), ("12 - 30 - 4", -22, 2, 2), ("-5 * -6", 30, 1, 1),
    ("007 + 1", 8, 1, 1), ("998 * (1 - 2)", -998, 2, 3),
])
def test_expressions(expr, value, ops, digits):
    assert evaluate_expression(expr) == (value, ops, digits)


@pytest.mark.parametrize("bad", ["", "3 +", "(1 + 2", "2 ** 3", "4 / 2", "__import__('os')", "1e9", "3 4",
                                 "99999 * 99999 * 99"])
def test_rejected_expressions(bad, tmp_path):
    with pytest.raises(ArithError):
        evaluate_expression(bad)


@pytest.mark.parametrize("expr,bad", [("1 / 0", "/"), ("2 % 3", "%"), ("1 + a", "a"), ("1/0", "/"), ("  ^ 2", "^")])
def test_a_bad_character_is_named_not_the_space_before_it(expr, bad):
    with pytest.raises(ArithError, match=re.escape(f"unexpected character {bad!r}")):
        evaluate_expression(expr)


def test_answers_and_scores():
    assert read_answer("Answer: 1,234") == 1234
    assert read_answer("so 3 and then 5") == 5
    assert read_answer("Answer: 7. Other answers: 9") == 7
    assert read_answer("no number") is None
    p = {"expression": "6 * 7", "answer": 42}
    assert D.score(p, "Answer: 42").reward == 1.0
    s = D.score(p, "Answer: 40")
    assert s.reward == 0.0 and s.partial == pytest.approx(1 - 2 / 42) and s.valid
    assert not D.score(p, "forty-two").valid


def test_env_output_and_shapes(tmp_path):
    payload, shape = D.parse_env_output("Sure!\nEXERCISE: 12 * (3 + 4) = ?", CTX)
    assert payload == {"expression": "12 * (3 + 4)", "answer": 84} and shape == "2op-2d"
    for bad, why in [("What is 2 + 2?", "parse: no EXERCISE"), ("EXERCISE: 7", "no operation"),
                     ("EXERCISE: 12345 + 1", "more than 4 digits"), ("EXERCISE: 1+1+1+1+1+1", "more than 4 operations"),
                     ("EXERCISE: open('/etc/passwd')", "parse: unexpected")]:
        with pytest.raises(Reject, match=why):
            D.parse_env_output(bad, CTX)
    assert not Path("/tmp/never-created-by-arith").exists()


def test_seed_shapes_and_duplicates_keep_operators():
    assert len(D.seeds("validation")) >= 200  # one held-out exercise is worth less than one point
    for s in D.seeds("train") + D.seeds("validation"):
        assert expression_shape(s.payload["expression"]) == s.shape, s.id
    assert D.exact_key({"expression": "12 + 7", "answer": 19}) != D.exact_key({"expression": "12 * 7", "answer": 84})
    assert "Compute 3 + 4" in D.agent_messages(CTX.parent)[1]["content"]


def test_shapes_name_the_operation_at_the_frontier():
    assert [expression_shape(e) for e in ["3 + 4", "9 - 2", "-5 * -6", "3 - -2", "12 * 3", "1 + 2 * 3"]] == \
        ["add-1d", "sub-1d", "mul-1d", "sub-1d", "mul-2d", "2op-1d"]
    assert describe_shape("sub-2d") == "two-digit subtractions"
    assert set(D.shapes) >= {s.shape for s in D.seeds("train")}


def test_shipped_seeds_are_the_generators_output():
    shipped = (Path(arith_seeds.__file__).parent / "data" / "arith_seeds.jsonl").read_text()
    assert shipped == arith_seeds.render()


def test_environment_is_told_success_per_shape_and_where_to_aim():
    stats = {"tasks": 10, "success_rate": 0.4,
             "per_shape": {"add-1d": {"success_rate": 0.9, "tasks": 4}, "sub-1d": {"success_rate": 0.5, "tasks": 3},
                           "2op-2d": {"success_rate": 0.0, "tasks": 3}}}
    ctx = EnvContext("ar-0001", "sub-1d", {"expression": "9 - 2", "answer": 7}, 0.9, stats, [])
    system = D.env_messages(ctx)[0]["content"]
    assert "one-digit additions 90%" in system and "2-operation exercises with two-digit numbers 0%" in system
    assert "It solves about half of these: one-digit subtractions." in system
    assert "too easy" in system


def test_a_huge_answer_is_wrong_not_a_crash():
    """An agent may write a 400-digit number: the partial credit must not divide it into a float overflow."""
    from genenv_cli.domains.arith import ArithDomain

    score = ArithDomain().score({"expression": "2 + 3", "answer": 5}, "Answer: " + "9" * 400)
    assert (score.reward, score.partial, score.valid) == (0.0, 0.0, True)
    close = ArithDomain().score({"expression": "2 + 3", "answer": 10 ** 500}, f"Answer: {10 ** 500 + 1}")
    assert 0.99 < close.partial <= 1.0 and close.reward == 0.0
