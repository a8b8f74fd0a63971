"""workflows/governance.py: closed by default, deny beats allow, nothing narrower widens a
denial (§2.4–§2.6, §4.3, §4.8, §7). One class per rule, each with its negative case."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from archmax_temporal.workflows.governance import (
    ALWAYS_ON,
    PATH_ARGS,
    UNRESOLVED_REFERENCE,
    Blocked,
    CallVerdict,
    Mocked,
    Run,
    Unresolved,
    Verdict,
    decide,
    disclosed_tools,
    enabled_skills,
    forbidden_outright,
    glob_escape,
    glob_match,
    govern,
    listed,
    normalise_path,
    resolve_guard,
    substitute_references,
)
from archmax_temporal.workflows.models import ToolMock, Variable
from archmax_temporal.workflows.runtime_tools import RUNTIME_TOOLS
from archmax_temporal.workflows.spec import WorkflowSpec
from tests.support import decision_table as table

STATE = "work"
BUILTINS = [
    "ls",
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "grep",
    "copy_file",
    "move_file",
    "remove_file",
    "write_todos",
    "archmax_eval",
    "archmax_run",
]
HOST = ["fetch_order", "send_email"]
AVAILABLE = BUILTINS + HOST + sorted(RUNTIME_TOOLS)


def make_spec(
    *,
    tools: dict[str, Any] | None = None,
    skills: dict[str, Any] | None = None,
    state_tools: dict[str, Any] | None = None,
    state_skills: dict[str, Any] | None = None,
) -> WorkflowSpec:
    """A one-state spec with the given root and state governance blocks."""
    state: dict[str, Any] = {"transitions": [{"to": "done", "description": "finished"}]}
    if state_tools is not None:
        state["tools"] = state_tools
    if state_skills is not None:
        state["skills"] = state_skills
    data: dict[str, Any] = {"states": {STATE: state, "done": {}}}
    if tools is not None:
        data["tools"] = tools
    if skills is not None:
        data["skills"] = skills
    return WorkflowSpec.model_validate(data)


def variables(**values: Any) -> dict[str, Variable]:
    return {name: Variable(value=value, locked=True) for name, value in values.items()}


def run(
    spec: WorkflowSpec, tool: str, variables_: dict[str, Variable] | None = None, **args: object
) -> Verdict:
    return decide(spec, STATE, tool, args, variables_ or {})


def allowed(verdict: Verdict, rule: str = "tool.allowed") -> None:
    assert verdict.allowed, verdict
    assert verdict.rule == rule
    assert not verdict.terminal


def refused(verdict: Verdict, rule: str) -> None:
    assert not verdict.allowed, verdict
    assert verdict.rule == rule
    assert verdict.reason


class TestSurfaceConstants:
    def test_always_on_are_the_filesystem_tools_and_run(self) -> None:
        """The issue's always-on set, each with a declared path argument."""
        assert set(BUILTINS) == ALWAYS_ON
        assert set(PATH_ARGS) == ALWAYS_ON - {"archmax_eval", "write_todos"}  # they name no path
        assert PATH_ARGS["read_file"] == (("file_path", "read"),)
        assert PATH_ARGS["write_file"] == (("file_path", "write"),)
        assert PATH_ARGS["archmax_run"] == (("file_path", "execute"),)
        # archmax 0.4: a copy reads its source and writes its destination; a move removes it
        assert PATH_ARGS["copy_file"] == (("source", "read"), ("destination", "write"))
        assert PATH_ARGS["move_file"] == (("source", "remove"), ("destination", "write"))
        assert PATH_ARGS["remove_file"] == (("file_path", "remove"),)


class TestClosedByDefault:
    def test_ungranted_host_tool_is_refused(self) -> None:
        """A host tool nobody granted is refused ``tool.not-allowed``."""
        refused(run(make_spec(), "fetch_order", id="1"), "tool.not-allowed")

    def test_ungranted_host_tool_is_not_disclosed(self) -> None:
        """...and the model never sees it."""
        shown = disclosed_tools(make_spec(), STATE, AVAILABLE)
        assert "fetch_order" not in shown
        assert set(BUILTINS) | RUNTIME_TOOLS <= set(shown)

    def test_state_grant_allows(self) -> None:
        """A state's bare ``allow`` entry grants the tool with any arguments."""
        spec = make_spec(state_tools={"allow": ["fetch_order"]})
        allowed(run(spec, "fetch_order", id="1"))
        assert "fetch_order" in disclosed_tools(spec, STATE, AVAILABLE)

    def test_grant_in_another_state_does_not_leak(self) -> None:
        """Grants are per state: the terminal state has none."""
        spec = make_spec(state_tools={"allow": ["fetch_order"]})
        refused(decide(spec, "done", "fetch_order", {}, {}), "tool.not-allowed")
        assert "fetch_order" not in disclosed_tools(spec, "done", AVAILABLE)

    def test_always_on_tool_allowed_by_default(self) -> None:
        """Always-on tools need no grant for the workspace's readable areas."""
        allowed(run(make_spec(), "read_file", file_path="AGENTS.md"))
        allowed(run(make_spec(), "ls", path=""))

    def test_unknown_area_needs_a_path_grant(self) -> None:
        """A root file in no workspace area is refused unless a grant names its path."""
        refused(run(make_spec(), "read_file", file_path="trigger.json"), "tool.not-allowed")
        spec = make_spec(state_tools={"allow": [{"tool": "read_file", "paths": ["trigger.json"]}]})
        allowed(run(spec, "read_file", file_path="trigger.json"))

    @pytest.mark.parametrize("tool", ["task", "archmax_note"])
    def test_withheld_tools_are_never_grantable(self, tool: str) -> None:
        """``task`` and ``archmax_note`` are refused even when a spec names them."""
        spec = make_spec(state_tools={"allow": [tool]})
        refused(run(spec, tool), "tool.not-allowed")
        assert tool not in disclosed_tools(spec, STATE, [tool])

    def test_bare_eval_is_blocked(self) -> None:
        """``eval`` is refused by a rule no grant overrides."""
        refused(run(make_spec(state_tools={"allow": ["eval"]}), "eval"), "tool.eval")


