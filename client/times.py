"""Times as a person reads them: relative and rounded, then local."""

from __future__ import annotations

from datetime import UTC, datetime


def span(seconds: float) -> str:
    """``40 s``, ``12 min``, ``23 h``, ``3 d``: a span rounded to its largest unit."""
    whole = round(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if whole >= size:
            return f"{round(whole / size)} {unit}"
    return f"{whole} s"


def when(moment: datetime, now: datetime | None = None) -> str:
    """A moment relative to now, then local: ``in 23 h (Fri 09:00)``, ``12 min ago (Fri
    09:00)``; with the date when it is a week or more away."""
    now = now or datetime.now(UTC)
    delta = (moment - now).total_seconds()
    local = moment.astimezone()
    near = abs(delta) < 6 * 86400
    shown = local.strftime("%a %H:%M") if near else local.strftime("%Y-%m-%d %H:%M")
    relative = f"in {span(delta)}" if delta >= 0 else f"{span(-delta)} ago"
    return f"{relative} ({shown})"
