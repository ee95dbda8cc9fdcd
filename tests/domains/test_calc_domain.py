"""`calc`: arith's exercises with a calculator the agent may call. The tool parses the call (arith's parser, never
eval), is bounded, and answers a bad call with an error the agent reads; a turn without a call is graded as arith
grades it; an episode ends at its third turn at the latest."""

from __future__ import annotations

import pytest

from genenv_cli.catalogue.domains import get_domain
from genenv_cli.domains.arith import ArithError
from genenv_cli.domains.base import END_DONE, END_TURN_CAP, DomainEpisode
from genenv_cli.domains.calc import MAX_CALL_CHARS, calculate, find_call


@pytest.mark.parametrize("text, call", [
    ("calc(37 * (4 + 12))", "37 * (4 + 12)"),
    ("Let me use the tool: Calc( 5 - 3 ) please", " 5 - 3 "),
    ("calc(1) and calc(2)", "1"),
    ("Answer: 12", None),
    ("calculate 3", None),
])
def test_a_call_is_found_with_its_parentheses_balanced(text, call):
    assert find_call(text) == call


def test_an_unclosed_or_overlong_call_is_an_error_not_a_hang():
    with pytest.raises(ArithError, match="does not close"):
        find_call("calc(3 + (4")
    with pytest.raises(ArithError, match="longer than"):
        find_call("calc(" + "1 + " * 200 + "1)")
    assert find_call("calc(" + "1+" * ((MAX_CALL_CHARS - 1) // 2) + "1)") is not None


@pytest.mark.parametrize("expression, reply", [
    ("37 * (4 + 12)", "calc(37 * (4 + 12)) = 592"),
    ("-3 - -4", "calc(-3 - -4) = 1"),
    ("__import__('os').system('true')", "calc error: unexpected character '_'"),
    ("2 ** 1000", "calc error: unexpected '*'"),
    ("99999999 * 99999999", "calc error: result too large"),
    ("", "calc error: empty expression"),
])
def test_the_calculator_parses_and_never_evaluates_model_text(expression, reply):
    assert calculate(expression) == reply


def _play(actions):
    calc = get_domain("calc")
    episode = DomainEpisode(calc.environment({"expression": "37 * 16", "answer": 592}), calc.max_turns)
    for a in actions:
        assert episode.prompt() is not None
        episode.advance(a)
    return episode


def test_an_episode_calls_reads_the_result_and_answers():
    e = _play(["calc(37 * 16)", "Answer: 592"])
    assert e.end == END_DONE and e.verdict.reward == 1.0 and e.turns == 2
    assert e.observations == ["calc(37 * 16) = 592"]
    assert e.messages[-2:] == [{"role": "user", "content": "calc(37 * 16) = 592"},
                               {"role": "assistant", "content": "Answer: 592"}]
    assert e.prompt() is None


def test_an_answer_without_the_tool_is_graded_as_arith_grades_it():
    e = _play(["Answer: 591"])
    assert (e.end, e.turns, e.verdict) == (END_DONE, 1, get_domain("arith").score({"answer": 592}, "Answer: 591"))


def test_a_bad_call_gets_an_error_back_and_calling_forever_ends_at_the_turn_cap():
    e = _play(["calc(37 * )", "calc(37 * 16", "calc(37 * 16)"])
    assert e.observations[:2] == ["calc error: expression ends too early", "calc error: the call's parenthesis does not close"]
    assert e.end == END_TURN_CAP and e.turns == 3 and e.verdict.reward == 0.0 and not e.verdict.valid


def test_calc_is_a_multi_turn_domain_writing_arith_tasks():
    calc, arith = get_domain("calc"), get_domain("arith")
    assert calc.episodic and not arith.episodic and calc.max_turns == 3
    assert calc.seeds() == arith.seeds()
    assert calc.agent_messages({"expression": "2 + 2"})[-1] == {"role": "user", "content": "Compute 2 + 2"}


def test_the_contract_catches_an_environment_that_never_ends_or_rewards_a_wrong_answer():
    from genenv_cli.domains.base import Environment, Step
    from genenv_cli.domains.calc import CalcDomain
    from genenv_cli.domains.checks import run_contract

    class Chatty(Environment):
        def first_messages(self):
            return self.domain.agent_messages(self.payload)

        def step(self, action):
            return Step("go on", False)

    class Generous(Chatty):
        def step(self, action):
            return Step(None, True, 1.0)

    class NeverEnds(CalcDomain):
        def environment(self, payload):
            return Chatty(self, payload)

    class RewardsAnything(CalcDomain):
        def environment(self, payload):
            return Generous(self, payload)

    (never,) = [r for r in run_contract(NeverEnds()) if r.name == "episodes"]
    assert never.status == "fail" and "ends as 'turn_cap' with reward 0.0; expected 1.0" in never.detail
    (generous,) = [r for r in run_contract(RewardsAnything()) if r.name == "episodes"]
    assert generous.status == "fail" and "with reward 1.0; expected 0.0" in generous.detail
    assert [r.name for r in run_contract(get_domain("arith"))] == ["seeds", "answers", "environment output", "prompts",
                                                                    "fingerprints"]
