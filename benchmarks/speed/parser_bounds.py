"""Parsing model text: the slow inputs found by a hostile probe, timed with the patterns the parsers used before
(each stopped at --before-limit seconds) and with today's parsers; then the slowest of today's parsers on a
megabyte of each adversarial text. Goal: linear time, a megabyte well within 1 s
(tests/robustness/test_parser_bounds.py asserts 1 s per call).

    python -m benchmarks.speed.parser_bounds [--before-limit 40] [--repeat 3]

Writes benchmarks/speed/results/parser_bounds/parser_bounds.json.
"""

from __future__ import annotations

import argparse
import re
import signal
import time
from pathlib import Path

from benchmarks.speed.common import median, write_result

FIX = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


class _Stop(BaseException):
    pass


def _stop(*_args) -> None:
    raise _Stop


def timed(fn, text: str, limit: float | None = None) -> float | None:
    """Seconds for fn(text); None when it ran past `limit` (stopped by SIGALRM: the regex engine checks for it)."""
    if limit:
        signal.setitimer(signal.ITIMER_REAL, limit)
    t = time.perf_counter()
    try:
        fn(text)
    except _Stop:
        return None
    except Exception:  # noqa: BLE001, S110 - a parser's own error is an answer; only the time matters
        pass
    finally:
        if limit:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return time.perf_counter() - t


# the patterns as they were, applied as the parsers applied them
_OLD_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_OLD_ANSWER = re.compile(r"answer\s*[:=]?\s*(-?\d[\d,]*)", re.IGNORECASE)
_OLD_TP_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def old_call_parser(text: str) -> None:  # parse_tool_calls' fence (also BFCL's decoder and API-Bank's reader)
    _OLD_FENCE.match(text.strip())


def old_arith(text: str) -> None:
    _OLD_ANSWER.findall(text)


def old_travelplanner(text: str) -> None:
    _OLD_TP_THINK.sub("", text)


def old_bamboogle(text: str) -> None:
    re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before-limit", type=float, default=40.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    signal.signal(signal.SIGALRM, _stop)

    from genenv_cli.catalogue.config import Config
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.catalogue.suites import get_benchmark
    from genenv_cli.core.callparse import parse_tool_calls
    from genenv_cli.families.bamboogle.benchmark import extract_answer
    from genenv_cli.families.travelplanner.plans import extract_plan
    from genenv_cli.machinery.grading import grade_pairs

    arith = get_domain("arith")
    arith_task = arith.seeds("train")[0].payload
    bfcl = get_benchmark("bfcl")
    bfcl.configure(Config(), None)
    sample = bfcl.load(data=FIX / "bfcl", split="simple_python", version=None, protocol="official",
                       cache_dir=Path("/tmp/genenv-bench-cache")).samples[0]
    tool_call = get_domain("tool_call")
    task = tool_call.seeds("train")[0].payload
    good = '<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>'

    def score_32(stuck: str) -> None:
        grade_pairs("tool_call", {f"t{i}": task for i in range(32)}, [f"t{i}" for i in range(32)],
                    [good] * 31 + [stuck], workers=1)

    cases = [
        ("call parser: ``` + 2,000 spaces + x", "```" + " " * 2000 + "x", old_call_parser, parse_tool_calls),
        ("call parser: ``` + 4,000 spaces + x", "```" + " " * 4000 + "x", old_call_parser, parse_tool_calls),
        ("score: 32 tool_call rollouts, one ``` + 20,000 spaces + x", "```" + " " * 20000 + "x",
         old_call_parser, score_32),
        ("evaluate --bench bfcl --predictions: ``` + 6,000 spaces + x", "```" + " " * 6000 + "x", old_call_parser,
         lambda t: bfcl.score(sample, t, "official")),
        ("arith: answer + 20,000 spaces", "answer" + " " * 20000, old_arith,
         lambda t: arith.score(arith_task, t)),
        ("travelplanner: 50,000 <think>", "<think>" * 50000, old_travelplanner, extract_plan),
        ("bamboogle: 50,000 <answer>", "<answer>" * 50000, old_bamboogle, extract_answer),
    ]
    figures: dict = {"pathological_inputs": {}, "megabyte": {}}
    for name, text, before, after in cases:
        b = timed(before, text, args.before_limit)
        a = [timed(after, text) for _ in range(args.repeat)]
        figures["pathological_inputs"][name] = {
            "chars": len(text),
            "before_s": round(b, 3) if b is not None else f"> {args.before_limit:g} (stopped)",
            "after_median_s": round(median(a), 5)}
        print(name, figures["pathological_inputs"][name], flush=True)

    import tests.test_parser_bounds as tpb  # the tests' parsers and adversarial pieces (from the repository root)

    parsers = [*tpb.CALL_PARSERS, *tpb.domain_parsers(), *tpb.benchmark_parsers("/tmp/genenv-bench-cache")]
    for piece in tpb.PIECES:
        text = piece * (1_000_000 // len(piece))
        worst = max(((timed(fn, text), name) for name, fn in parsers), key=lambda x: x[0])
        figures["megabyte"][repr(piece)] = {"slowest_s": round(worst[0], 4), "parser": worst[1]}
    slowest = max(figures["megabyte"].values(), key=lambda v: v["slowest_s"])
    figures["megabyte_slowest"] = slowest
    figures["parsers_timed"] = len(parsers)
    write_result("parser_bounds", "parser_bounds", figures, settings={"before_limit_s": args.before_limit, "repeat": args.repeat,
                                                      "megabyte": "each piece repeated to 1,000,000 characters, "
                                                                  "every parser of "
                                                                  "tests/robustness/test_parser_bounds.py"})


if __name__ == "__main__":
    main()
