"""The pure hook rules: how a hook's answer is read (fail closed), its budget and identity,
what it is told, and the ``validate`` diagnostics of hook declarations."""

from __future__ import annotations

from pathlib import Path

import pytest

from archmax_temporal.client.testing.validate import validate_workflow
from archmax_temporal.workflows import hooks
from archmax_temporal.workflows.models import Message, ToolCall, Variable
from archmax_temporal.workflows.prompt import render_state_block
from archmax_temporal.workflows.spec import HookSpec, parse_spec
from tests.support.agents import write_workflow


class TestReadingAnswers:
    def test_nothing_is_ok_and_a_helper_object_is_its_verdict(self) -> None:
        assert hooks.script_verdict(None, True) == hooks.OK
        assert hooks.script_verdict({"verdict": "veto", "reason": "no"}, False) == hooks.veto("no")
        assert (
            hooks.script_verdict({"verdict": "correct", "reason": "x"}, False).verdict == "correct"
        )

    @pytest.mark.parametrize(
        ("value", "fragment"),
        [
            ({"allowed": True}, "keys: allowed"),
            (False, "false"),
            ("yes", "yes"),
            ({"verdict": "maybe"}, "keys: verdict"),
        ],
    )
    def test_any_other_value_vetoes_naming_it(self, value: object, fragment: str) -> None:
        verdict = hooks.script_verdict(value, False)
        assert verdict.verdict == "veto" and fragment in verdict.reason and not verdict.error

    def test_a_custom_executor_false_vetoes_and_a_non_object_is_no_opinion(self) -> None:
        assert hooks.custom_verdict(False) == hooks.veto("precondition not met")
        assert hooks.custom_verdict(None) == hooks.OK and hooks.custom_verdict("fine") == hooks.OK
        assert hooks.custom_verdict({"status": 200}).verdict == "veto"

    def test_a_rubric_answer_may_be_fenced_or_wrapped_and_garbage_vetoes_with_a_snippet(
        self,
    ) -> None:
        fenced = hooks.rubric_verdict('```json\n{"verdict": "ok", "reason": "fine"}\n```')
        assert fenced == hooks.HookVerdict(verdict="ok", reason="fine")
        wrapped = hooks.rubric_verdict('Sure! {"verdict": "correct", "reason": "cite"} done')
        assert wrapped.verdict == "correct"
        garbage = hooks.rubric_verdict("I think it is fine")
        assert garbage.verdict == "veto" and "I think it is fine" in garbage.reason

    def test_a_before_hook_correct_is_a_veto(self) -> None:
        assert hooks.on_entry(hooks.HookVerdict(verdict="correct", reason="r")) == hooks.veto("r")


class TestIdentity:
    def test_labels_kinds_and_budgets(self) -> None:
        script = HookSpec(script="hooks/a.js", max_iterations=2)
        rubric = HookSpec.model_validate({"rubric": {"instructions": "x", "max_iterations": 3}})
        custom = HookSpec.model_validate({"webhook": "https://x"})
        assert [hooks.hook_label(h, 1) for h in (script, rubric, custom)] == [
            "hooks/a.js",
            "rubric#1",
            "webhook",
        ]
        assert [hooks.correction_budget(h) for h in (script, rubric, custom)] == [2, 3, 0]
        assert hooks.custom_config(custom) == "https://x"
        assert hooks.hook_summary("before", "intake", "hooks/a.js") == (
            "hook before · intake · hooks/a.js"
        )

    @pytest.mark.parametrize(
        "path", ["/abs/hooks/a.js", "hooks/../x.js", "scripts/a.js", "hooks/a.ts", "hooks"]
    )
    def test_script_paths_outside_hooks_are_refused(self, path: str) -> None:
        assert hooks.script_path_problem(path) is not None

    def test_a_script_path_under_hooks_is_accepted_in_normal_form(self) -> None:
        assert hooks.script_path_problem("./hooks/sub/a.mjs") is None
        assert hooks.source_key("./hooks//sub/a.mjs") == "hooks/sub/a.mjs"


def test_hook_args_show_the_recent_transcript_and_plain_variables() -> None:
    transcript = [
        Message(role="user", content="hi"),
        Message(role="assistant", tool_calls=[ToolCall(id="1", name="ls", arguments="{}")]),
        Message(role="tool", tool_call_id="1", name="ls", content="scratchpad/"),
        Message(role="tool", content="[event] x", note="event"),
    ]
    args = hooks.hook_args(
        state="review",
        phase="after",
        trigger="manual",
        variables={"order": Variable(value={"id": 7}, locked=True)},
        transcript=transcript,
        from_state="review",
        to_state="done",
    )
    assert args["variables"] == {"order": {"id": 7}}
    assert [m["role"] for m in args["messages"]] == ["user", "assistant", "tool", "runtime"]
    assert args["messages"][1]["toolCalls"] == [{"name": "ls", "arguments": {}}]
    assert args["messages"][2]["tool"] == "ls" and args["messages"][3]["note"] == "event"
    assert (args["from"], args["to"]) == ("review", "done") and "reason" not in args


def test_the_state_block_names_only_the_hook_kinds() -> None:
    spec = parse_spec(
        {
            "extensions": {"hooks": ["webhook"]},
            "states": {
                "intake": {
                    "triggers": {"manual": None},
                    "before": [{"script": "hooks/a.js"}, {"webhook": "https://secret.example"}],
                    "after": {"rubric": {"instructions": "Be polite, or else."}},
                }
            },
        }
    )
    block = render_state_block(spec, "intake", entry_state="intake", follow_up=False, variables={})
    assert "Hooks: before: script, webhook; after: rubric" in block
    assert "secret.example" not in block and "polite" not in block and "hooks/a.js" not in block
    plain = parse_spec({"states": {"a": {"triggers": {"manual": None}}}})
    assert "Hooks:" not in render_state_block(
        plain, "a", entry_state="a", follow_up=False, variables={}
    )


SPEC = """
title: Lint
instructions: Lint me.
extensions: { hooks: [webhook] }
states:
  intake:
    triggers: { manual: }
    instructions: Go.
    before:
      - { script: hooks/ok.js }
      - { script: hooks/imports.js }
      - { script: hooks/missing.js }
      - { script: scripts/outside.js }
      - { script: hooks/ok.js, max_iterations: 1 }
      - { pager: "on-call" }
      - { webhook: "https://x" }
"""


def test_validate_reports_hook_problems(tmp_path: Path) -> None:
    directory = write_workflow(tmp_path, "lint", SPEC)
    (directory / "hooks").mkdir()
    (directory / "hooks" / "ok.js").write_text(
        'import { ok } from "@archmax-ai/harness/sandbox";\nexport default () => ok();\n'
    )
    (directory / "hooks" / "imports.js").write_text('import fs from "node:fs";\n')
    report = validate_workflow(tmp_path, "lint")
    errors = [d.message for d in report.errors]
    assert any("cannot import 'node:fs'" in e for e in errors)
    assert "states.intake.before.2.script: hooks/missing.js not found" in errors
    assert any(e.startswith("states.intake.before.3.script: ") and "hooks/" in e for e in errors)
    assert any(e.startswith("states.intake.before.4.max_iterations") for e in errors)
    assert "states.intake.before.5: hook kind 'pager' is not declared in extensions.hooks" in errors
    assert len(errors) == 5  # ok.js and the declared webhook pass