class TestAllowAlways:
    def test_root_grant_reaches_every_state(self) -> None:
        """``allow_always`` grants the tool in every state."""
        spec = make_spec(tools={"allow_always": ["fetch_order"]})
        allowed(run(spec, "fetch_order"))
        allowed(decide(spec, "done", "fetch_order", {}, {}))
        assert "fetch_order" in disclosed_tools(spec, "done", AVAILABLE)

    def test_root_guard_applies_when_the_state_names_nothing(self) -> None:
        """A root guarded grant is not a grant for a call outside its guard."""
        spec = make_spec(tools={"allow_always": [{"tool": "fetch_order", "args": {"id": "A-*"}}]})
        allowed(run(spec, "fetch_order", id="A-1"))
        verdict = run(spec, "fetch_order", id="B-1")
        refused(verdict, "tool.not-allowed")
        assert "id" in verdict.reason and "A-*" in verdict.reason

    def test_allow_always_on_an_always_on_tool_is_inert(self) -> None:
        """A root entry naming an always-on tool neither grants nor narrows it."""
        spec = make_spec(
            tools={"allow_always": [{"tool": "read_file", "paths": ["scratchpad/**"]}]}
        )
        allowed(run(spec, "read_file", file_path="AGENTS.md"))


class TestStateNarrowing:
    def test_state_entry_narrows_an_always_on_tool(self) -> None:
        """``read_file`` narrowed to ``scratchpad/**`` refuses a read of an enabled skill."""
        spec = make_spec(
            skills={"allow_always": ["billing"]},
            state_tools={"allow": [{"tool": "read_file", "paths": ["scratchpad/**"]}]},
        )
        refused(run(spec, "read_file", file_path="skills/billing/SKILL.md"), "tool.not-allowed")
        allowed(run(spec, "read_file", file_path="scratchpad/notes.md"), "tool.scratchpad")
        allowed(decide(spec, "done", "read_file", {"file_path": "skills/billing/SKILL.md"}, {}))

    def test_state_entry_beats_the_root_grant(self) -> None:
        """When the state names the tool, only its entries count (narrower wins)."""
        spec = make_spec(
            tools={"allow_always": ["fetch_order"]},
            state_tools={"allow": [{"tool": "fetch_order", "args": {"id": "A-*"}}]},
        )
        refused(run(spec, "fetch_order", id="B-1"), "tool.not-allowed")
        allowed(run(spec, "fetch_order", id="A-1"))
        allowed(decide(spec, "done", "fetch_order", {"id": "B-1"}, {}))

    def test_any_matching_entry_grants(self) -> None:
        """Several entries for one tool: any one whose guards hold grants the call."""
        spec = make_spec(
            state_tools={
                "allow": [
                    {"tool": "fetch_order", "args": {"id": "A-*"}},
                    {"tool": "fetch_order", "args": {"id": ["B-1", "C-?"]}},
                ]
            }
        )
        for ok in ("A-9", "B-1", "C-3"):
            allowed(run(spec, "fetch_order", id=ok))
        refused(run(spec, "fetch_order", id="C-33"), "tool.not-allowed")

    def test_every_guard_of_an_entry_must_hold(self) -> None:
        """An entry's guards narrow together; an absent guarded argument is no match."""
        spec = make_spec(
            state_tools={
                "allow": [{"tool": "send_email", "args": {"to": "*@acme.test", "cc": "none"}}]
            }
        )
        allowed(run(spec, "send_email", to="a@acme.test", cc="none"))
        refused(run(spec, "send_email", to="a@acme.test", cc="x"), "tool.not-allowed")
        refused(run(spec, "send_email", to="a@acme.test"), "tool.not-allowed")

    def test_dotted_argument_guard(self) -> None:
        """A dotted guard name reaches into an object argument."""
        spec = make_spec(
            state_tools={"allow": [{"tool": "send_email", "args": {"message.to": "*@acme.test"}}]}
        )
        allowed(run(spec, "send_email", message={"to": "a@acme.test"}))
        refused(run(spec, "send_email", message={"to": "a@evil.test"}), "tool.not-allowed")

    def test_list_argument_grant_needs_every_item(self) -> None:
        """A list-valued argument is granted only when every item matches."""
        spec = make_spec(
            state_tools={"allow": [{"tool": "send_email", "args": {"to": "*@acme.test"}}]}
        )
        allowed(run(spec, "send_email", to=["a@acme.test", "b@acme.test"]))
        refused(run(spec, "send_email", to=["a@acme.test", "b@evil.test"]), "tool.not-allowed")

    def test_paths_on_a_tool_without_paths_grants_nothing(self) -> None:
        """``paths:`` on a host tool with no path argument is closed, not vacuous."""
        spec = make_spec(state_tools={"allow": [{"tool": "fetch_order", "paths": ["**"]}]})
        refused(run(spec, "fetch_order", id="1"), "tool.not-allowed")


