"""BFCL (Berkeley Function Calling Leaderboard), v4 (default) and v3 data: the single-turn AST categories
scored by BFCL's AST checker rules, and the GenEnv paper's per-turn decomposition of `multi_turn_long_context`.

Official sources followed (ShishirPatil/gorilla, `berkeley-function-call-leaderboard/bfcl_eval/`):
`constants/default_prompts.py` + `model_handler/utils.py` (`formulate_system_prompt`,
`system_prompt_pre_processing_chat_model`) for the prompt; `utils.py`
(`_func_doc_language_specific_pre_processing`, `populate_test_cases_with_predefined_functions`) for the
function documents shown; `eval_checker/eval_runner.py` for which checker judges which category;
`eval_checker/eval_runner_helper.py` (`generate_leaderboard_csv`) for the summary scores. The decoder and the
AST rules are in `evals/bfcl_checker.py` (its docstring lists them).

One module per concern, each documenting its part of the protocol: `categories` (names, groups, file names,
pinned commits), `data` (finding and reading the files; single-turn samples), `prompts`, `scoring`, `summary`,
`multi_turn` (the paper protocol: its samples and its per-turn match) and `benchmark` (the `BFCL` class).
"""

# Every name the single module `genenv_cli.evals.bfcl` had stays importable from here.
from genenv_cli.errors import InputError  # noqa: F401
from genenv_cli.evals.base import PROTOCOLS, Benchmark, EvalSample, LoadedData, Verdict  # noqa: F401
from genenv_cli.evals.bfcl.benchmark import BFCL
from genenv_cli.evals.bfcl.categories import (  # noqa: F401
    ALIASES,
    AST_CATEGORIES,
    COMMITS,
    GROUPS,
    LIVE,
    MULTI_TURN_DOCS,
    NON_LIVE,
    OFFICIAL_CATEGORIES,
    PAPER_CATEGORY,
    PAPER_REFERENCE,
    RAW_URL,
    UNSUPPORTED,
    UNSUPPORTED_WHY,
    V3_NAMES,
    checker_kind,
    file_name,
    language_of,
)
from genenv_cli.evals.bfcl.data import (  # noqa: F401
    _check_answer,
    _check_question,
    _data_root,
    _detect_version,
    _needed_files,
    _read_records,
    _read_records_docs,
    _wheel_version,
    wheel_data_dir,
)
from genenv_cli.evals.bfcl.multi_turn import _call_key, _canon, _named, _score_turn, _show, render_calls  # noqa: F401
from genenv_cli.evals.bfcl.prompts import (  # noqa: F401
    _HINT,
    _INSTRUCTIONS,
    annotate_functions,
    prompt_messages,
    system_prompt,
)
from genenv_cli.evals.bfcl_checker import (  # noqa: F401
    BCall,
    DecodeError,
    check_calls,
    decode_answer,
    decode_python,
    json_safe,
    positional_value,
    standardize_string,
)
from genenv_cli.evals.datasource import no_data_error, sha256_paths, try_download  # noqa: F401

__all__ = ["BFCL", "standardize_string", "system_prompt", "annotate_functions", "AST_CATEGORIES"]
