"""The activities a session's history records: regular ones by their scheduled events, local ones (a
short workspace tool, the turn's save: ``archmax_temporal.workflows.contracts.base.local_first``) by
their markers, which hold the result and the activity's type and id but not its input."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent

LOCAL_MARKER = "core_local_activity"
"""The marker name Temporal's SDKs record a local activity's outcome under."""


def local_marker(event: HistoryEvent) -> dict[str, Any] | None:
    """A local activity's marker data (``activity_type``, ``activity_id``, ``attempt``, …),
    or None for any other event."""
    if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
        return None
    marker = event.marker_recorded_event_attributes
    if marker.marker_name != LOCAL_MARKER:
        return None
    data: dict[str, Any] = json.loads(marker.details["data"].payloads[0].data)
    return data


def local_activities(events: Iterable[HistoryEvent]) -> list[str]:
    """The types of the local activities a history records, in order."""
    return [str(m["activity_type"]) for e in events if (m := local_marker(e)) is not None]


def scheduled_activities(events: Iterable[HistoryEvent]) -> list[str]:
    """The types of the regular activities a history schedules, in order."""
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def activities_run(events: Iterable[HistoryEvent], *, skipping: str | None = None) -> list[str]:
    """Every activity call a history records, regular or local, in order, once each: a local
    activity that failed went on as the regular one (the same call), counted there.
    ``skipping``: leave out the regular calls that failed for good with that error type (a
    ``PromptMissing``: a call that did nothing, sent again)."""
    events = list(events)
    skipped = {
        e.activity_task_failed_event_attributes.scheduled_event_id
        for e in events
        if skipping is not None
        and e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
        and e.activity_task_failed_event_attributes.failure.application_failure_info.type
        == skipping
    }
    found = []
    for e in events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if e.event_id not in skipped:
                found.append(e.activity_task_scheduled_event_attributes.activity_type.name)
        elif (marker := local_marker(e)) is not None and not (
            e.marker_recorded_event_attributes.HasField("failure")
        ):
            found.append(str(marker["activity_type"]))
    return found


def failed_activities(events: Iterable[HistoryEvent]) -> list[Failure]:
    """The failures of the regular activity attempts a history records as failed, in order."""
    return [
        e.activity_task_failed_event_attributes.failure
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]


PATCH_MARKER = "core_patch"
"""The marker name Temporal's SDKs record a ``workflow.patched`` id under."""


def patch_ids(events: Iterable[HistoryEvent]) -> list[str]:
    """The ``workflow.patched`` ids a history records markers for, in order."""
    return [
        str(json.loads(payload.data)["id"])
        for e in events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == PATCH_MARKER
        for payload in e.marker_recorded_event_attributes.details["patch-data"].payloads
    ]
