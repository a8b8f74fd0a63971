"""Reading a case's ``steps:``: each entry's key and shorthand interpreted into its typed step,
and where this runtime's steps may stand.

A step is a single-key mapping; its key picks the class
(:data:`archmax_temporal.client.testing.steps.STEP_MODELS`, ``judge`` read as ``grade``), its value
is the step's mapping or one of its shorthands (``parked: decision``, ``raised: <code>``, ``send:
"<message>"``). An assertion needs an action above it; a ``crash`` arms the action right after it,
an ``advance`` needs a session, a ``redeliver`` repeats the ``send``, ``decide`` or ``deliver``
before it.
"""

from __future__ import annotations

import datetime
from typing import Any, Final, cast

from archmax_temporal.client.testing.case_issues import CaseIssues, listed, suggestion
from archmax_temporal.client.testing.steps import (
    ACTION_KINDS,
    CRASH_ARMS,
    DEPRECATED_STEP_ALIASES,
    EXTENSION_STEP_KINDS,
    REDELIVERABLE,
    STEP_KINDS,
    STEP_MODELS,
    CaseStep,
    ParkedStep,
    RaisedStep,
)
from archmax_temporal.workflows.durations import InvalidUntilError, relative_duration

ADVANCE_MAX: Final = datetime.timedelta(days=3650)
"""The furthest one ``advance`` moves the clock (ten years)."""


def _either(keys: tuple[str, ...]) -> str:
    """``a, b or c``."""
    return f"{', '.join(keys[:-1])} or {keys[-1]}" if len(keys) > 1 else keys[0]


_STEP_SHAPES: Final = {key: cls.shape for key, cls in STEP_MODELS.items() if cls.shape is not None}


