"""workflows/spec.py: the strict ``workflow.yaml`` schema (harness reference §2, §5)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from archmax_temporal.workflows.errors import SpecValidationError
from archmax_temporal.workflows.runtime_tools import ADVANCE, runtime_tool_schemas
from archmax_temporal.workflows.spec import ToolGrant, WorkflowSpec, machine_problems, parse_spec


def base() -> dict[str, Any]:
    """intake (manual start) → done (terminal, bare ``done:``)."""
    return {
        "title": "Support",
        "states": {
            "intake": {
                "triggers": {"manual": None},
                "transitions": [{"to": "done", "description": "The work is done."}],
            },
            "done": None,
        },
    }


DELETE = object()


def issues(data: Any) -> list[str]:
    with pytest.raises(SpecValidationError) as caught:
        parse_spec(data, "wf.yaml")
    assert caught.value.source == "wf.yaml"
    return caught.value.issues


def with_(path: str, value: Any) -> dict[str, Any]:
    """``base()`` with the dotted ``path`` set to ``value``."""
    data = base()
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return data


class TestParseSpec:
    def test_minimal_spec_loads(self) -> None:
        """A spec with a start state and a bare terminal state loads into typed models."""
        spec = parse_spec(base())
        assert isinstance(spec, WorkflowSpec)
        assert list(spec.states) == ["intake", "done"]
        assert spec.state("done").transitions == []
        assert spec.runtime.version == "1" and spec.disabled is False

    def test_the_sessions_seeds_policy_forbid_tools_removes_archmax_wait_workflow_wide(
        self,
    ) -> None:
        """Seed: 'policy.forbid_tools: ["archmax_wait"] removes it workflow-wide.' It is read
        as what it means, an entry of tools.forbid_always (the current spelling), so the
        runtime tools the model is shown no longer include archmax_wait."""
        spec = parse_spec(base() | {"policy": {"forbid_tools": ["archmax_wait"]}})
        assert spec.tools.forbid_always == ["archmax_wait"]
        both = base() | {
            "policy": {"forbid_tools": ["archmax_wait"]},
            "tools": {"forbid_always": ["eval"]},
        }
        assert parse_spec(both).tools.forbid_always == ["eval", "archmax_wait"]

    @pytest.mark.parametrize("policy", [[], {"forbid_paths": ["x"]}, {"forbid_tools": "x"}])
    def test_any_other_policy_is_refused_naming_tools_forbid_always(self, policy: Any) -> None:
        (issue,) = issues(base() | {"policy": policy})
        assert "tools: { forbid_always" in issue

    def test_judge_model_options_take_temperature_and_max_tokens_only(self) -> None:
        """tests.judge may pin modelOptions (temperature, maxTokens); a typo is a load error
        (archmax: "Any other modelOptions key is a load error")."""
        ok = base() | {"tests": {"judge": {"modelOptions": {"temperature": 0, "maxTokens": 9}}}}
        assert parse_spec(ok).tests.judge is not None
        typo = base() | {"tests": {"judge": {"modelOptions": {"temprature": 0.2}}}}
        (issue,) = issues(typo)
        assert issue.startswith('tests.judge.modelOptions: unknown key "temprature"')
        wrong = base() | {"tests": {"judge": {"modelOptions": {"maxTokens": "many"}}}}
        assert "maxTokens must be a positive integer" in issues(wrong)[0]

    def test_non_mapping_root_is_refused(self) -> None:
        """A document that is not a mapping is refused at the root."""
        assert issues(["states"]) == ["<root>: a workflow spec must be a mapping"]

    @pytest.mark.parametrize("states", [None, {}, []])
    def test_missing_or_empty_states_is_refused(self, states: object) -> None:
        """Missing or empty ``states`` fails with archmax's own message."""
        data = base() | {"states": states}
        assert issues(data) == ["states: Machine spec is missing or has empty 'states'"]

    @pytest.mark.parametrize(
        ("path", "expected"),
        [
            ("states.intake.transtions", 'states.intake: unknown key "transtions"'),
            *[(key, f'<root>: unknown key "{key}"') for key in ("name", "triggers")],
            ("description", '<root>: unknown key "description"'),
            ("settings.prompt", 'settings: unknown key "prompt"'),
            ("settings.forbid_tools", 'settings: unknown key "forbid_tools"'),
            ("tools.allow", 'tools: unknown key "allow"'),
            ("skills.allow", 'skills: unknown key "allow"'),
            ("states.intake.tools.allow_always", 'states.intake.tools: unknown key "allow_always"'),
            ("extensions.metadata", 'extensions: unknown key "metadata"'),
        ],
    )
    def test_unknown_and_misplaced_keys_are_named_with_their_path(
        self, path: str, expected: str
    ) -> None:
        """A typo, a retired root key or a key at the wrong level is named with its path."""
        assert expected in issues(with_(path, []))

    def test_every_problem_is_reported_at_once(self) -> None:
        """All field errors come back in one pass, each addressed by its path."""
        data = with_("states.intake.type", "wait")
        data["states"]["intake"]["model"] = ""
        found = issues(data)
        assert "states.intake.type: Input should be 'agent' or 'human'" in found
        assert "states.intake.model: must be a non-empty model id" in found

    @pytest.mark.parametrize(
        ("path", "value"),
        [
            *[("states.intake.transitions.0.description", v) for v in (DELETE, "", "  ", 5)],
            *[("states.intake.model", v) for v in ("", 3, {"id": "gpt", "temperature": 0})],
            *[("instructions", v) for v in ("", "  ", 5)],
        ],
    )
    def test_required_strings_are_non_empty_strings(self, path: str, value: object) -> None:
        """A missing, blank or mistyped description, model or instructions is addressed to it."""
        found = issues(with_(path, value))
        assert found and all(line.startswith(f"{path}: ") for line in found)

    @pytest.mark.parametrize(
        ("version", "expected"), [("1", "1"), ("2", "2"), (2, "2"), (2.0, "2")]
    )
    def test_runtime_version_may_be_string_or_number(
        self, version: str | int | float, expected: str
    ) -> None:
        """The contract pin accepts versions 1 and 2 spelled as strings or numbers."""
        spec = parse_spec(base() | {"runtime": {"engine": "archmax-harness", "version": version}})
        assert spec.runtime.version == expected

    @pytest.mark.parametrize("runtime", [{"version": 3}, {"version": True}, {"engine": "other"}])
    def test_unsupported_runtime_pin_is_refused(self, runtime: dict[str, object]) -> None:
        """An unsupported version or engine is an error on ``runtime``."""
        assert any(line.startswith("runtime.") for line in issues(base() | {"runtime": runtime}))

    def test_camel_case_aliases_load(self) -> None:
        """archmax's camelCase spellings (maxParks, timeoutMs...) load into snake_case fields."""
        data = with_("states.intake.budget", {"maxTurns": 4, "timeoutMs": 900, "maxParks": 5})
        data["settings"] = {"timeoutMs": 15000, "maxPtcCalls": 0, "maxResultChars": 10}
        data["tests"] = {"maxConcurrency": 2, "caseTimeoutMs": 100, "judge": None}
        spec = parse_spec(data)
        budget = spec.state("intake").budget
        assert (budget.max_turns, budget.timeout_ms, budget.max_parks) == (4, 900, 5)
        assert spec.settings.timeout_ms == 15000 and spec.settings.max_ptc_calls == 0
        assert spec.tests.max_concurrency == 2 and spec.tests.judge is not None

    @pytest.mark.parametrize("value", [0, -1, 1.5])
    def test_budget_values_must_be_positive_integers(self, value: int | float) -> None:
        """``budget.maxParks`` of zero, a negative or a fraction is an error."""
        found = issues(with_("states.intake.budget", {"maxParks": value}))
        assert all(line.startswith("states.intake.budget.maxParks: ") for line in found)

    @pytest.mark.parametrize("value", [True, "5"])
    def test_budget_values_are_not_coerced(self, value: str | bool) -> None:
        """A boolean or a quoted number is not a positive integer."""
        issues(with_("states.intake.budget", {"maxParks": value}))

    @pytest.mark.parametrize(
        ("path", "value", "where"),
        [
            ("settings", {"timeoutMs": True}, "settings.timeoutMs"),
            ("settings", {"maxPtcCalls": "0"}, "settings.maxPtcCalls"),
            ("tests", {"maxConcurrency": True}, "tests.maxConcurrency"),
            (
                "states.intake.before",
                [{"rubric": {"instructions": "x", "max_iterations": "2"}}],
                "states.intake.before.0.rubric.max_iterations",
            ),
        ],
    )
    def test_other_integers_are_not_coerced(self, path: str, value: object, where: str) -> None:
        """Settings, tests and hook integers are strict too, addressed to their key."""
        assert issues(with_(path, value)) == [f"{where}: Input should be a valid integer"]

    def test_metadata_is_loose(self) -> None:
        """``metadata`` on the root and on a state accepts any mapping."""
        data = base() | {"metadata": {"canvas": {"zoom": 2}}}
        data["states"]["intake"]["metadata"] = {"x": 1, "y": 2, "anything": [None]}
        assert parse_spec(data).state("intake").metadata == {"x": 1, "y": 2, "anything": [None]}

    def test_unknown_trigger_keys_are_preserved(self) -> None:
        """A trigger declaration's own unknown keys are kept, not refused."""
        spec = parse_spec(with_("states.intake.triggers.manual", {"channel": "email"}))
        manual = spec.trigger("manual")
        assert manual is not None and manual.model_extra == {"channel": "email"}

    def test_trigger_declaration_must_be_a_mapping(self) -> None:
        """A trigger declaration that is neither a mapping nor empty is an error."""
        found = issues(with_("states.intake.triggers.manual", "x"))
        assert any(line.startswith("states.intake.triggers.manual: ") for line in found)

    @pytest.mark.parametrize("path", ["${{conversation_id}}", "a..b", "", "mail. id"])
    def test_malformed_session_path_is_refused(self, path: str) -> None:
        """A ``session:`` path that the shared path parser rejects is a load error."""
        found = issues(with_("states.intake.triggers.manual", {"session": path}))
        assert any(line.startswith("states.intake.triggers.manual.session: ") for line in found)

    @pytest.mark.parametrize("key", ["description", "connection"])
    def test_empty_trigger_strings_are_refused(self, key: str) -> None:
        """An empty trigger ``description`` or ``connection`` is an error."""
        found = issues(with_("states.intake.triggers.manual", {key: ""}))
        assert f"states.intake.triggers.manual.{key}: must be a non-empty string" in found

    @pytest.mark.parametrize("key", ["entry", "name"])
    def test_trigger_entry_and_name_keys_are_refused(self, key: str) -> None:
        """``entry:`` and ``name:`` in a trigger declaration are load errors."""
        issues(with_("states.intake.triggers.manual", {key: "intake"}))

    def test_error_path_keeps_a_capitalised_trigger_id(self) -> None:
        """An error inside trigger ``EmailIn`` is addressed through ``triggers.EmailIn``."""
        found = issues(with_("states.intake.triggers.EmailIn", {"description": ""}))
        assert "states.intake.triggers.EmailIn.description: must be a non-empty string" in found

    def test_error_path_keeps_a_capitalised_state_and_drops_union_tags(self) -> None:
        """A state ``Review`` stays in the path; a union tag (``dict[str,str]``) never shows."""
        data = base()
        data["states"]["Review"] = {"type": "wait"}
        data["states"]["intake"]["skills"] = {"allow": [{"billing": 5}]}
        found = issues(data)
        assert "states.Review.type: Input should be 'agent' or 'human'" in found
        assert "states.intake.skills.allow.0.billing: Input should be a valid string" in found
        assert not any("dict[" in line or "str," in line for line in found)

    def test_missing_field_is_named_in_its_path(self) -> None:
        """A missing required key is addressed to itself, union tags dropped."""
        found = issues(with_("states.intake.triggers.manual", {"requires": [{"type": "string"}]}))
        assert "states.intake.triggers.manual.requires.0.name: Field required" in found

    def test_disabled_reads_a_boolean(self) -> None:
        """``disabled: true`` takes the workflow out of service."""
        assert parse_spec(base() | {"disabled": True}).disabled is True

    @pytest.mark.parametrize(("value", "loads"), [(None, True), ("false", False), (0, False)])
    def test_disabled_is_strict_and_null_means_enabled(
        self, value: str | int | None, loads: bool
    ) -> None:
        """``disabled: null`` means in service; a non-boolean is a schema error."""
        if loads:
            assert parse_spec(base() | {"disabled": value}).disabled is False
        else:
            issues(base() | {"disabled": value})

    @pytest.mark.parametrize(
        ("path", "value"),
        [
            ("states.intake.tools", {"allow": ["*"]}),
            ("tools", {"allow_always": [{"tool": "*"}]}),
            ("states.intake.skills", {"allow": ["skills/billing"]}),
            ("states.intake.skills", {"allow": ["bill*"]}),
        ],
    )
    def test_star_grants_and_path_shaped_skills_are_refused(
        self, path: str, value: dict[str, object]
    ) -> None:
        """Only a forbid entry may use ``*``; skill entries are slugs, never paths or globs."""
        issues(with_(path, value))

    @pytest.mark.parametrize(
        ("path", "value"),
        [
            ("tools", {"allow_always": ["*"]}),
            ("states.intake.tools", {"allow": [{"tool": "*", "paths": ["src"]}]}),
            ("skills", {"allow_always": ["../billing"]}),
            ("states.intake.skills", {"forbid": ["skills/*"]}),
        ],
    )
    def test_star_grants_are_addressed_to_their_entry(
        self, path: str, value: dict[str, object]
    ) -> None:
        """The error names the offending entry's index."""
        (key,) = value
        (line,) = issues(with_(path, value))
        assert line.startswith(f"{path}.{key}.0: ")

    def test_slug_skills_and_star_skill_forbids_load(self) -> None:
        """Slug skill entries load, and a skills forbid may deny every skill with ``*``."""
        data = with_("states.intake.skills", {"allow": ["billing"], "forbid": ["*"]})
        data["skills"] = {"allow_always": ["house-style"], "forbid_always": ["legacy"]}
        spec = parse_spec(data)
        assert spec.state("intake").skills.allow == ["billing"]
        assert spec.skills.allow_always == ["house-style"]

    def test_mounts_are_not_skill_slugs(self) -> None:
        """Mount entries keep their own (path-shaped) spelling."""
        spec = parse_spec(with_("states.intake.mounts", {"allow": ["data/reports"]}))
        assert spec.state("intake").mounts.allow == ["data/reports"]

    def test_star_in_a_forbid_list_loads(self) -> None:
        """A forbid entry may deny every tool with ``*``."""
        spec = parse_spec(with_("states.intake.tools", {"forbid": [{"tool": "*"}]}))
        (entry,) = spec.state("intake").tools.forbid
        assert isinstance(entry, ToolGrant) and entry.tool == "*"


