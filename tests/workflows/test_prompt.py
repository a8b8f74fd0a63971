"""workflows/prompt.py and runtime_tools.py: what the model is told, per state (§2.3, §7)."""

from __future__ import annotations

import itertools

import pytest

from archmax_temporal.workflows.models import PromptParts, Variable
from archmax_temporal.workflows.prompt import (
    PLATFORM_RULES,
    render_state_block,
    render_system_prompt,
)
from archmax_temporal.workflows.runtime_tools import (
    ADVANCE,
    GET_VARIABLES,
    NOTE,
    RAISE,
    RESET,
    RUNTIME_TOOLS,
    SET_VARIABLES,
    WAIT,
    runtime_tool_schemas,
)
from archmax_temporal.workflows.spec import parse_spec

SPEC = parse_spec(
    {
        "title": "Support inbox",
        "instructions": "ROOT-INSTRUCTIONS: be brief.",
        "states": {
            "intake": {
                "title": "Intake title",
                "instructions": "INTAKE-INSTRUCTIONS",
                "triggers": {"manual": None},
                "transitions": [
                    {"to": "review", "description": "A refund needs a person."},
                    {"to": "answer", "description": "The order is identified."},
                ],
            },
            "review": {
                "type": "human",
                "title": "REVIEW-TITLE",
                "summary": "REVIEW-SUMMARY",
                "instructions": "REVIEW-INSTRUCTIONS",
                "transitions": [
                    {"to": "answer", "description": "REVIEW-EDGE approved.", "type": "approve"},
                    {"to": "gate", "description": "REVIEW-EDGE escalate."},
                ],
            },
            "answer": {"title": "ANSWER-TITLE", "instructions": "ANSWER-INSTRUCTIONS"},
            "gate": {"type": "human", "instructions": "Decide."},
        },
    }
)
SECRETS = ["REVIEW-TITLE", "REVIEW-SUMMARY", "REVIEW-INSTRUCTIONS", "REVIEW-EDGE"]
SECRETS += ["ANSWER-TITLE", "ANSWER-INSTRUCTIONS"]
STARTS = ["intake", "answer", None]


def block(
    slug: str,
    *,
    entry_state: str | None = "intake",
    follow_up: bool = False,
    variables: dict[str, Variable] | None = None,
    handoff: bool = False,
) -> str:
    return render_state_block(
        SPEC,
        slug,
        entry_state=entry_state,
        follow_up=follow_up,
        variables=variables or {},
        handoff=handoff,
    )


class TestRenderSystemPrompt:
    def test_sections_in_order(self) -> None:
        """Title, instructions, WORKFLOW.md, AGENTS.md, then the platform rules, in that order."""
        parts = PromptParts(workflow_md="WF-PROSE\n", agents_md="AGENTS-PROSE")
        prompt = render_system_prompt(SPEC, parts, "support-inbox")
        assert prompt.startswith("# Workflow: Support inbox\n\n## Instructions\nROOT-INSTRUCTIONS")
        order = [
            prompt.index(marker)
            for marker in ("ROOT-INSTRUCTIONS", "WF-PROSE", "## Guidance (AGENTS.md)\nAGENTS-PROSE")
        ]
        assert order == sorted(order)
        assert prompt.endswith(PLATFORM_RULES.strip())

    def test_slug_heads_a_workflow_without_title(self) -> None:
        """Without a ``title`` the slug names the workflow; absent parts add no sections."""
        spec = parse_spec({"states": {"only": {"triggers": {"manual": None}}}})
        prompt = render_system_prompt(spec, PromptParts(), "chat")
        assert prompt == f"# Workflow: chat\n\n{PLATFORM_RULES.strip()}"

    def test_static_prefix_holds_no_state_text(self) -> None:
        """The cacheable prefix carries no state's title or instructions."""
        prompt = render_system_prompt(SPEC, PromptParts(), "support-inbox")
        for text in ["INTAKE-INSTRUCTIONS", "Intake title", *SECRETS]:
            assert text not in prompt

    def test_rules_name_the_runtime_tools(self) -> None:
        """The platform rules explain advance, wait, raise and reset, and forbid archmax_note."""
        for tool in ["archmax_advance", "archmax_wait", "archmax_raise", "archmax_reset"]:
            assert f"`{tool}" in PLATFORM_RULES
        assert "Never call `archmax_note`" in PLATFORM_RULES