class TestDenyBeatsAllow:
    def test_root_denial_beats_a_state_grant(self) -> None:
        """``forbid_always`` wins over a state's ``allow`` (nothing narrower widens it)."""
        spec = make_spec(
            tools={"forbid_always": ["fetch_order"]}, state_tools={"allow": ["fetch_order"]}
        )
        refused(run(spec, "fetch_order"), "tool.forbidden")
        assert "fetch_order" not in disclosed_tools(spec, STATE, AVAILABLE)

    def test_root_denial_beats_allow_always(self) -> None:
        spec = make_spec(tools={"allow_always": ["fetch_order"], "forbid_always": ["fetch_order"]})
        refused(run(spec, "fetch_order"), "tool.forbidden")

    def test_state_denial_beats_allow_always(self) -> None:
        """A state's ``forbid`` removes a workflow-wide grant in that state only."""
        spec = make_spec(
            tools={"allow_always": ["fetch_order"]}, state_tools={"forbid": ["fetch_order"]}
        )
        refused(run(spec, "fetch_order"), "tool.forbidden-here")
        allowed(decide(spec, "done", "fetch_order", {}, {}))

    def test_state_denial_beats_its_own_grant(self) -> None:
        spec = make_spec(state_tools={"allow": ["fetch_order"], "forbid": ["fetch_order"]})
        refused(run(spec, "fetch_order"), "tool.forbidden-here")

    def test_workflow_denial_is_reported_before_the_state_denial(self) -> None:
        spec = make_spec(
            tools={"forbid_always": ["fetch_order"]}, state_tools={"forbid": ["fetch_order"]}
        )
        refused(run(spec, "fetch_order"), "tool.forbidden")

    def test_denial_closes_an_always_on_tool_even_in_scratchpad(self) -> None:
        """A denial beats the scratchpad rule too."""
        spec = make_spec(tools={"forbid_always": ["write_file"]})
        refused(run(spec, "write_file", file_path="scratchpad/a.md"), "tool.forbidden")
        assert "write_file" not in disclosed_tools(spec, STATE, AVAILABLE)
        no_denial = make_spec()
        allowed(run(no_denial, "write_file", file_path="scratchpad/a.md"), "tool.scratchpad")


class TestWildcardDeny:
    def test_star_forbids_every_tool(self) -> None:
        """``forbid: ['*']`` refuses and hides everything, granted or always-on."""
        spec = make_spec(state_tools={"allow": ["fetch_order"], "forbid": ["*"]})
        refused(run(spec, "fetch_order"), "tool.forbidden-here")
        refused(run(spec, "read_file", file_path="AGENTS.md"), "tool.forbidden-here")
        assert disclosed_tools(spec, STATE, AVAILABLE) == []

    def test_star_forbid_always(self) -> None:
        spec = make_spec(tools={"forbid_always": ["*"]})
        refused(decide(spec, "done", "ls", {"path": ""}, {}), "tool.forbidden")

    def test_scoped_star_refuses_only_matching_calls(self) -> None:
        """``{tool: '*', paths: [...]}`` refuses any tool touching the paths, nothing else."""
        spec = make_spec(
            tools={"forbid_always": [{"tool": "*", "paths": ["scratchpad/secrets/**"]}]}
        )
        refused(run(spec, "read_file", file_path="scratchpad/secrets/k"), "tool.forbidden")
        allowed(run(spec, "read_file", file_path="scratchpad/k"), "tool.scratchpad")
        assert "read_file" in disclosed_tools(spec, STATE, AVAILABLE)

    def test_star_is_refused_on_the_allow_side(self) -> None:
        """Only a denial may say ``*`` (the spec refuses it at load)."""
        with pytest.raises(ValueError, match="only a forbid entry"):
            make_spec(state_tools={"allow": ["*"]})


class TestScopedDeny:
    def test_argument_scoped_deny_keeps_the_tool_disclosed(self) -> None:
        """An argument-scoped denial refuses matching calls and leaves the tool visible."""
        spec = make_spec(
            state_tools={
                "allow": ["send_email"],
                "forbid": [{"tool": "send_email", "args": {"to": "*@evil.test"}}],
            }
        )
        assert "send_email" in disclosed_tools(spec, STATE, AVAILABLE)
        assert forbidden_outright(spec, STATE, "send_email") is None
        verdict = run(spec, "send_email", to="x@evil.test")
        refused(verdict, "tool.forbidden-here")
        assert "evil" in verdict.reason
        allowed(run(spec, "send_email", to="x@acme.test"))

    def test_list_argument_denial_needs_any_item(self) -> None:
        """A denial refuses a list argument when any item matches."""
        spec = make_spec(
            tools={
                "allow_always": ["send_email"],
                "forbid_always": [{"tool": "send_email", "args": {"to": "*@evil.test"}}],
            }
        )
        refused(run(spec, "send_email", to=["a@acme.test", "b@evil.test"]), "tool.forbidden")

    def test_path_denial_matches_the_normalised_path(self) -> None:
        """``scratchpad/./secret`` cannot slip past a denial of ``scratchpad/secret``."""
        spec = make_spec(
            state_tools={"forbid": [{"tool": "read_file", "paths": ["scratchpad/secret"]}]}
        )
        for path in ("scratchpad/secret", "scratchpad/./secret", "scratchpad/x/../secret"):
            refused(run(spec, "read_file", file_path=path), "tool.forbidden-here")

    def test_state_grant_cannot_widen_a_root_scoped_denial(self) -> None:
        spec = make_spec(
            tools={"forbid_always": [{"tool": "fetch_order", "args": {"id": "VIP-*"}}]},
            state_tools={"allow": [{"tool": "fetch_order", "args": {"id": "VIP-*"}}]},
        )
        refused(run(spec, "fetch_order", id="VIP-1"), "tool.forbidden")