class TestMachineProblems:
    def test_dangling_transition_is_addressed_to_its_field(self) -> None:
        """A transition to an undeclared state is an error on that ``to``."""
        data = with_("states.intake.transitions.0.to", "nowhere")
        assert issues(data) == [
            "states.intake.transitions.0.to: transition to undeclared state 'nowhere'"
        ]

    def test_on_error_must_name_a_declared_state(self) -> None:
        """``on_error`` naming no declared state is an error."""
        assert issues(with_("states.intake.on_error", "ghost")) == [
            "states.intake.on_error: undeclared state 'ghost'"
        ]

    def test_a_trigger_has_one_entry_state(self) -> None:
        """Two states declaring one trigger id is an error naming both."""
        data = with_("states.done", {"triggers": {"manual": None}})
        (line,) = issues(data)
        assert line.startswith("states.done.triggers.manual: ")
        assert "'intake'" in line and "'done'" in line

    def test_no_start_state(self) -> None:
        """A workflow where no state declares a trigger has no start state."""
        data = with_("states.intake.triggers", {})
        assert issues(data) == ["states: Workflow has no start state (no state declares a trigger)"]

    @pytest.mark.parametrize("slug", ["Review", "re_view", "-x", "a--b"])
    def test_state_slugs_are_kebab_case(self, slug: str) -> None:
        """A state slug outside ``^[a-z0-9]+(-[a-z0-9]+)*$`` is reported."""
        data = base()
        data["states"][slug] = None
        assert f"states.{slug}: state slug must be kebab-case ([a-z0-9-])" in issues(data)

    @pytest.mark.parametrize("kind", ["requires", "returns"])
    def test_signature_names_are_variable_names_and_distinct(self, kind: str) -> None:
        """Signature names must be valid variable names, distinct across both spellings."""
        decl = {kind: ["Order-Id", "a", {"name": "a", "type": "string"}]}
        found = issues(with_("states.intake.triggers.manual", decl))
        where = f"states.intake.triggers.manual.{kind}"
        assert f"{where}: invalid variable name 'Order-Id'" in found
        assert f"{where}: duplicated names" in found

    def test_typed_signature_entries_are_strict(self) -> None:
        """A typed entry with an unknown key or type is an error."""
        decl = {"requires": [{"name": "a", "tipe": "string"}, {"name": "b", "type": "blob"}]}
        found = issues(with_("states.intake.triggers.manual", decl))
        assert 'states.intake.triggers.manual.requires.0: unknown key "tipe"' in found
        assert any(
            line.startswith("states.intake.triggers.manual.requires.1.type") for line in found
        )

    @pytest.mark.parametrize("name", ["trigger", "title", "note"])
    def test_reserved_names_are_refused_in_returns(self, name: str) -> None:
        """``returns`` may not name the runtime-owned ``trigger``, ``title`` or ``note``."""
        found = issues(with_("states.intake.triggers.manual", {"returns": [name]}))
        assert any(
            line.startswith("states.intake.triggers.manual.returns: ") and repr(name) in line
            for line in found
        )

    @pytest.mark.parametrize("slug", ["review\n", "r\u0661"])
    def test_state_slug_with_a_trailing_newline_or_non_ascii_is_refused(self, slug: str) -> None:
        """``$`` would let ``review\\n`` through; the slug check does not."""
        data = base()
        data["states"][slug] = None
        assert any(line.startswith("states.") and "kebab-case" in line for line in issues(data))

    def test_a_valid_spec_has_no_problems(self) -> None:
        """The graph checks find nothing in a well-formed spec."""
        assert machine_problems(parse_spec(base())) == []


