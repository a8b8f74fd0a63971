"""client/loader.py: an authored tree becomes a typed, hashed spec plus its prose (§2)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from archmax_temporal.client.loader import load_workflow, spec_hash, workflow_slugs
from archmax_temporal.workflows.errors import SpecValidationError, UnknownWorkflowError
from archmax_temporal.workflows.spec import parse_spec
from tests.support.paths import EXAMPLES

SPEC = """\
title: Support
states:
  intake:
    triggers:
      manual:
    transitions:
      - to: done
        description: The work is done.
  done:
"""


def write(root: Path, slug: str = "support", spec: str | bytes = SPEC, **files: str) -> Path:
    """A workflow ``slug`` under ``root``; ``files`` maps names in its directory to text."""
    directory = root / "workflows" / slug
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "workflow.yaml"
    if isinstance(spec, bytes):
        target.write_bytes(spec)
    else:
        target.write_text(spec)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def load_issues(root: Path, slug: str = "support") -> tuple[str, list[str]]:
    with pytest.raises(SpecValidationError) as caught:
        load_workflow(root, slug)
    return caught.value.source, caught.value.issues


class TestLoadWorkflow:
    def test_loads_a_workflow(self, tmp_path: Path) -> None:
        """A tree with a valid workflow.yaml loads into slug, spec, hash and directory."""
        directory = write(tmp_path)
        loaded = load_workflow(tmp_path, "support")
        assert loaded.slug == "support" and loaded.directory == directory
        assert loaded.spec.entry == "intake"
        assert re.fullmatch(r"[0-9a-f]{16}", loaded.spec_hash)
        assert loaded.spec_hash == spec_hash(loaded.spec)
        assert (loaded.prompt.workflow_md, loaded.prompt.agents_md) == (None, None)

    def test_the_example_workspace_loads(self) -> None:
        """The shipped support-inbox example loads and opens in ``clarify``."""
        loaded = load_workflow(EXAMPLES / "support-inbox", "support-inbox")
        assert loaded.spec.entry == "clarify"
        assert "email_reply" in loaded.spec.trigger_ids()
        assert loaded.prompt.workflow_md and "<!--" not in loaded.prompt.workflow_md

    def test_unknown_workflow_lists_the_known_ones(self, tmp_path: Path) -> None:
        """An unknown slug raises UnknownWorkflowError naming every known workflow."""
        write(tmp_path, "beta")
        write(tmp_path, "alpha")
        (tmp_path / "workflows" / "no-spec").mkdir()
        with pytest.raises(UnknownWorkflowError, match=r"'gamma'.*\(workflows: alpha, beta\)"):
            load_workflow(tmp_path, "gamma")

    def test_unknown_workflow_in_an_empty_root(self, tmp_path: Path) -> None:
        """With no workflows at all the error says so."""
        with pytest.raises(UnknownWorkflowError, match=r"\(none\)"):
            load_workflow(tmp_path, "support")

    def test_workflow_slugs_need_a_spec_file(self, tmp_path: Path) -> None:
        """Only directories holding a workflow.yaml are workflows, listed sorted."""
        write(tmp_path, "zeta")
        write(tmp_path, "alpha")
        (tmp_path / "workflows" / "draft").mkdir()
        (tmp_path / "workflows" / "draft" / "WORKFLOW.md").write_text("prose")
        assert workflow_slugs(tmp_path) == ["alpha", "zeta"]
        assert workflow_slugs(tmp_path / "nowhere") == []

    def test_workflow_slug_must_be_kebab_case(self, tmp_path: Path) -> None:
        """A workflow directory whose name is not kebab-case does not load."""
        write(tmp_path, "Support_Inbox")
        source, found = load_issues(tmp_path, "Support_Inbox")
        assert source == "workflows/Support_Inbox/workflow.yaml"
        assert found == ["<workflow>: workflow slug 'Support_Inbox' must be kebab-case"]

    def test_schema_errors_name_the_file(self, tmp_path: Path) -> None:
        """A schema problem is a SpecValidationError sourced at the workflow's yaml."""
        write(tmp_path, spec=SPEC.replace("transitions:", "transtions:"))
        source, found = load_issues(tmp_path)
        assert source == "workflows/support/workflow.yaml"
        assert 'states.intake: unknown key "transtions"' in found

    def test_yaml_syntax_error_names_line_and_column(self, tmp_path: Path) -> None:
        """Unparseable YAML is a SpecValidationError pointing at the line and column."""
        write(tmp_path, spec="states:\n  a: [1, 2\n  b: 3\n")
        _, found = load_issues(tmp_path)
        assert len(found) == 1
        assert re.match(r"line 3, column \d+: YAML does not parse: expected ',' or ']'", found[0])

    @pytest.mark.parametrize("text", ["", "# only a comment\n", "- a\n- b\n", "just text\n"])
    def test_non_mapping_documents_are_refused(self, tmp_path: Path, text: str) -> None:
        """An empty file, a list or a scalar is not a workflow spec."""
        write(tmp_path, spec=text)
        assert load_issues(tmp_path)[1] == ["<root>: a workflow spec must be a mapping"]

    def test_non_utf8_is_refused(self, tmp_path: Path) -> None:
        """A spec file that is not UTF-8 text is a SpecValidationError, not a crash."""
        write(tmp_path, spec=b"title: caf\xe9\nstates: {}\n")
        assert load_issues(tmp_path)[1][0].startswith("<file>: not UTF-8 text")

    def test_duplicate_keys_are_refused(self, tmp_path: Path) -> None:
        """A state declared twice is a load error, not a silent override (fail closed)."""
        write(tmp_path, spec=SPEC + "  intake:\n    triggers: {manual: }\n")
        assert load_issues(tmp_path)[1] == [
            "line 10, column 3: duplicate key 'intake' (first at line 3, column 3)"
        ]

    def test_duplicate_keys_are_refused_at_any_depth(self, tmp_path: Path) -> None:
        """A key repeated inside a nested (flow) mapping is named where it repeats."""
        write(tmp_path, spec=SPEC.replace("manual:", "manual: {session: a, session: b}"))
        assert load_issues(tmp_path)[1] == [
            "line 5, column 28: duplicate key 'session' (first at line 5, column 16)"
        ]

    def test_a_key_overriding_a_merged_one_is_no_duplicate(self, tmp_path: Path) -> None:
        """``<<: *anchor`` then one of the anchor's own keys is an override, not a repeat."""
        spec = "metadata: {edge: &edge {to: done, description: Base.}}\n" + SPEC.replace(
            "      - to: done\n        description: The work is done.\n",
            "      - <<: *edge\n        description: Overridden.\n",
        )
        write(tmp_path, spec=spec)
        (edge,) = load_workflow(tmp_path, "support").spec.state("intake").transitions
        assert (edge.to, edge.description) == ("done", "Overridden.")

    def test_slug_is_checked_before_the_filesystem(self, tmp_path: Path) -> None:
        """``../x`` is refused as a slug even when ``<root>/x/workflow.yaml`` exists."""
        (tmp_path / "x").mkdir()
        (tmp_path / "x" / "workflow.yaml").write_text(SPEC)
        (tmp_path / "workflows").mkdir()
        _, found = load_issues(tmp_path, "../x")
        assert found == ["<workflow>: workflow slug '../x' must be kebab-case"]

    def test_slug_with_a_trailing_newline_is_refused(self, tmp_path: Path) -> None:
        """``support\\n`` is not the slug ``support``."""
        write(tmp_path)
        assert "must be kebab-case" in load_issues(tmp_path, "support\n")[1][0]