class TestRuntimeTools:
    def test_runtime_tools_are_on_every_surface(self) -> None:
        shown = disclosed_tools(make_spec(), STATE, AVAILABLE)
        assert set(shown) >= RUNTIME_TOOLS
        allowed(run(make_spec(), "archmax_wait", reason="r"))

    def test_forbid_always_removes_a_runtime_tool(self) -> None:
        """``forbid_always: [archmax_wait]`` takes parking away: hidden and refused."""
        spec = make_spec(tools={"forbid_always": ["archmax_wait"]})
        assert "archmax_wait" not in disclosed_tools(spec, STATE, AVAILABLE)
        assert forbidden_outright(spec, STATE, "archmax_wait") == "tool.forbidden"
        refused(run(spec, "archmax_wait", reason="r"), "tool.forbidden")
        allowed(run(spec, "archmax_raise", code="x", reason="r"))

    def test_state_forbid_removes_a_runtime_tool_here_only(self) -> None:
        spec = make_spec(state_tools={"forbid": ["archmax_reset"]})
        assert forbidden_outright(spec, STATE, "archmax_reset") == "tool.forbidden-here"
        assert "archmax_reset" in disclosed_tools(spec, "done", AVAILABLE)


class TestVariableGuards:
    SPEC = make_spec(
        state_tools={"allow": [{"tool": "fetch_order", "args": {"id": "${{order.id}}"}}]}
    )

    def test_reference_resolves_at_call_time(self) -> None:
        ok = variables(order={"id": "ORD-1"})
        allowed(run(self.SPEC, "fetch_order", ok, id="ORD-1"))
        refused(run(self.SPEC, "fetch_order", ok, id="ORD-2"), "tool.not-allowed")

    @pytest.mark.parametrize("value", ["*", "**", "?", "[a-z]*", "ORD-\\*"])
    def test_a_glob_valued_variable_matches_only_itself(self, value: str) -> None:
        """A variable holding glob syntax is matched literally: it never widens the guard."""
        seeded = variables(order={"id": value})
        refused(run(self.SPEC, "fetch_order", seeded, id="ORD-1"), "tool.not-allowed")
        allowed(run(self.SPEC, "fetch_order", seeded, id=value))

    def test_path_guard_with_a_star_value(self) -> None:
        spec = make_spec(
            state_tools={"allow": [{"tool": "read_file", "paths": ["reports/${{team}}/*"]}]}
        )
        refused(
            run(spec, "read_file", variables(team="**"), file_path="reports/ops/q1"),
            "tool.not-allowed",
        )
        allowed(run(spec, "read_file", variables(team="ops"), file_path="reports/ops/q1"))

    def test_scalar_values_match_as_text(self) -> None:
        spec = make_spec(
            state_tools={"allow": [{"tool": "fetch_order", "args": {"n": "${{limit}}"}}]}
        )
        allowed(run(spec, "fetch_order", variables(limit=5), n=5))
        refused(run(spec, "fetch_order", variables(limit=5), n=6), "tool.not-allowed")

    def test_resolve_guard_escapes(self) -> None:
        assert resolve_guard("a/${{x}}/*", variables(x="*")) == "a/\\*/*"
        assert resolve_guard("a/$${{x}}", {}) == "a/${{x}}"
        assert resolve_guard("a/${{x}}", {}) is None
        assert resolve_guard("a/${{x}}", variables(x={"k": 1})) is None


class TestUnresolvedGuard:
    def test_unresolved_grant_guard_is_terminal(self) -> None:
        """A guard naming an unset variable is a terminal block, not a correctable refusal."""
        spec = make_spec(
            state_tools={"allow": [{"tool": "fetch_order", "args": {"id": "${{order_id}}"}}]}
        )
        verdict = run(spec, "fetch_order", id="1")
        refused(verdict, "tool.unresolved-variable")
        assert verdict.terminal
        resolved = run(spec, "fetch_order", variables(order_id="1"), id="1")
        allowed(resolved)

    def test_unresolved_deny_guard_is_terminal(self) -> None:
        """A denial that cannot be evaluated fails closed, terminally."""
        spec = make_spec(
            tools={
                "allow_always": ["fetch_order"],
                "forbid_always": [{"tool": "fetch_order", "paths": ["${{missing}}/**"]}],
            }
        )
        verdict = run(spec, "fetch_order")
        refused(verdict, "tool.unresolved-variable")
        assert verdict.terminal

    def test_other_refusals_are_not_terminal(self) -> None:
        assert not run(make_spec(), "fetch_order").terminal