class StepParser(CaseIssues):
    """Builds the steps of one document, its issues added to the document's."""

    def steps(self, value: Any) -> list[CaseStep]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail("steps", "must be a list of single-key step mappings")
            return []
        steps: list[CaseStep] = []
        acted = False
        for index, entry in enumerate(value):
            path = f"steps[{index}]"
            if not isinstance(entry, dict) or len(entry) != 1:
                got = (
                    f"a mapping with {len(entry)} keys ({listed(str(k) for k in entry)})"
                    if isinstance(entry, dict)
                    else type(entry).__name__
                    if entry is not None
                    else "null"
                )
                self.fail(
                    path,
                    f"a step must be a single-key mapping such as send: or reachedState: "
                    f"(got {got}); write each action and assertion as its own list entry",
                )
                continue
            ((key, body),) = entry.items()
            key = str(key)
            written_as = key
            key = DEPRECATED_STEP_ALIASES.get(key, key)
            if key not in STEP_MODELS:
                known = STEP_KINDS + EXTENSION_STEP_KINDS
                hint = suggestion(written_as, known) or (
                    f"; this runtime's extensions: {listed(EXTENSION_STEP_KINDS)}"
                )
                self.fail(
                    f"{path}.{written_as}",
                    f"unknown step key; known keys: {listed(STEP_KINDS)}{hint}",
                )
                continue
            if key in ACTION_KINDS or key in ("advance", "redeliver"):
                acted = True
            elif key == "crash":
                pass  # it arms the action after it: the order is checked below
            elif not acted:
                acted = True  # reported once, at the first assertion with no action above it
                self.fail(
                    f"{path}.{written_as}",
                    "an assertion needs an action above it (send, decide or deliver): it "
                    "evaluates against the view of the nearest action before it",
                )
            step = self.step(f"{path}.{written_as}", index, key, written_as, body)
            if step is not None:
                steps.append(step)
        self.order(value)
        return steps

    def order(self, entries: list[Any]) -> None:
        """Where this runtime's steps may stand: a ``crash`` right before the action it arms,
        an ``advance`` after the session exists, a ``redeliver`` after what it sends again."""
        keys = [
            str(next(iter(entry))) if isinstance(entry, dict) and len(entry) == 1 else None
            for entry in entries
        ]
        for index, key in enumerate(keys):
            path = f"steps[{index}].{key}"
            before = [k for k in keys[:index] if k in ACTION_KINDS]
            if key == "crash":
                after = keys[index + 1] if index + 1 < len(keys) else None
                if after not in CRASH_ARMS:
                    got = f"got {after}" if after else "nothing follows it"
                    self.fail(
                        path,
                        "a crash arms the action right after it, which must be "
                        f"{_either(CRASH_ARMS)} ({got})",
                    )
            elif key == "advance" and not before:
                self.fail(
                    path,
                    "advance moves the clock of the case's session: a send must come before it",
                )
            elif key == "redeliver":
                previous = next(
                    (
                        k
                        for k in reversed(keys[:index])
                        if k is not None
                        and k != "redeliver"
                        and k in STEP_MODELS
                        and (STEP_MODELS[k].is_action)
                    ),
                    None,
                )
                if previous == "advance":
                    self.fail(
                        path,
                        "redeliver cannot follow an advance: once the clock moved on the "
                        "session may have closed idle and reopened in a new run, which no "
                        "longer knows the first delivery's idempotency key (Temporal answers "
                        "an update id within its run only); put the redeliver right after the "
                        "send, decide or deliver it repeats",
                    )
                elif previous not in REDELIVERABLE:
                    got = f"the action before it is {previous}" if previous else "none came"
                    self.fail(
                        path,
                        f"redeliver sends the previous send, decide or deliver again ({got})",
                    )

    def step(
        self, path: str, index: int, kind: str, written_as: str, value: Any
    ) -> CaseStep | None:
        model = STEP_MODELS[kind]
        fields = self.step_fields(path, kind, value)
        if fields is None:
            return None
        if kind == "grade":
            fields["written_as"] = written_as
        return cast("CaseStep | None", self.build(model, {**fields, "index": index}, path))

    def step_fields(self, path: str, kind: str, value: Any) -> dict[str, Any] | None:
        """The model fields of one step, its shorthand forms expanded; None on an issue."""
        if kind == "send":
            if not isinstance(value, str) or not value.strip():
                self.fail(path, 'must be the non-empty user message (send: "<message>")')
                return None
            return {"message": value}
        if kind in ("succeeded", "usedNoTools", "noTraversal"):
            if value is not True:
                self.fail(path, f"must be true ({kind}: true)")
                return None
            return {}
        if kind in ("reachedState", "triggerArrival"):
            field = "state" if kind == "reachedState" else "trigger"
            noun = "a state slug" if kind == "reachedState" else "a trigger id"
            if not isinstance(value, str) or not value.strip():
                self.fail(path, f"must be {noun} ({kind}: <{field}>)")
                return None
            return {field: value}
        if kind == "advance":
            return self.advance(path, value)
        if kind == "redeliver":
            if value != {}:
                self.fail(path, "takes nothing: write redeliver: {}")
                return None
            return {}
        if kind == "parked":
            return self.parked(path, value)
        if kind == "raised":
            return self.raised(path, value)
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping {_STEP_SHAPES[kind]}")
            return None
        body = self.body(path, value, STEP_MODELS[kind])
        if body is None:
            return None
        if kind == "deliver":
            variables = body.get("variables")
            if isinstance(variables, dict):
                self.variable_names(f"{path}.variables", variables, seeded=True)
                for name, item in variables.items():
                    self.json_value(f"{path}.variables.{name}", item)
        elif kind == "reply":
            return self.reply(path, body)
        elif kind in ("calledTool", "notCalledTool", "blockedTool"):
            tool_input = body.get("input")
            if isinstance(tool_input, dict):
                self.matcher_values(f"{path}.input", tool_input)
        elif kind == "trail":
            if not any(body.get(k) is not None for k in ("to", "kind", "reason")):
                self.fail(path, "needs at least one of to, kind or reason beside count")
                return None
            if "kind" in body:
                body["trail_kind"] = body.pop("kind")
        elif kind == "variables":
            return self.variables_assertion(path, body)
        return body

    def advance(self, path: str, value: Any) -> dict[str, Any] | None:
        if not isinstance(value, str) or not value.strip():
            self.fail(path, "must be a duration in until's relative syntax (90s, 30m, 2h, 3d)")
            return None
        try:
            duration = relative_duration(value)
        except InvalidUntilError as exc:
            self.fail(path, str(exc))
            return None
        if duration <= datetime.timedelta(0):
            self.fail(path, "must be a duration above zero (90s, 30m, 2h, 3d)")
            return None
        if duration > ADVANCE_MAX:
            self.fail(path, f"moves the clock at most {ADVANCE_MAX.days}d at once")
            return None
        return {"by": value.strip(), "duration": duration}

    def parked(self, path: str, value: Any) -> dict[str, Any] | None:
        if value is True:
            return {}
        if value in ("decision", "input"):
            return {"channel": value}
        if isinstance(value, dict):
            body = self.body(path, value, ParkedStep)
            if body is not None and not body:
                self.fail(path, "an empty mapping pins nothing (write parked: true)")
                return None
            return body
        self.fail(path, "must be true, decision, input or { channel?, state? }")
        return None

    def raised(self, path: str, value: Any) -> dict[str, Any] | None:
        if value is True:
            return {}
        if isinstance(value, str) and value.strip():
            return {"code": value}
        if isinstance(value, dict):
            body = self.body(path, value, RaisedStep)
            if body is None:
                return None
            if not body:
                self.fail(path, "an empty mapping pins nothing (write raised: true)")
                return None
            reason = body.get("reason")
            if isinstance(reason, str):
                self.regex(f"{path}.reason", reason)
            return body
        self.fail(path, "must be true, an error code or { code?, reason? }")
        return None

    def reply(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if body.get("includes") is None and body.get("excludes") is None:
            self.fail(path, "needs includes, excludes or both")
            return None
        fields: dict[str, Any] = {}
        before = len(self.issues)
        for key in ("includes", "excludes"):
            if body.get(key) is None:
                continue
            tokens = body[key] if isinstance(body[key], list) else [body[key]]
            if not tokens:
                self.fail(f"{path}.{key}", "must name at least one token")
                continue
            for position, token in enumerate(tokens):
                where = (
                    f"{path}.{key}"
                    if not isinstance(body[key], list)
                    else (f"{path}.{key}[{position}]")
                )
                if not isinstance(token, str) or not token:
                    self.fail(where, "a token is a non-empty substring or /pattern/flags string")
                else:
                    self.regex(where, token)
            fields[key] = tokens
        return fields if len(self.issues) == before else None

    def variables_assertion(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        expect = body.get("expect")
        if expect is None:
            self.fail(f"{path}.expect", "required (a mapping of variable name to value)")
            return None
        if not isinstance(expect, dict) or not expect:
            self.fail(f"{path}.expect", "must be a non-empty mapping of variable name to value")
            return None
        self.variable_names(f"{path}.expect", expect, seeded=False)
        for name, item in expect.items():
            self.json_value(f"{path}.expect.{name}", item)
        paths = body.get("path")
        if isinstance(paths, dict):
            for name, dotted in paths.items():
                if name not in expect:
                    self.fail(f"{path}.path.{name}", "names no variable of expect")
                elif not isinstance(dotted, str) or not all(dotted.split(".")):
                    self.fail(
                        f"{path}.path.{name}",
                        "must be a dotted path into the value (items.-1.sku)",
                    )
        locked = body.get("locked")
        if isinstance(locked, dict):
            self.variable_names(f"{path}.locked", locked, seeded=False)
        return body
