"""BFCL's AST checker, reimplemented: decoded calls judged against a possible answer (`check_calls`).

Rules from `bfcl_eval/eval_checker/ast_eval/ast_checker.py` (ShishirPatil/gorilla; the `bfcl-eval` 2026.3.23
wheel; unchanged since BFCL v3) and `utils.py` (`is_empty_output`: when an answer "holds no call").
Checked once against BFCL's own decoder, parsers and checker (tree-sitter 0.21) on the v3 and v4 data: the
same verdicts on ~65,000 gold and mutated answers.

Verdict rules, per category kind:
  simple: exactly one call; multiple: as many calls as possible answers (one), judged against the function
  the possible answer names; parallel / parallel_multiple: the same number of calls, each possible answer
  matched greedily to the first still-unmatched call that passes (any order).
  One call passes when: the name equals the function's name; every required parameter is present; every
  given parameter is both documented and in the possible answer; Java/JavaScript values are strings,
  converted by BFCL's type converters (`values.py`); the Python type matches (`int` accepted for `float`; a
  value whose type equals the possible answer's type is accepted as a "variable" and compared without
  normalisation; list elements are type-checked one level deep); strings are compared after
  `standardize_string`, lists element-wise after it, dicts key by key (a possible-answer value list holding
  "" makes that key optional), lists of dicts position by position; other values must be in the allowed
  list; a possible-answer parameter that is not given must list "" among its allowed values.
"""

from __future__ import annotations

from typing import Any

from genenv_cli.core.callparse import (
    standardize_string,  # BFCL's string normalisation; the tool_call domain uses it too
)
from genenv_cli.families.bfcl.calls import BCall, CheckError
from genenv_cli.families.bfcl.values import (
    JAVA_TYPES,
    JS_TYPES,
    NESTED_CONVERTED,
    NESTED_PY,
    PY_TYPES,
    java_value,
    js_value,
)