class TestSubstitution:
    def test_embedded_references_become_text(self) -> None:
        out, error = substitute_references(
            {"file_path": "scratchpad/${{order.id}}.md", "n": "${{ count }} items"},
            variables(order={"id": "A-1"}, count=3),
        )
        assert error is None
        assert out == {"file_path": "scratchpad/A-1.md", "n": "3 items"}

    def test_single_reference_keeps_its_type(self) -> None:
        out, error = substitute_references(
            {"n": "${{count}}", "flag": "${{on}}", "obj": "${{order}}"},
            variables(count=3, on=False, order={"id": "A-1"}),
        )
        assert error is None
        assert out == {"n": 3, "flag": False, "obj": {"id": "A-1"}}

    def test_nested_values_are_substituted(self) -> None:
        out, error = substitute_references(
            {"to": ["${{a}}", {"cc": "x-${{a}}"}], "k": 7}, variables(a="z")
        )
        assert error is None
        assert out == {"to": ["z", {"cc": "x-z"}], "k": 7}

    def test_double_dollar_is_literal(self) -> None:
        out, error = substitute_references(
            {"text": "$${{a}} and ${{a}}", "whole": "$${{a}}"}, variables(a="z")
        )
        assert error is None
        assert out == {"text": "${{a}} and z", "whole": "${{a}}"}

    def test_single_pass(self) -> None:
        """Substituted text is never re-read: a value that looks like a reference stays."""
        out, _ = substitute_references({"x": "v=${{a}}"}, variables(a="${{b}}", b="no"))
        assert out == {"x": "v=${{b}}"}

    def test_unresolved_reference_is_a_correctable_error(self) -> None:
        args = {"file_path": "scratchpad/${{nope}}.md"}
        out, error = substitute_references(args, variables(a="z"))
        assert out == args
        assert error is not None and "nope" in error

    def test_non_scalar_cannot_be_embedded(self) -> None:
        _, error = substitute_references({"x": "id=${{o}}"}, variables(o={"k": 1}))
        assert error is not None and "scalar" in error

    def test_substitution_happens_before_governance(self) -> None:
        """The guard judges the substituted argument, so a reference cannot dodge a denial."""
        spec = make_spec(
            tools={"allow_always": ["send_email"]},
            state_tools={"forbid": [{"tool": "send_email", "args": {"to": "*@evil.test"}}]},
        )
        seeded = variables(target="x@evil.test")
        args, error = substitute_references({"to": "${{target}}"}, seeded)
        assert error is None
        refused(decide(spec, STATE, "send_email", args, seeded), "tool.forbidden-here")


class TestScratchpad:
    @pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file"])
    def test_scratchpad_is_read_write_for_always_on_tools(self, tool: str) -> None:
        allowed(run(make_spec(), tool, file_path="scratchpad/a/b.md"), "tool.scratchpad")

    def test_scratchpad_is_not_open_to_host_tools(self) -> None:
        """Host tools need a grant there too (0.4.1)."""
        refused(run(make_spec(), "fetch_order", file_path="scratchpad/a"), "tool.not-allowed")

    def test_write_outside_scratchpad_is_refused(self) -> None:
        refused(run(make_spec(), "write_file", file_path="notes.md"), "tool.not-allowed")


class TestZones:
    @pytest.mark.parametrize("area", ["artifacts", "_specs", "checkpoints"])
    @pytest.mark.parametrize("tool", ["read_file", "write_file", "ls"])
    def test_runtime_internal_areas_are_closed(self, area: str, tool: str) -> None:
        argument = PATH_ARGS[tool][0][0]
        verdict = decide(make_spec(), STATE, tool, {argument: f"{area}/x.json"}, {})
        refused(verdict, "zone.runtime-internal")
        assert not listed(make_spec(), STATE, f"{area}/x.json")

    def test_runtime_internal_even_with_a_grant(self) -> None:
        spec = make_spec(state_tools={"allow": [{"tool": "read_file", "paths": ["**"]}]})
        refused(run(spec, "read_file", file_path="checkpoints/cp-1.json"), "zone.runtime-internal")

    @pytest.mark.parametrize("path", ["AGENTS.md", "skills/billing/SKILL.md", "", "skills"])
    def test_read_only_areas(self, path: str) -> None:
        spec = make_spec(skills={"allow_always": ["billing"]})
        refused(run(spec, "write_file", file_path=path), "zone.read-only")
        refused(run(spec, "edit_file", file_path=path), "zone.read-only")

    def test_read_only_areas_are_readable(self) -> None:
        spec = make_spec(skills={"allow_always": ["billing"]})
        allowed(run(spec, "read_file", file_path="AGENTS.md"))
        allowed(run(spec, "read_file", file_path="skills/billing/SKILL.md"))

    @pytest.mark.parametrize(
        "path", ["../x", "scratchpad/../../x", "/etc/passwd", "scratchpad\\x", "a\x00b"]
    )
    def test_escapes_are_outside_the_workspace(self, path: str) -> None:
        refused(run(make_spec(), "read_file", file_path=path), "zone.outside-workspace")

    def test_dotdot_inside_the_workspace_is_applied(self) -> None:
        """``..`` that stays inside applies: the call is judged where it lands."""
        allowed(run(make_spec(), "read_file", file_path="scratchpad/../AGENTS.md"))
        refused(
            run(make_spec(), "read_file", file_path="scratchpad/../checkpoints/x"),
            "zone.runtime-internal",
        )

    def test_non_string_path_is_refused(self) -> None:
        refused(run(make_spec(), "read_file", file_path=3), "tool.path-argument")
        refused(run(make_spec(), "read_file"), "tool.path-argument")

    def test_optional_path_defaults_to_the_root(self) -> None:
        allowed(run(make_spec(), "glob", pattern="**/*.md"))
        spec = make_spec(state_tools={"forbid": [{"tool": "glob", "paths": [""]}]})
        refused(run(spec, "glob", pattern="*"), "tool.forbidden-here")


