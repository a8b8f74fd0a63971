"""A case document's model: the typed ``CaseDocument`` a ``*.test.yaml`` parses into, and the
keys and budgets it is held to.

The seed's eight top-level keys (:data:`SEED_TOP_LEVEL_KEYS`) and this runtime's ``repeat`` and
``passRate`` (:data:`EXTENSION_TOP_LEVEL_KEYS`); its steps are
:mod:`archmax_temporal.client.testing.steps`'.
:func:`archmax_temporal.client.testing.cases.parse_case` builds it, fail closed.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import Field, StrictInt

from archmax_temporal.client.testing.steps import (
    AdvanceStep,
    CaseSchemaModel,
    CaseStep,
    CrashStep,
    NonEmpty,
    Step,
)

CASE_TITLE_MAX_LENGTH: Final = 60
"""A case title's budget, in characters of whitespace-collapsed text."""

CASE_DESCRIPTION_MAX_LENGTH: Final = 200
"""A case description's budget, in characters of whitespace-collapsed text."""


SEED_TOP_LEVEL_KEYS: Final = (
    "title",
    "description",
    "skip",
    "trigger",
    "variables",
    "workspace",
    "mocks",
    "steps",
)
"""The seed's eight keys of a case document, in the order a serializer writes them."""

EXTENSION_TOP_LEVEL_KEYS: Final = ("repeat", "passRate")
"""This runtime's case fields: ``repeat: N`` runs the case N times on fresh sessions, and it
passes when at least ``passRate`` of them passed (default 1: every run)."""

TOP_LEVEL_KEYS: Final = SEED_TOP_LEVEL_KEYS + EXTENSION_TOP_LEVEL_KEYS
"""Every key a case document may have: the seed's eight, then this runtime's."""

REPEAT_MAX: Final = 100
"""The most runs ``repeat`` asks for."""


class TriggerRef(CaseSchemaModel):
    """``trigger: { id }``: the declared trigger every driven turn of the case runs under."""

    id: NonEmpty


class WorkspaceFrom(CaseSchemaModel):
    """``{ from: <path> }``: a workspace seed copied byte for byte from a file under tests/."""

    from_: NonEmpty = Field(alias="from")


WorkspaceValue = WorkspaceFrom | str | dict[str, Any] | list[Any] | int | float | bool | None
"""A seed: a string (written verbatim), a ``from:`` reference, or any JSON value."""


class Mock(CaseSchemaModel):
    """A declared tool result: the first mock (in order) whose tool and whenInput match wins."""

    tool: NonEmpty
    when_input: dict[str, Any] | None = Field(default=None, alias="whenInput")
    result: Any


class CaseDocument(CaseSchemaModel):
    """One validated case document.

    ``title`` and ``description`` are held whitespace-collapsed: the one-line label the CLI
    prints and the sentence it was measured as.
    """

    title: NonEmpty
    description: NonEmpty
    skip: NonEmpty | None = None
    trigger: TriggerRef | None = None
    variables: dict[str, Any] = Field(default_factory=dict)
    workspace: dict[str, WorkspaceValue] = Field(default_factory=dict)
    mocks: list[Mock] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    repeat: StrictInt = Field(default=1, ge=1, le=REPEAT_MAX)
    """This runtime's ``repeat``: how many runs, each on a fresh session."""
    pass_rate: float = Field(default=1.0, gt=0, le=1, alias="passRate")
    """This runtime's ``passRate``: the share of runs that must pass."""

    @property
    def actions(self) -> list[CaseStep]:
        """The steps that drive the session, in order."""
        return [step for step in self.steps if step.is_action]

    @property
    def assertions(self) -> list[CaseStep]:
        """The assertion steps, in order."""
        return [step for step in self.steps if not step.is_action]

    @property
    def recorded(self) -> list[CaseStep]:
        """The steps that yield records: the assertions, and this runtime's checks
        (``crash``, ``redeliver``); one that never ran is reported not-executed."""
        return [step for step in self.steps if not step.is_action or step.checked]

    @property
    def advances(self) -> bool:
        """Whether the case moves the clock (then it runs on the time-skipping server)."""
        return any(isinstance(step, AdvanceStep) for step in self.steps)

    @property
    def crashes(self) -> bool:
        """Whether the case kills a worker (then it runs on workers of its own)."""
        return any(isinstance(step, CrashStep) for step in self.steps)
