"""BFCL's categories, their groups and file names, the pinned data commits, and which checker and language each
category uses (BFCL dispatches on the category's name)."""

from __future__ import annotations

NON_LIVE = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
            "irrelevance"]
LIVE = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
        "live_relevance"]
OFFICIAL_CATEGORIES = NON_LIVE + LIVE
AST_CATEGORIES = [c for c in OFFICIAL_CATEGORIES if "relevance" not in c]
PAPER_CATEGORY = "multi_turn_long_context"

GROUPS = {
    "all": OFFICIAL_CATEGORIES,
    "non_live": NON_LIVE,
    "live": LIVE,
    "python": [c for c in OFFICIAL_CATEGORIES if c not in ("simple_java", "simple_javascript")],
    "non_python": ["simple_java", "simple_javascript"],
}
V3_NAMES = {"simple_python": "simple", "simple_java": "java", "simple_javascript": "javascript"}
ALIASES = {v: k for k, v in V3_NAMES.items()}

UNSUPPORTED = {
    "v4": ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context",
           "memory_kv", "memory_vector", "memory_rec_sum", "web_search_base", "web_search_no_snippet",
           "format_sensitivity"],
    "v3": ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"],
}
UNSUPPORTED_WHY = ("not supported yet: BFCL scores multi-turn, memory and web-search categories by executing "
                   "the calls in its simulated backends (or an agent loop), and format_sensitivity by "
                   "re-running the AST categories under other prompt formats; multi_turn_long_context is "
                   "available per turn with --protocol paper")

# GitHub commits whose data are the versions genenv downloads: v4 = the state shipped in bfcl-eval
# 2026.3.23; v3 = the last commit before the v4 release renamed the files.
COMMITS = {"v4": "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8", "v3": "cd9429ccf3d4d04156affe883c495b3b047e6b64"}
RAW_URL = ("https://raw.githubusercontent.com/ShishirPatil/gorilla/{commit}/"
           "berkeley-function-call-leaderboard/bfcl_eval/data/{path}")

MULTI_TURN_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json", "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json", "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}

PAPER_REFERENCE = {"GenEnv 7B": 41.8, "Qwen2.5-7B-Instruct": 7.0}


def language_of(category: str) -> str:
    if category == "simple_java":
        return "java"
    if category == "simple_javascript":
        return "javascript"
    return "python"


def checker_kind(category: str) -> str:
    """Which AST check BFCL applies (it dispatches on the category's name)."""
    if "parallel" in category:
        return "parallel"
    if "multiple" in category:
        return "multiple"
    return "simple"


def file_name(category: str, version: str) -> str:
    return f"BFCL_{version}_{V3_NAMES.get(category, category) if version == 'v3' else category}.json"