class TestSkills:
    SPEC = make_spec(
        skills={"allow_always": ["house-style", "legacy"], "forbid_always": ["legacy"]},
        state_skills={"allow": ["billing"], "forbid": ["house-style"]},
    )

    def test_enabled_set(self) -> None:
        """root allow_always + state allow − state forbid − root forbid_always."""
        assert enabled_skills(self.SPEC, STATE) == {"billing"}
        assert enabled_skills(self.SPEC, "done") == {"house-style"}

    def test_star_forbid_disables_every_skill(self) -> None:
        spec = make_spec(skills={"allow_always": ["a"]}, state_skills={"forbid": ["*"]})
        assert enabled_skills(spec, STATE) == set()
        refused(run(spec, "read_file", file_path="skills/a/SKILL.md"), "skill.forbidden")

    def test_enabled_skill_is_readable_and_listed(self) -> None:
        allowed(run(self.SPEC, "read_file", file_path="skills/billing/SKILL.md"))
        allowed(run(self.SPEC, "ls", path="skills/billing"))
        assert listed(self.SPEC, STATE, "skills/billing/SKILL.md")

    def test_skill_enabled_nowhere_is_refused_and_invisible(self) -> None:
        refused(run(self.SPEC, "read_file", file_path="skills/other/SKILL.md"), "skill.not-allowed")
        assert not listed(self.SPEC, STATE, "skills/other")
        assert listed(self.SPEC, STATE, "skills")

    @pytest.mark.parametrize("slug", ["house-style", "legacy"])
    def test_forbidden_skill(self, slug: str) -> None:
        """A skill a list denies is refused ``skill.forbidden`` and hidden."""
        refused(run(self.SPEC, "read_file", file_path=f"skills/{slug}/x"), "skill.forbidden")
        assert not listed(self.SPEC, STATE, f"skills/{slug}/x")

    def test_skill_dotfiles_are_covered(self) -> None:
        refused(run(self.SPEC, "read_file", file_path="skills/other/.env"), "skill.not-allowed")
        allowed(run(self.SPEC, "read_file", file_path="skills/billing/.env"))


class TestScriptSkillOnly:
    SPEC = make_spec(skills={"allow_always": ["billing"]})

    def test_run_inside_an_enabled_bundle(self) -> None:
        allowed(run(self.SPEC, "archmax_run", file_path="skills/billing/scripts/refund.js"))

    @pytest.mark.parametrize(
        "path", ["scratchpad/x.js", "skills/billing/SKILL.md", "skills/billing/scripts", "x.js"]
    )
    def test_run_outside_a_scripts_bundle(self, path: str) -> None:
        refused(run(self.SPEC, "archmax_run", file_path=path), "script.skill-only")

    def test_run_in_a_bundle_not_enabled(self) -> None:
        refused(
            run(self.SPEC, "archmax_run", file_path="skills/other/scripts/x.js"),
            "skill.not-allowed",
        )

    def test_run_narrowed_per_state(self) -> None:
        spec = make_spec(
            skills={"allow_always": ["billing"]},
            state_tools={
                "allow": [{"tool": "archmax_run", "paths": ["skills/billing/scripts/safe-*"]}]
            },
        )
        allowed(run(spec, "archmax_run", file_path="skills/billing/scripts/safe-a.js"))
        refused(
            run(spec, "archmax_run", file_path="skills/billing/scripts/refund.js"),
            "tool.not-allowed",
        )


class TestGlobMatch:
    @pytest.mark.parametrize(
        ("pattern", "path"),
        [
            ("secrets/**", "secrets/.env"),
            ("secrets/**", "secrets"),
            ("secrets/**", "secrets/a/b/.c"),
            ("a/**/b", "a/b"),
            ("a/**/b", "a/x/.y/b"),
            ("**", ""),
            ("**", ".git/config"),
            ("**/*.md", "README.md"),
            ("*.md", ".hidden.md"),
            ("?.md", "a.md"),
            ("[ab].md", "b.md"),
            ("[!ab].md", "c.md"),
            ("\\*", "*"),
        ],
    )
    def test_matches(self, pattern: str, path: str) -> None:
        assert glob_match(pattern, path)

    @pytest.mark.parametrize(
        ("pattern", "path"),
        [
            ("*", "a/b"),
            ("scratchpad/*", "scratchpad/a/b"),
            ("?", "/"),
            ("a/**/b", "ab"),
            ("secrets/**", "secretsx"),
            ("[!ab].md", "a.md"),
            ("[!a]", "/"),
            ("\\*", "x"),
            ("a.md", "a-md"),
        ],
    )
    def test_does_not_match(self, pattern: str, path: str) -> None:
        assert not glob_match(pattern, path)

    @given(st.text())
    def test_escape_matches_exactly_itself(self, text: str) -> None:
        assert glob_match(glob_escape(text), text)


