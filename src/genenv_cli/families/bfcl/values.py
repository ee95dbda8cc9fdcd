"""BFCL's type converters: a Java or JavaScript value, which the model writes as source text, becomes the Python
value the checker compares (`java_value`, `js_value`); and the type names each language's function documents
use (`JAVA_TYPES`, `JS_TYPES`, `PY_TYPES`).

Rules from `bfcl_eval/eval_checker/ast_eval/type_convertor/{java,js}_type_converter.py` (ShishirPatil/gorilla;
the `bfcl-eval` 2026.3.23 wheel). Text that does not fit its type stays a string, as there.
"""

from __future__ import annotations

import re
from typing import Any

from genenv_cli.families.bfcl.calls import CheckError

JAVA_TYPES: dict[str, type] = {
    "byte": int, "short": int, "integer": int, "float": float, "double": float, "long": int,
    "boolean": bool, "char": str, "Array": list, "ArrayList": list, "Set": set, "HashMap": dict,
    "Hashtable": dict, "Queue": list, "Stack": list, "String": str, "any": str,
}
JS_TYPES: dict[str, type] = {
    "String": str, "integer": int, "float": float, "Bigint": int, "Boolean": bool, "dict": dict,
    "array": list, "any": str,
}
PY_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
    "dict": dict, "any": str,
}
NESTED_PY = ("array", "tuple")
NESTED_CONVERTED = ("Array", "ArrayList", "array")

_INT = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")


def _java_scalar_text(text: str) -> Any:
    """A Java literal read without knowing its type (elements of a collection, map values)."""
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return float(text[:-1])
    return _number_or_text(text)


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def java_value(text: str, java_type: str, item_type: str | None = None) -> Any:
    """BFCL's Java type converter: the string a model gave for a parameter of `java_type` -> the value
    compared with the possible answer. Text that does not fit the type stays a string."""
    if java_type not in JAVA_TYPES:
        raise CheckError(f"unsupported Java type {java_type!r}")
    if java_type in ("byte", "short", "integer"):
        return int(text) if _INT.match(text) else str(text)
    if java_type == "float":
        return float(text[:-1]) if _JAVA_FLOAT.match(text) else str(text)
    if java_type == "double":
        return float(text) if _JAVA_DOUBLE.match(text) else str(text)
    if java_type == "long":
        return int(text[:-1]) if _JAVA_LONG.match(text) else str(text)
    if java_type == "boolean":
        return text == "true" if text in ("true", "false") else str(text)
    if java_type in ("char", "String", "any"):
        return str(text)  # BFCL's char pattern never matches, so a char stays its text
    if java_type == "ArrayList":
        return _java_arraylist(text, item_type)
    if java_type == "Array":
        m = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)
        if not m:
            return text
        parts = [p.strip() for p in m.group(1).split(",") if p.strip()]
        return [java_value(p, item_type) if item_type else _java_scalar_text(p) for p in parts]
    if java_type == "HashMap":
        m = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", text, re.DOTALL)
        if m:
            entries = {}
            if m.group(1).strip():
                for key, val in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", m.group(1)):
                    entries[key] = _java_scalar_text(val.strip())
            return entries
        return {} if re.search(r"new\s+HashMap<.*?>\s*\(\)", text) else text
    raise CheckError(f"BFCL does not convert Java {java_type} values")


def _java_arraylist(text: str, item_type: str | None) -> Any:
    def element(raw: str) -> Any:
        raw = raw.strip()
        if item_type in ("char", "String"):
            return raw[1:-1]
        return java_value(raw, item_type) if item_type else _java_scalar_text(raw)

    m = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text)
    if m:
        return [element(p) for p in m.group(1).split(",")]
    m = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL)
    if m:
        return [element(p) for p in re.findall(r"add\((.+?)\)", m.group(1))]
    if re.search(r"new\s+ArrayList<\w*>\(\)", text):
        return []
    return text


def _js_scalar_text(text: str) -> Any:
    text = text.strip()
    if text == "true":
        return True
    if text == "false":
        return False
    if len(text) >= 1 and ((text[0] == text[-1] == '"') or (text[0] == text[-1] == "'")):
        return text[1:-1]
    return _number_or_text(text)


def js_value(text: str, js_type: str, item_type: str | None = None) -> Any:
    """BFCL's JavaScript type converter (see `java_value`)."""
    if js_type not in JS_TYPES:
        raise CheckError(f"unsupported JavaScript type {js_type!r}")
    if js_type == "String":
        quoted = (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'"))
        return text[1:-1] if quoted else str(text)
    if js_type == "integer":
        return int(text) if _INT.match(text) else str(text)
    if js_type == "float":
        return float(text) if re.match(r"^-?\d+(\.\d+)?$", text) else str(text)
    if js_type == "Bigint":
        return int(text[:-1]) if re.match(r"^-?\d+n$", text) else str(text)
    if js_type == "Boolean":
        return text == "true" if text in ("true", "false") else str(text)
    if js_type == "any":
        return str(text)
    return _js_collection(text, js_type, item_type)


def _js_collection(code: str, kind: str, item_type: str | None = None) -> Any:
    code = code.strip()
    if kind == "array":
        try:
            m2 = re.match(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)", code)
            if m2:
                rows = []
                for idx, inner in enumerate(re.findall(r"\[(.*?)\]", m2.group(0))):
                    inner = inner.strip()
                    if idx == 0 and inner.startswith("["):
                        inner = inner[1:]
                    rows.append([_js_scalar_text(e.strip()) for e in inner.split(",")])
                return rows
            m1 = re.match(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)", code)
            if not m1:
                return code
            body = m1.group(1) if m1.group(1) is not None else m1.group(2)
            body = (body or "").strip()
            parts = body.split(",") if body else []
            if item_type:
                return [js_value(p.strip(), item_type) for p in parts]
            return [_js_scalar_text(p.strip()) for p in parts]
        except (ValueError, CheckError, IndexError):
            return code
    if code == "{}":
        return {}
    m = re.match(r"\{(.*?)\}", code)
    if not m:
        return code
    out: dict[str, Any] = {}
    for key, val in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", m.group(1)):
        key = key.strip().strip("'\"")
        val = val.strip()
        if val.startswith("[") and val.endswith("]"):
            out[key] = _js_collection(val, "array")
        elif val.startswith("{") and val.endswith("}"):
            out[key] = _js_collection(val, "dict")
        else:
            out[key] = _js_scalar_text(val.strip("'\""))
    return out
