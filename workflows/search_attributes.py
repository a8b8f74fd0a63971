"""Custom search attributes: what the Temporal UI and `temporal workflow list` filter on.

They are registered by the project on the dev server it starts, and must be registered on a
production namespace before a worker runs (see docs/production/deployment.md). Values are
stored unencrypted: never put PII or secrets in them.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

WORKFLOW = SearchAttributeKey.for_keyword("ArchmaxWorkflow")
"""The workflow slug a session runs (``support-inbox``)."""

STATUS = SearchAttributeKey.for_keyword("ArchmaxStatus")
"""The session status: running, awaiting_input, awaiting_decision, completed, failed, rejected."""

STATE = SearchAttributeKey.for_keyword("ArchmaxState")
"""The state slug the session stands in."""

PARKED_CHANNEL = SearchAttributeKey.for_keyword("ArchmaxParkedChannel")
"""``input`` or ``decision`` while parked, empty otherwise."""

RESUME_AT = SearchAttributeKey.for_datetime("ArchmaxResumeAt")
"""When a timed ``archmax_wait`` wakes the session itself."""

ALL: tuple[SearchAttributeKey[object], ...] = (WORKFLOW, STATUS, STATE, PARKED_CHANNEL, RESUME_AT)  # type: ignore[assignment, type-var]
"""Every custom search attribute, in registration order."""