class TestNormalisePath:
    @pytest.mark.parametrize(
        ("path", "normal"),
        [
            ("scratchpad/a.md", "scratchpad/a.md"),
            ("./scratchpad//a.md", "scratchpad/a.md"),
            ("scratchpad/", "scratchpad"),
            ("scratchpad/x/../a.md", "scratchpad/a.md"),
            ("", ""),
            (".", ""),
            ("a/..", ""),
        ],
    )
    def test_normalises(self, path: str, normal: str) -> None:
        assert normalise_path(path) == normal

    @pytest.mark.parametrize("path", ["..", "a/../..", "/a", "a\\b", "a\x00"])
    def test_refuses(self, path: str) -> None:
        assert normalise_path(path) is None


_GLOBBY = st.text(alphabet="ab/*?[]!\\.", max_size=6) | st.text(max_size=6)
"""Values rich in glob syntax: the ones that would widen an unescaped guard."""
_SEGMENT = st.sampled_from(["..", ".", "", "a", ".env", "scratchpad", "*", "b c"])


class TestProperties:
    @given(st.lists(_SEGMENT | st.text(max_size=4), max_size=8), st.booleans())
    def test_accepted_paths_never_escape(self, segments: list[str], absolute: bool) -> None:
        """No path :func:`normalise_path` accepts is absolute or climbs with ``..``."""
        path = ("/" if absolute else "") + "/".join(segments)
        normal = normalise_path(path)
        if normal is None:
            return
        assert not normal.startswith("/")
        assert ".." not in normal.split("/")
        assert "\\" not in normal and "\x00" not in normal
        assert normalise_path(normal) == normal

    @given(
        value=_GLOBBY,
        tail=_GLOBBY,
        other=_GLOBBY,
        pick=st.integers(0, 3),
    )
    def test_no_variable_value_widens_a_guard(
        self, value: str, tail: str, other: str, pick: int
    ) -> None:
        """Allowed under ``scratchpad/${{x}}/*`` ⇒ the literal prefix ``scratchpad/<x>/``."""
        spec = make_spec(
            state_tools={"allow": [{"tool": "fetch_doc", "args": {"path": "scratchpad/${{x}}/*"}}]}
        )
        candidates = [
            f"scratchpad/{value}/{tail}",
            f"scratchpad/{other}/{tail}",
            f"scratchpad/{other}",
            other,
        ]
        path = candidates[pick]
        verdict = decide(spec, STATE, "fetch_doc", {"path": path}, variables(x=value))
        if verdict.allowed:
            prefix = f"scratchpad/{value}/"
            assert path.startswith(prefix)
            assert "/" not in path[len(prefix) :]
        if pick == 0 and "/" not in tail:
            assert verdict.allowed, verdict

    @given(value=_GLOBBY, path=_GLOBBY)
    def test_resolved_guard_is_literal(self, value: str, path: str) -> None:
        guard = resolve_guard("${{x}}", variables(x=value))
        assert guard is not None
        assert glob_match(guard, path) == (path == value)


def test_reasons_name_the_rule_context() -> None:
    """Refusals are sentences for the model: the guard that failed is named."""
    spec = make_spec(state_tools={"allow": [{"tool": "read_file", "paths": ["scratchpad/**"]}]})
    verdict = run(spec, "read_file", file_path="AGENTS.md")
    assert re.search(r"scratchpad/\*\*", verdict.reason)


class TestTransfers:
    """copy_file reads its source and writes its destination; move_file removes its source;
    each path is governed by its use (archmax 0.4's tool path declarations)."""

    SPEC = make_spec(state_skills={"allow": ["billing"]})

    def test_a_copy_from_an_enabled_skill_into_the_scratchpad_is_allowed(self) -> None:
        allowed(
            run(
                self.SPEC,
                "copy_file",
                source="skills/billing/assets/rates.csv",
                destination="scratchpad/rates.csv",
            )
        )

    def test_a_copy_from_a_skill_not_enabled_is_refused(self) -> None:
        verdict = run(
            self.SPEC, "copy_file", source="skills/other/a.csv", destination="scratchpad/a.csv"
        )
        refused(verdict, "skill.not-allowed")

    def test_a_copy_into_a_read_only_area_is_refused(self) -> None:
        verdict = run(
            self.SPEC, "copy_file", source="scratchpad/a.csv", destination="skills/billing/a.csv"
        )
        refused(verdict, "zone.read-only")

    def test_a_move_removes_its_source_so_a_skill_cannot_be_moved(self) -> None:
        verdict = run(
            self.SPEC, "move_file", source="skills/billing/a.csv", destination="scratchpad/a.csv"
        )
        refused(verdict, "zone.read-only")
        refused(run(self.SPEC, "remove_file", file_path="AGENTS.md"), "zone.read-only")

    def test_both_paths_are_required_and_path_guards_see_both(self) -> None:
        refused(run(self.SPEC, "copy_file", source="scratchpad/a"), "tool.path-argument")
        guarded = make_spec(
            state_tools={"allow": [{"tool": "copy_file", "paths": ["scratchpad/**"]}]}
        )
        allowed(
            run(guarded, "copy_file", source="scratchpad/a", destination="scratchpad/b"),
            "tool.scratchpad",
        )
        verdict = run(guarded, "copy_file", source="AGENTS.md", destination="scratchpad/b")
        refused(verdict, "tool.not-allowed")
        assert "path 'AGENTS.md', 'scratchpad/b' is outside paths scratchpad/**" in verdict.reason