class TestRenderStateBlock:
    def test_current_state_marker_leads(self) -> None:
        """The block opens with ``## Current state: `slug``` and the state's own title."""
        assert block("intake").startswith("## Current state: `intake` — Intake title\n")
        assert block("gate").splitlines()[0] == "## Current state: `gate`"

    def test_current_instructions_are_shown(self) -> None:
        """The active state's own instructions are in its block."""
        assert "### Instructions\nINTAKE-INSTRUCTIONS" in block("intake")

    def test_only_outgoing_edges_are_disclosed(self) -> None:
        """Each outgoing edge is one line: its target, its marks and its description."""
        text = block("intake")
        edges = [line for line in text.splitlines() if line.startswith("- to ")]
        assert edges == [
            "- to `review` (human decision node) — A refund needs a person.",
            "- to `answer` (terminal) — The order is identified.",
        ]

    def test_targets_are_never_described(self) -> None:
        """A target's title, summary, instructions and onward edges never reach the block."""
        text = block("intake")
        for secret in SECRETS:
            assert secret not in text
        assert "`gate`" not in text

    def test_human_state_block_lists_its_own_edges(self) -> None:
        """A human state's block shows its edges; a human, terminal target carries both marks."""
        text = block("review")
        assert "- to `answer` (terminal) — REVIEW-EDGE approved." in text
        assert "- to `gate` (human decision node, terminal) — REVIEW-EDGE escalate." in text
        assert "INTAKE-INSTRUCTIONS" not in text

    def test_terminal_state_has_no_edges(self) -> None:
        """A terminal state's block says it is terminal and lists no edge."""
        text = block("answer")
        assert "None: this state is terminal." in text
        assert "- to " not in text

    @pytest.mark.parametrize(
        ("slug", "follow_up", "entry"),
        list(itertools.product(["intake", "review", "answer", "gate"], [True, False], STARTS)),
    )
    def test_follow_up_block_appears_exactly_when_it_applies(
        self, slug: str, follow_up: bool, entry: str | None
    ) -> None:
        """The reset block appears iff follow-up, terminal, and not the entry state."""
        text = block(slug, follow_up=follow_up, entry_state=entry)
        expected = follow_up and SPEC.state(slug).is_terminal and entry is not None
        expected = expected and slug != entry
        assert ("### Follow-up" in text) is expected
        if expected:
            assert f"call `archmax_reset` first to return to `{entry}`" in text

    def test_one_state_chat_answers_follow_ups_in_place(self) -> None:
        """A terminal state that is the entry state gets no reset instruction."""
        spec = parse_spec({"states": {"chat": {"triggers": {"manual": None}}}})
        text = render_state_block(spec, "chat", entry_state="chat", follow_up=True, variables={})
        assert "archmax_reset" not in text

    def test_handoff_block_only_on_the_handoff_call(self) -> None:
        """The parked notice appears on the handoff call and on no other."""
        assert "## This run is parked" in block("intake", handoff=True)
        assert "## This run is parked" not in block("intake")

    def test_variables_are_listed_sorted_with_lock_marks(self) -> None:
        """Variables appear sorted by name, the host's marked locked, values as JSON."""
        variables = {
            "zeta": Variable(value="z", locked=False),
            "alpha": Variable(value={"n": 1}, locked=True),
        }
        text = block("intake", variables=variables)
        assert text.endswith('### Session variables\n- alpha (locked): {"n": 1}\n- zeta: "z"')

    def test_long_values_are_cut(self) -> None:
        """A value longer than 200 characters is shortened, saying how much was cut."""
        text = block("intake", variables={"body": Variable(value="x" * 500)})
        line = next(line for line in text.splitlines() if line.startswith("- body"))
        assert line.endswith("…(+302 chars)")
        assert len(line) < 260

    def test_no_variables_no_section(self) -> None:
        """With no variables the block has no variables section."""
        assert "### Session variables" not in block("intake")


class TestRuntimeToolSchemas:
    """workflows/runtime_tools.py: the runtime tools as the model sees them, per state."""

    def names(self, slug: str) -> list[str]:
        return [schema.name for schema in runtime_tool_schemas(SPEC.state(slug))]

    def test_non_terminal_state_discloses_advance(self) -> None:
        """A state with edges discloses advance beside the always-available runtime tools."""
        assert self.names("intake") == [ADVANCE, WAIT, RAISE, RESET, GET_VARIABLES, SET_VARIABLES]

    @pytest.mark.parametrize("slug", ["answer", "gate"])
    def test_terminal_state_hides_advance(self, slug: str) -> None:
        """A terminal state hides ``archmax_advance`` and keeps wait, raise and reset."""
        names = self.names(slug)
        assert ADVANCE not in names
        assert {WAIT, RAISE, RESET, GET_VARIABLES, SET_VARIABLES} == set(names)

    @pytest.mark.parametrize(
        ("slug", "targets"), [("intake", ["review", "answer"]), ("review", ["answer", "gate"])]
    )
    def test_advance_enum_lists_exactly_the_targets(self, slug: str, targets: list[str]) -> None:
        """``to`` is an enum of exactly this state's targets, in declaration order."""
        (advance,) = [s for s in runtime_tool_schemas(SPEC.state(slug)) if s.name == ADVANCE]
        assert advance.parameters["properties"]["to"]["enum"] == targets
        assert advance.parameters["required"] == ["to"]

    @pytest.mark.parametrize("slug", ["intake", "review", "answer", "gate"])
    def test_note_is_never_disclosed(self, slug: str) -> None:
        """``archmax_note`` is reserved: no state's tool list names it, nor any schema text."""
        schemas = runtime_tool_schemas(SPEC.state(slug))
        assert NOTE not in [s.name for s in schemas]
        assert NOTE not in RUNTIME_TOOLS
        assert all(NOTE not in s.description for s in schemas)

    def test_schemas_are_json_schema_objects_with_required_fields(self) -> None:
        """Each schema is an object schema; wait needs a reason, raise a code and a reason."""
        by_name = {s.name: s for s in runtime_tool_schemas(SPEC.state("intake"))}
        assert all(s.parameters["type"] == "object" for s in by_name.values())
        assert by_name[WAIT].parameters["required"] == ["reason"]
        assert "until" in by_name[WAIT].parameters["properties"]
        assert by_name[RAISE].parameters["required"] == ["code", "reason"]
        assert by_name[SET_VARIABLES].parameters["required"] == ["variables"]

    def test_runtime_tool_names_are_archmax_prefixed(self) -> None:
        """Every runtime tool is an ``archmax_`` name, so no host tool can shadow one."""
        assert all(name.startswith("archmax_") for name in RUNTIME_TOOLS)
        assert len(RUNTIME_TOOLS) == 6
