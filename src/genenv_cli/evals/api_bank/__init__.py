"""API-Bank (Li et al., EMNLP 2023): API-call accuracy on the level-1/2 dialogues (level 3 when given).

Official source followed: AlibabaResearch/DAMO-ConvAI, folder `api-bank/` — `evaluator.py` (samples and chat
prompt), `evaluator_by_json.py` (error kinds), `api_call_extraction.py` (the `[ApiName(key='value')]` form),
`tool_manager.py` (parameter typing), `apis/*.py` (the API docs and each API's `check_api_call_correctness`),
`lv3_evaluator.py` (level 3). Paper protocol: qiancheng0/ToolRL `benchmarks/API-Bank/evaluate.py`.

**Paper protocol** (`protocol="paper"`, the ToolRL evaluation the GenEnv paper cites): ToolSearcher turns
are removed (as items and from the history); each remaining API call is one item, the tools offered are those
the dialogue's ToolSearcher calls returned plus any other API the dialogue calls (level 1: the dialogue's
APIs), listed as `N. Name: / Description: / Parameters:`; the
history is one user message (`<user>`, `<response>`, `<tool_call>` + `<obs>` lines) ending with "please only
make one tool call". The model answers `<think>..</think><tool_call>{"name", "parameters"}</tool_call>`.
As ToolRL's soft match, an item is correct when any parsed call has exactly the gold name and exactly equal
parameters (Python `==`: `"2"` != `2`; extra calls allowed); a JSON object without name/parameters is taken as
the parameters of the gold API (ToolRL does so). Differences: every `<tool_call>` block is read (ToolRL: the
last), "arguments" is accepted beside "parameters", and the `[Name(...)]` form is read when no JSON call is
found; ToolRL built its items from the Hugging Face JSON test files (399 / 67 / 131 items per level), these
come from the dialogue files (389 / 74 / 131 in the release). Accuracy per level and overall (micro over all
items). Paper's Table 1: GenEnv 7B 79.1, Qwen2.5-7B-Instruct 61.6.

One module per concern, each documenting its part of the protocol: `data` (finding and reading the files),
`apis` (the API descriptions), `prompts`, `parsing`, `scoring`, `summary` and `benchmark` (the `APIBank` class).
"""

# Every name the single module `genenv_cli.evals.api_bank` had stays importable from here.
from genenv_cli.callparse import (  # noqa: F401
    MAX_SOURCE,
    Call,
    CallParseError,
    load_json,
    parse_literal_source,
    parse_python_calls,
    parse_tool_calls,
)
from genenv_cli.errors import InputError  # noqa: F401
from genenv_cli.evals.api_bank.apis import (  # noqa: F401
    _JSON_TYPES,
    TOOL_SEARCHER_DOC,
    _catalog,
    _docs_from_apis_dir,
    _literal,
    _tool_schema,
)
from genenv_cli.evals.api_bank.benchmark import APIBank  # noqa: F401
from genenv_cli.evals.api_bank.data import (  # noqa: F401
    _DOWNLOAD_DIRS,
    _LEVEL3_URL,
    _LIST_URL,
    _RAW_URL,
    COMMIT,
    HF_REPO,
    HF_REVISION,
    LEVEL_DIRS,
    LEVELS,
    REPO,
    VERSION,
    _doc_from_found,
    _find_level3,
    _found_tools,
    _Layout,
    _layout,
    _level_of_folder,
    _Point,
    _points_from_dialogue,
    _read_dialogue,
    _read_level3,
)
from genenv_cli.evals.api_bank.parsing import (  # noqa: F401
    _BRACKET_START,
    _TAG_BLOCK,
    _THINK,
    _bracket_calls,
    _strip_think,
    parse_official,
    parse_paper,
)
from genenv_cli.evals.api_bank.prompts import (  # noqa: F401
    OFFICIAL_PROMPT,
    PAPER_FINAL_USER,
    PAPER_SYSTEM,
    _call_text,
    _doc,
    _official_messages,
    _paper_messages,
    _result_output,
)
from genenv_cli.evals.api_bank.scoring import (  # noqa: F401
    _CAMEL,
    _NUMBER,
    _RULES,
    _RULES_LV3,
    _canon,
    _devices,
    _jaccard,
    _kw_words,
    _month_day,
    _norm_date,
    _text,
    _value_ok,
    check_official,
)
from genenv_cli.evals.api_bank.summary import PAPER_REFERENCE  # noqa: F401
from genenv_cli.evals.base import PROTOCOLS, Benchmark, EvalSample, LoadedData, Verdict  # noqa: F401
from genenv_cli.evals.datasource import no_data_error, sha256_paths, try_download  # noqa: F401
from genenv_cli.jsonio import json_lines  # noqa: F401