def _std(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


class _Fail(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def _answer_type(allowed: Any) -> type | None:
    """The type of the first allowed value that is not "" (BFCL: a "variable" has this type)."""
    for item in allowed:
        if item != "":
            return type(item)
    return None


def _type_check(param: str, value: Any, allowed: Any, expected: type, nested: type | None) -> bool:
    """BFCL's type check. Returns is_variable; raises _Fail on a type error."""
    ans_type = _answer_type(allowed)
    is_variable = ans_type is not None and ans_type is not expected
    if type(value) is expected:
        if nested is None:
            return is_variable
        for option in allowed:
            ok = True
            if type(option) is list:
                for element in value:
                    try:
                        _type_check(param, element, option, nested, None)
                    except _Fail:
                        ok = False
                        break
            if ok:
                return is_variable
        raise _Fail("type_error:nested", f"Nested type checking failed for parameter {param!r}. Expected "
                    f"inner type {nested.__name__}. Parameter value: {value!r}.")
    if ans_type is not None and type(value) is ans_type:
        return True
    raise _Fail("type_error:simple", f"Incorrect type for parameter {param!r}. Expected type "
                f"{expected.__name__}, got {type(value).__name__}. Parameter value: {value!r}.")


def _dict_ok(param: str, value: dict, options: Any) -> None:
    failure = _Fail("dict_checker:unclear", f"Invalid value for parameter {param!r}: {value!r}.")
    for option in options:
        if option == "":
            continue
        try:
            for key, val in value.items():
                if key not in option:
                    raise _Fail("value_error:dict_key", f"Unexpected dict key parameter: {key!r}.")
                if _std(val) not in [_std(x) for x in option[key]]:
                    raise _Fail("value_error:dict_value", f"Invalid value for parameter {key!r}: {val!r}. "
                                f"Expected one of {option[key]!r}.")
            for key, allowed in option.items():
                if key not in value and "" not in allowed:
                    raise _Fail("value_error:dict_key", f"Missing dict key parameter: {key!r}.")
            return
        except _Fail as exc:
            failure = exc
    raise failure


def _list_dict_ok(param: str, value: list, options: Any) -> None:
    failure = _Fail("list_dict_checker:unclear", f"Invalid value for parameter {param!r}: {value!r}.")
    for option in options:
        if len(value) != len(option):
            failure = _Fail("value_error:list_dict_count", "Wrong number of dictionaries in the list.")
            continue
        try:
            for item, expected in zip(value, option, strict=True):
                _dict_ok(param, item, [expected])
            return
        except _Fail as exc:
            failure = exc
    raise failure


def _check_one(doc: dict, call: BCall, answer: dict, language: str) -> None:
    """One call against one possible answer `{func_name: {param: [allowed values]}}`; raises _Fail."""
    allowed_params = next(iter(answer.values()))
    name = doc["name"]
    params = doc.get("parameters") or {}
    props = params.get("properties") or {}
    if call.name != name:
        raise _Fail("simple_function_checker:wrong_func_name", f"Function name {name!r} not found in model output.")
    for req in params.get("required") or []:
        if req not in call.args:
            raise _Fail("simple_function_checker:missing_required", f"Missing required parameter: {req!r}.")
    for param, value in call.args.items():
        if param not in props or param not in allowed_params:
            raise _Fail("simple_function_checker:unexpected_param", f"Unexpected parameter: {param!r}.")
        value, expected, nested = _typed_value(param, value, props[param], language)
        _check_value(param, value, allowed_params[param], expected, nested)
    for param, allowed in allowed_params.items():
        if param not in call.args and "" not in allowed:
            raise _Fail("simple_function_checker:missing_optional", f"Optional parameter {param!r} not "
                        f"provided and not marked as optional.")


def _typed_value(param: str, value: Any, spec: dict, language: str) -> tuple[Any, type, type | None]:
    """(value, expected type, expected element type) of one given parameter: a Java/JavaScript value (a string)
    converted by BFCL's converters, a Python tuple as a list and an int given for a float as a float."""
    type_name = spec.get("type")
    nested: type | None = None
    if language in ("java", "javascript"):
        table = JAVA_TYPES if language == "java" else JS_TYPES
        if type_name not in table:
            raise CheckError(f"unsupported {language} type {type_name!r} for parameter {param!r}")
        expected = table[type_name]
        if type(value) is not str:
            raise _Fail(f"type_error:{'java' if language == 'java' else 'js'}", f"Incorrect type for "
                        f"parameter {param!r}. Expected type String, got {type(value).__name__}. "
                        f"Parameter value: {value!r}.")
        item_type = None
        if type_name in NESTED_CONVERTED:
            item_type = (spec.get("items") or {}).get("type")
            if item_type not in table:
                raise CheckError(f"unsupported {language} element type {item_type!r} for {param!r}")
            nested = table[item_type]
        convert = java_value if language == "java" else js_value
        value = convert(value, type_name, item_type)
    else:
        if type_name not in PY_TYPES:
            raise CheckError(f"unsupported type {type_name!r} for parameter {param!r}")
        expected = PY_TYPES[type_name]
        if type_name in NESTED_PY:
            item_type = (spec.get("items") or {}).get("type")
            if item_type is not None:
                if item_type not in PY_TYPES:
                    raise CheckError(f"unsupported element type {item_type!r} for parameter {param!r}")
                nested = PY_TYPES[item_type]
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if language == "python" and type_name == "float" and type(value) is int:
        value = float(value)
    return value, expected, nested


def _check_value(param: str, value: Any, allowed: list, expected: type, nested: type | None) -> None:
    """One typed value against its allowed values: by type first, then dicts, lists of dicts, strings and lists
    by their own rules (unless the value is a "variable"), anything else by membership; raises _Fail."""
    is_variable = _type_check(param, value, allowed, expected, nested)
    if not is_variable:
        if expected is dict:
            _dict_ok(param, value, allowed)
            return
        if expected is list and nested is dict:
            _list_dict_ok(param, value, allowed)
            return
        if expected is str:
            if standardize_string(value) not in [standardize_string(x) for x in allowed if type(x) is str]:
                raise _Fail("value_error:string", f"Invalid value for parameter {param!r}: {value!r}. "
                            f"Expected one of {allowed!r}. Case insensitive.")
            return
        if expected is list:
            if [_std(x) for x in value] not in [[_std(x) for x in option] for option in allowed]:
                raise _Fail("value_error:list/tuple", f"Invalid value for parameter {param!r}: "
                            f"{value!r}. Expected one of {allowed!r}.")
            return
    if value not in allowed:
        raise _Fail("value_error:others", f"Invalid value for parameter {param!r}: {value!r}. "
                    f"Expected one of {allowed!r}.")


def _find_doc(docs: list[dict] | dict, name: str) -> dict:
    if isinstance(docs, dict):
        return docs
    for doc in docs:
        if doc.get("name") == name:
            return doc
    raise CheckError(f"the possible answer names {name!r}, which no function document defines")


def check_calls(docs: list[dict], calls: list[BCall], possible: list[dict], language: str,
                kind: str) -> tuple[bool, str]:
    """BFCL's AST verdict for decoded `calls`. `kind` is "simple", "multiple" or "parallel" (parallel and
    parallel_multiple). Returns (valid, "[error_type] message")."""
    try:
        if kind == "parallel":
            if len(calls) != len(possible):
                raise _Fail("parallel_function_checker_no_order:wrong_count", "Wrong number of functions.")
            used: set[int] = set()
            for i, answer in enumerate(possible):
                doc = _find_doc(docs, next(iter(answer)))
                for idx, call in enumerate(calls):
                    if idx in used:
                        continue
                    try:
                        _check_one(doc, call, answer, language)
                    except _Fail:
                        continue
                    used.add(idx)
                    break
                else:
                    raise _Fail("parallel_function_checker_no_order:cannot_find_match",
                                f"Could not find a matching function among the unmatched model calls for "
                                f"possible answer {i} ({next(iter(answer))}).")
            return True, ""
        if kind == "multiple":
            if len(calls) != len(possible):
                raise _Fail("multiple_function_checker:wrong_count", "Wrong number of functions.")
            _check_one(_find_doc(docs, next(iter(possible[0]))), calls[0], possible[0], language)
            return True, ""
        if len(calls) != 1:
            raise _Fail("simple_function_checker:wrong_count", "Wrong number of functions.")
        _check_one(docs[0], calls[0], possible[0], language)
        return True, ""
    except _Fail as exc:
        return False, f"[{exc.kind}] {exc.message}"
    except CheckError as exc:
        return False, f"[checker:unsupported] {exc}"
    except (TypeError, KeyError, AttributeError, IndexError, ValueError) as exc:
        # malformed possible answers or values the official checker would crash on
        return False, f"[checker:error] {type(exc).__name__}: {exc}"