class TestGovern:
    """``govern``: the one decision on a call (substitution, the pipeline, mocks), for the
    agent's, a script's and a hook's calls alike; the rows are the end-to-end table's
    (tests/support/decision_table.py, run through all three paths in
    tests/e2e/test_one_decision.py)."""

    @staticmethod
    def spec(tool: str) -> WorkflowSpec:
        document = f"states:\n  {table.STATE}:\n    triggers: {{ manual: }}\n"
        return WorkflowSpec.model_validate(yaml.safe_load(document + table.spec_block(tool)))

    @staticmethod
    def seen(verdict: CallVerdict) -> table.Expected:
        if isinstance(verdict, Run):
            return table.RUN
        if isinstance(verdict, Mocked):
            return table.MOCK
        return table.blocked(verdict.rule)

    @pytest.mark.parametrize("tool", ["read_file", "archmax_workflow_sink"])
    @pytest.mark.parametrize("row", table.ROWS, ids=[row.name for row in table.ROWS])
    def test_the_table(self, row: table.Row, tool: str) -> None:
        spec = self.spec(tool)
        for origin in ("agent", "script"):
            verdict = govern(
                spec,
                table.STATE,
                tool,
                table.arguments(row),
                table.variables(),
                table.mocks(tool),
                origin=origin,
            )
            # A sub-workflow call's arguments are the child's seeds: substituted whoever calls.
            expected = row.expected("agent" if tool != "read_file" else origin)
            assert self.seen(verdict) == expected, (origin, verdict)

    def test_run_carries_the_substituted_arguments(self) -> None:
        verdict = govern(
            self.spec("read_file"),
            table.STATE,
            "read_file",
            {"file_path": "skills/probe/assets/${{customer}}-1.json", "limit": "${{n}}"},
            {**table.variables(), "n": Variable(value=5)},
        )
        assert verdict == Run(
            tool="read_file",
            arguments={"file_path": "skills/probe/assets/acme-1.json", "limit": 5},
        )

    def test_a_script_call_is_taken_as_written(self) -> None:
        spec = make_spec()
        args = {"file_path": "scratchpad/${{nope}}.md", "content": "${{customer}}"}
        for origin in ("script", "hook"):
            verdict = govern(spec, STATE, "write_file", args, variables(), origin=origin)
            assert verdict == Run(tool="write_file", arguments=args)

    def test_an_unresolved_reference_is_one_correctable_refusal(self) -> None:
        verdict = govern(
            make_spec(), STATE, "write_file", {"file_path": "scratchpad/${{nope}}.md"}, {}
        )
        assert isinstance(verdict, Unresolved)
        assert (verdict.rule, verdict.terminal) == (UNRESOLVED_REFERENCE, False)
        assert verdict.text.startswith("write_file refused: Unresolved variable reference")
        assert "$${{" in verdict.text  # says how to write the literal text

    def test_an_unresolved_guard_is_a_terminal_block_for_every_origin(self) -> None:
        spec = make_spec(
            tools={"forbid_always": [{"tool": "write_file", "args": {"content": "${{gone}}"}}]}
        )
        for origin in ("agent", "script", "hook"):
            verdict = govern(
                spec,
                STATE,
                "write_file",
                {"file_path": "scratchpad/a.md", "content": "x"},
                {},
                origin=origin,
            )
            assert isinstance(verdict, Blocked)
            assert (verdict.rule, verdict.terminal) == ("tool.unresolved-variable", True)
            assert verdict.text.startswith("Blocked by governance (tool.unresolved-variable): ")

    def test_a_hook_is_on_runtime_authority(self) -> None:
        """A state's denial binds the agent and its scripts, not a hook."""
        spec = make_spec(state_tools={"forbid": ["write_file"]})
        args = {"file_path": "scratchpad/a.md", "content": "x"}
        script = govern(spec, STATE, "write_file", args, {}, origin="script")
        hook = govern(spec, STATE, "write_file", args, {}, origin="hook")
        assert isinstance(script, Blocked) and script.rule == "tool.forbidden-here"
        assert isinstance(hook, Run)

    def test_a_mock_answers_with_its_result_or_fails_with_its_error(self) -> None:
        mocks = [
            ToolMock(tool="read_file", when_input={"file_path": "scratchpad/a"}, result={"n": 1}),
            ToolMock(tool="read_file", result={"error": "disk on fire"}),
        ]
        first = govern(make_spec(), STATE, "read_file", {"file_path": "scratchpad/a"}, {}, mocks)
        other = govern(make_spec(), STATE, "read_file", {"file_path": "scratchpad/b"}, {}, mocks)
        assert isinstance(first, Mocked) and first.answer() == ("ok", '{"n": 1}')
        assert isinstance(other, Mocked) and other.answer() == ("error", "disk on fire")

    def test_the_mock_matches_the_substituted_arguments(self) -> None:
        mocks = [ToolMock(tool="read_file", when_input={"file_path": "scratchpad/z.md"})]
        verdict = govern(
            make_spec(),
            STATE,
            "read_file",
            {"file_path": "scratchpad/${{a}}.md"},
            variables(a="z"),
            mocks,
        )
        assert isinstance(verdict, Mocked)
        assert verdict.arguments == {"file_path": "scratchpad/z.md"}
