"""``archmax_wait``'s ``until``: a relative duration or an ISO-8601 instant, made absolute.

A relative duration means little to the process that reads the park record tomorrow, so the
runtime normalises it to an absolute ``resume_at`` at the moment of the park. Pure: the caller
passes "now" (``workflow.now()`` inside a workflow).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_RELATIVE = re.compile(r"^\s*([0-9]+)\s*(ms|s|m|h|d)\s*\Z")
_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
}


class InvalidUntilError(ValueError):
    """An ``until`` that is neither a relative duration nor an ISO-8601 instant."""


def resolve_until(until: str, now: datetime) -> datetime:
    """The absolute instant ``until`` names, relative to ``now`` (timezone-aware, UTC).

    ``30m``, ``2h``, ``1d``, ``500ms`` count from ``now``; ``2026-12-03T09:00:00Z`` (or any
    ISO-8601 instant; one without an offset is read as UTC) is taken as it is.
    """
    if not isinstance(until, str) or not until.strip():
        raise InvalidUntilError("until must be a non-empty string such as '30m', '2h', '1d'")
    match = _RELATIVE.match(until)
    if match:
        try:
            amount, unit = int(match.group(1)), match.group(2)
            return _aware(now) + amount * _UNITS[unit]
        except (OverflowError, ValueError):
            # Beyond timedelta/datetime range, or too many digits for int().
            raise InvalidUntilError(
                f"until {until!r} is out of range: use a duration that ends before year 10000"
            ) from None
    try:
        return _aware(datetime.fromisoformat(until.strip()))
    except (OverflowError, ValueError):
        raise InvalidUntilError(
            f"cannot read until {until!r}: use a relative duration (30m, 2h, 1d) "
            "or an ISO-8601 instant (2026-12-03T09:00:00Z)"
        ) from None


def relative_duration(text: str) -> timedelta:
    """A relative duration in ``until``'s syntax (``90s``, ``30m``, ``1h``, ``2d``, ``500ms``;
    a bare ``0`` is zero); ValueError naming the syntax otherwise."""
    if text.strip() == "0":
        return timedelta(0)
    match = _RELATIVE.match(text)
    if not match:
        raise InvalidUntilError(
            f"cannot read duration {text!r}: use a relative duration such as 90s, 30m, 1h, 1d"
        )
    try:
        return int(match.group(1)) * _UNITS[match.group(2)]
    except (OverflowError, ValueError):
        raise InvalidUntilError(f"duration {text!r} is out of range") from None


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
