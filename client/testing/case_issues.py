"""A case document's problems, each addressed by its path and all reported at once, and the
checks every part of a case shares.

The schema fails closed: an unknown key is an error naming the known ones, so a typo'd
``reachedstate:`` cannot silently pass. Every problem of a document is reported at once, each
addressed by its path (``steps[3].reply.includes[1]: ...``), in :class:`CaseSchemaError`.
"""

from __future__ import annotations

import datetime
import difflib
import math
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from archmax_temporal.client.testing.steps import TrailAssertionStep
from archmax_temporal.workflows.matching import regex_problem
from archmax_temporal.workflows.spec import VARIABLE_NAME
from archmax_temporal.workflows.variables import invalid_names


class CaseSchemaError(Exception):
    """A case document does not validate.

    ``issues`` holds every problem found, each ``"<path>: <message>"`` (``steps[3].reachedstate:
    unknown step key; known keys: ...``), so an author fixes them all in one pass.
    """

    def __init__(self, file: str, issues: list[str]) -> None:
        self.file = file
        self.issues = list(issues)
        lines = "\n".join(f"  - {issue}" for issue in self.issues)
        super().__init__(f"{file}: invalid test case\n{lines}")


def listed(keys: Any) -> str:
    """``a, b, c``: the known keys as an error lists them."""
    return ", ".join(keys)


def suggestion(key: str, known: tuple[str, ...]) -> str:
    """`` (did you mean "reachedState"?)`` for a near miss of a known key, else nothing."""
    folded = {k.lower(): k for k in known}
    close = difflib.get_close_matches(key.lower(), list(folded), n=1, cutoff=0.8)
    return f' (did you mean "{folded[close[0]]}"?)' if close else ""


class CaseIssues:
    """Collects the issues of one document, shared by the parsers of its parts (one list:
    the document's and its steps' issues in the order they were found), and the checks they
    share."""

    def __init__(self, issues: list[str] | None = None) -> None:
        self.issues: list[str] = [] if issues is None else issues

    def fail(self, path: str, message: str) -> None:
        line = f"{path}: {message}"
        if line not in self.issues:
            self.issues.append(line)

    def variable_names(self, path: str, value: dict[Any, Any], *, seeded: bool) -> None:
        names = list(value)
        bad = (
            invalid_names(names)
            if seeded
            else [n for n in names if not isinstance(n, str) or not VARIABLE_NAME.match(n)]
        )
        for name in bad:
            if name == "trigger":
                self.fail(
                    f"{path}.trigger",
                    "'trigger' is set by the runtime from the trigger id, never seeded "
                    "(write the case's trigger: { id })",
                )
            else:
                self.fail(f"{path}.{name}", "invalid variable name (^[a-z][a-z0-9_]*$)")

    def body(
        self,
        path: str,
        value: dict[Any, Any],
        model: type[BaseModel],
        extra_hint: str = "",
    ) -> dict[str, Any] | None:
        """``value`` if it names only the keys ``model`` declares (by their written names)."""
        known = _written_keys(model)
        unknown = [key for key in value if key not in known]
        for key in unknown:
            self.fail(f"{path}.{key}", f"unknown key; known keys: {listed(known)}{extra_hint}")
        return None if unknown else {str(k): v for k, v in value.items()}

    def build(self, model: type[Any], fields: dict[str, Any], path: str) -> Any:
        try:
            return model.model_validate(fields)
        except ValidationError as exc:
            self.model_issues(exc, path, fields)
            return None

    def model_issues(self, exc: ValidationError, prefix: str, data: Any) -> None:
        for error in exc.errors():
            where = _address(prefix, error["loc"], data, missing=error["type"] == "missing")
            if error["type"] == "missing":
                self.fail(where, "required")
            elif error["type"] == "literal_error":
                expected = _sorted_choices(str(error.get("ctx", {}).get("expected", "")))
                self.fail(where, f"must be one of {expected}")
            else:
                self.fail(where, str(error["msg"]).removeprefix("Value error, "))

    def regex(self, path: str, text: str) -> None:
        problem = regex_problem(text)
        if problem is not None:
            self.fail(path, problem)

    def matcher_values(self, path: str, value: Any) -> None:
        """Every string of a partial-match pattern that is a regex must compile."""
        if isinstance(value, dict):
            for key, item in value.items():
                self.matcher_values(f"{path}.{key}", item)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.matcher_values(f"{path}[{index}]", item)
        elif isinstance(value, str):
            self.regex(path, value)
        else:
            self.json_value(path, value)

    def json_value(self, path: str, value: Any) -> bool:
        problem = _json_problem(value)
        if problem is not None:
            self.fail(path, problem)
            return False
        return True


_INTERNAL_FIELDS: Final = frozenset({"index", "kind", "written_as", "trail_kind"})


def _written_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys an author writes for ``model``: aliases first, internal fields left out."""
    keys = [
        info.alias or name
        for name, info in model.model_fields.items()
        if name not in _INTERNAL_FIELDS
    ]
    if model is TrailAssertionStep:
        keys.insert(1, "kind")
    return tuple(keys)


def _address(prefix: str, loc: tuple[int | str, ...], data: Any, *, missing: bool) -> str:
    """``prefix`` extended by the parts of ``loc`` that index into ``data``.

    A part that indexes nothing is a pydantic tag (a union branch) and is dropped, except the
    last part of a ``missing`` error: that is the absent key itself.
    """
    path = prefix
    node = data
    for position, part in enumerate(loc):
        if _indexes(node, part):
            node = node[part]
        elif not (missing and position == len(loc) - 1):
            continue
        if isinstance(part, int):
            path = f"{path}[{part}]"
        else:
            name = "kind" if part == "trail_kind" else part
            path = f"{path}.{name}" if path else name
    return path or "<root>"


def _indexes(node: Any, part: object) -> bool:
    if isinstance(node, dict):
        return part in node
    if isinstance(node, list):
        return isinstance(part, int) and 0 <= part < len(node)
    return False


def _json_problem(value: Any) -> str | None:
    """Why ``value`` is no JSON value (a YAML date, a set, binary data), or None."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else "must be a finite number (JSON has no NaN)"
    if isinstance(value, list):
        return next((p for p in map(_json_problem, value) if p), None)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            return "mapping keys must be strings (quote them)"
        return next((p for p in map(_json_problem, value.values()) if p), None)
    if isinstance(value, datetime.date | datetime.datetime):
        return "a YAML date is not a JSON value (quote it to make it a string)"
    return f"a YAML {type(value).__name__} is not a JSON value"


def _sorted_choices(expected: str) -> str:
    """Pydantic's ``'a', 'b' or 'c'`` in sorted order: its own order varies between processes
    (string literals are hashed), and a diagnostic must read the same on every run."""
    head, _, last = expected.rpartition(" or ")
    choices = (
        [c.strip() for c in head.split(",") if c.strip()] + [last.strip()]
        if head
        else [last.strip()]
    )
    choices = sorted(c for c in choices if c)
    if len(choices) < 2:
        return expected
    return ", ".join(choices[:-1]) + " or " + choices[-1]