class TestPromptProse:
    def test_workflow_and_agents_md_join_the_prompt(self, tmp_path: Path) -> None:
        """WORKFLOW.md beside the spec and the root AGENTS.md are read, trimmed."""
        write(tmp_path, **{"WORKFLOW.md": "\n  Be kind.\n\n"})
        (tmp_path / "AGENTS.md").write_text("House rules.\n")
        prompt = load_workflow(tmp_path, "support").prompt
        assert (prompt.workflow_md, prompt.agents_md) == ("Be kind.", "House rules.")

    def test_html_comments_are_stripped(self, tmp_path: Path) -> None:
        """HTML comments, multi-line ones included, never reach the prompt."""
        prose = "<!-- editor note -->\nKeep it short.\n<!--\nTODO: secret\n-->\nSign off."
        write(tmp_path, **{"WORKFLOW.md": prose})
        (tmp_path / "AGENTS.md").write_text("A <!-- hidden --> B")
        prompt = load_workflow(tmp_path, "support").prompt
        assert prompt.workflow_md == "Keep it short.\n\nSign off."
        assert prompt.agents_md == "A  B"

    def test_comment_only_prose_is_absent(self, tmp_path: Path) -> None:
        """A file that is only comments and whitespace contributes nothing."""
        write(tmp_path, **{"WORKFLOW.md": "<!-- nothing yet -->\n\n"})
        assert load_workflow(tmp_path, "support").prompt.workflow_md is None

    @pytest.mark.parametrize(
        "prose", ["---\nstates: {}\n---\nBody", "<!-- header -->\n---\ntitle: x\n---\n"]
    )
    def test_front_matter_is_a_competing_machine(self, tmp_path: Path, prose: str) -> None:
        """A YAML front matter block in WORKFLOW.md is a load error on WORKFLOW.md."""
        write(tmp_path, **{"WORKFLOW.md": prose})
        source, found = load_issues(tmp_path)
        assert source == "workflows/support/WORKFLOW.md"
        assert "competing machines" in found[0]