class TestWorkflowSpec:
    def spec(self, states: dict[str, Any]) -> WorkflowSpec:
        return parse_spec({"states": copy.deepcopy(states)})

    def test_entry_prefers_the_manual_start_state(self) -> None:
        """The machine's entry is the ``manual`` start state even when it is not first."""
        spec = self.spec({"a": {"triggers": {"email": None}}, "b": {"triggers": {"manual": None}}})
        assert spec.entry == "b"

    def test_entry_falls_back_to_the_first_start_state(self) -> None:
        """Without ``manual`` the entry is the first state that declares a trigger."""
        spec = self.spec(
            {"a": None, "b": {"triggers": {"x": None}}, "c": {"triggers": {"y": None}}}
        )
        assert spec.entry == "b"

    def test_start_state_for_a_declared_trigger(self) -> None:
        """A declared trigger opens at its own entry state."""
        spec = self.spec({"a": {"triggers": {"manual": None}}, "b": {"triggers": {"reply": None}}})
        assert spec.start_state_for("reply") == "b"
        assert spec.start_state_for("manual") == "a"

    def test_manual_opens_at_entry_when_undeclared(self) -> None:
        """``manual`` opens at the entry even when no state declares it; others do not."""
        spec = self.spec({"a": None, "b": {"triggers": {"email": None}}})
        assert spec.start_state_for("manual") == "b"
        assert spec.start_state_for("sms") is None

    def test_trigger_lookup_and_ids(self) -> None:
        """``trigger`` finds a declaration; ``trigger_ids`` lists all in declaration order."""
        spec = self.spec(
            {
                "a": {"triggers": {"manual": None, "email": {"session": "conversation_id"}}},
                "b": {"triggers": {"reply": {"session": "triggers.-1.conversationId"}}},
            }
        )
        assert spec.trigger_ids() == ["manual", "email", "reply"]
        reply = spec.trigger("reply")
        assert reply is not None and reply.session == "triggers.-1.conversationId"
        assert spec.trigger("nope") is None
        assert spec.trigger_entry("email") == "a"