def hash_of(data: dict[str, Any]) -> str:
    return spec_hash(parse_spec(data))


BASE = yaml.safe_load(SPEC)


class TestSpecHash:
    def test_metadata_is_excluded(self) -> None:
        """Root and state ``metadata`` never change the hash."""
        moved = yaml.safe_load(SPEC)
        moved["metadata"] = {"canvas": {"zoom": 3}}
        moved["states"]["intake"]["metadata"] = {"x": 10, "y": 20}
        assert hash_of(moved) == hash_of(BASE)

    def test_governing_changes_change_the_hash(self) -> None:
        """An edit the agent or the runtime would notice changes the hash."""
        edited = yaml.safe_load(SPEC)
        edited["states"]["intake"]["transitions"][0]["description"] = "Finished."
        budget = yaml.safe_load(SPEC)
        budget["states"]["intake"]["budget"] = {"maxParks": 2}
        extra = yaml.safe_load(SPEC)
        extra["states"]["intake"]["triggers"]["manual"] = {"channel": "email"}
        hashes = {hash_of(BASE), hash_of(edited), hash_of(budget), hash_of(extra)}
        assert len(hashes) == 4

    def test_defaults_spelled_out_hash_the_same(self) -> None:
        """Writing a default explicitly (``type: agent``) is the same spec."""
        explicit = yaml.safe_load(SPEC)
        explicit["states"]["intake"]["type"] = "agent"
        assert hash_of(explicit) == hash_of(BASE)

    @given(st.permutations(["title", "instructions", "settings", "states"]), st.booleans())
    def test_key_order_does_not_matter(self, order: list[str], flip_state_keys: bool) -> None:
        """Reordering mapping keys (root keys, a state's keys) gives the same hash."""
        full = yaml.safe_load(SPEC) | {"instructions": "Be brief.", "settings": {"model": "m"}}
        reordered = {key: full[key] for key in order}
        if flip_state_keys:
            intake = reordered["states"]["intake"]
            reordered["states"]["intake"] = dict(reversed(list(intake.items())))
        assert hash_of(reordered) == hash_of(full)

    def test_state_order_that_changes_the_entry_changes_the_hash(self) -> None:
        """Two specs whose entry states differ never share a hash."""
        first = {"states": {"a": {"triggers": {"x": None}}, "b": {"triggers": {"y": None}}}}
        second = {"states": {"b": first["states"]["b"], "a": first["states"]["a"]}}
        assert parse_spec(first).entry != parse_spec(second).entry
        assert hash_of(first) != hash_of(second)