class TestStateSpec:
    def test_terminal_means_no_transitions(self) -> None:
        """A state with no transitions is terminal; one with an edge is not."""
        spec = parse_spec(base())
        assert spec.state("done").is_terminal
        assert not spec.state("intake").is_terminal

    def test_human_type(self) -> None:
        """``type: human`` marks a human decision node; the default type is agent."""
        data = with_("states.done", {"type": "human", "instructions": "Decide."})
        data["states"]["done"]["transitions"] = [{"to": "intake", "description": "Redo."}]
        spec = parse_spec(data)
        assert spec.state("done").is_human and not spec.state("done").is_terminal
        assert not spec.state("intake").is_human
        assert spec.state("intake").type == "agent"

    def test_advance_enum_lists_each_target_once(self) -> None:
        """Two edges to one state give one ``archmax_advance`` target, in edge order."""
        data = base()
        data["states"]["intake"]["transitions"] = [
            {"to": "done", "description": "Solved.", "type": "approve"},
            {"to": "intake", "description": "Retry."},
            {"to": "done", "description": "Gave up.", "type": "reject"},
        ]
        (advance,) = [
            s for s in runtime_tool_schemas(parse_spec(data).state("intake")) if s.name == ADVANCE
        ]
        assert advance.parameters["properties"]["to"]["enum"] == ["done", "intake"]

    def test_single_hook_becomes_a_list(self) -> None:
        """A lone hook mapping is read as a one-entry list."""
        spec = parse_spec(with_("states.intake.before", {"script": "hooks/check.js"}))
        assert [h.script for h in spec.state("intake").before] == ["hooks/check.js"]
