"""workflows/durations.py: ``archmax_wait``'s ``until`` made absolute (sessions seed, §7)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archmax_temporal.workflows.durations import InvalidUntilError, resolve_until

NOW = datetime(2026, 12, 2, 16, 0, 0, tzinfo=UTC)
UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
}


class TestRelativeDurations:
    @pytest.mark.parametrize(
        ("until", "delta"),
        [
            ("30m", timedelta(minutes=30)),
            ("2h", timedelta(hours=2)),
            ("1d", timedelta(days=1)),
            ("500ms", timedelta(milliseconds=500)),
            ("10s", timedelta(seconds=10)),
            (" 5 m ", timedelta(minutes=5)),
            ("0s", timedelta(0)),
        ],
    )
    def test_relative_duration_counts_from_now(self, until: str, delta: timedelta) -> None:
        """``30m``, ``2h``, ``1d``, ``500ms``, ``10s`` name now plus that much."""
        assert resolve_until(until, NOW) == NOW + delta

    def test_result_is_utc(self) -> None:
        """The resolved instant is timezone-aware and expressed in UTC."""
        paris = NOW.astimezone(timezone(timedelta(hours=1)))
        resolved = resolve_until("1h", paris)
        assert resolved.tzinfo == UTC
        assert resolved == NOW + timedelta(hours=1)

    def test_naive_now_is_read_as_utc(self) -> None:
        """A naive ``now`` is taken to be UTC, not local time."""
        assert resolve_until("2h", NOW.replace(tzinfo=None)) == NOW + timedelta(hours=2)

    @given(amount=st.integers(min_value=0, max_value=100_000), unit=st.sampled_from(sorted(UNITS)))
    def test_any_amount_of_any_unit(self, amount: int, unit: str) -> None:
        """Every ``<n><unit>`` resolves to exactly now plus n units."""
        assert resolve_until(f"{amount}{unit}", NOW) == NOW + amount * UNITS[unit]

    @pytest.mark.parametrize("until", ["10000000d", "99999999999d", "1" + "0" * 21 + "ms"])
    def test_out_of_range_duration_is_an_invalid_until(self, until: str) -> None:
        """An ``until`` beyond the representable range is refused like any unreadable one."""
        with pytest.raises(InvalidUntilError):
            resolve_until(until, NOW)

    @pytest.mark.parametrize("until", ["\u0663m", "2h\n\u0661", "9" * 5000 + "s"])
    def test_non_ascii_digits_and_endless_digits_are_refused(self, until: str) -> None:
        """Only ASCII digits count, and an amount too long for ``int`` is no crash."""
        with pytest.raises(InvalidUntilError):
            resolve_until(until, NOW)

    def test_out_of_range_instant_is_an_invalid_until(self) -> None:
        """An instant that overflows on normalisation to UTC is refused, not a crash."""
        with pytest.raises(InvalidUntilError):
            resolve_until("9999-12-31T23:59:59-05:00", NOW)


class TestInstants:
    @pytest.mark.parametrize(
        ("until", "expected"),
        [
            ("2026-12-03T09:00:00Z", datetime(2026, 12, 3, 9, tzinfo=UTC)),
            ("2026-12-03T09:00:00+02:00", datetime(2026, 12, 3, 7, tzinfo=UTC)),
            ("2026-12-03T09:00:00-05:30", datetime(2026, 12, 3, 14, 30, tzinfo=UTC)),
            ("2026-12-03T09:00:00.250Z", datetime(2026, 12, 3, 9, 0, 0, 250000, tzinfo=UTC)),
        ],
    )
    def test_instant_with_offset_is_normalised_to_utc(self, until: str, expected: datetime) -> None:
        """An ISO-8601 instant with ``Z`` or an offset is taken as it is, in UTC."""
        resolved = resolve_until(until, NOW)
        assert resolved == expected
        assert resolved.utcoffset() == timedelta(0)

    def test_naive_instant_is_utc(self) -> None:
        """An instant without an offset is read as UTC."""
        assert resolve_until("2026-12-03T09:00:00", NOW) == datetime(2026, 12, 3, 9, tzinfo=UTC)

    def test_instant_ignores_now(self) -> None:
        """An absolute instant does not depend on when it is resolved, past ones included."""
        past = "2020-01-01T00:00:00Z"
        assert resolve_until(past, NOW) == resolve_until(past, NOW + timedelta(days=9))

    @given(st.datetimes(timezones=st.just(UTC)))
    def test_isoformat_round_trips(self, moment: datetime) -> None:
        """Any aware instant's own ISO-8601 text resolves back to that instant."""
        assert resolve_until(moment.isoformat(), NOW) == moment


class TestGarbage:
    @pytest.mark.parametrize(
        "until",
        ["", "   ", "soon", "1D", "1.5h", "-5m", "5 minutes", "1w", "m30", "2026-13-01T00:00:00"],
    )
    def test_unreadable_until_is_refused(self, until: str) -> None:
        """An ``until`` that is neither a duration nor an instant raises InvalidUntilError."""
        with pytest.raises(InvalidUntilError):
            resolve_until(until, NOW)

    @pytest.mark.parametrize("until", [None, 30, 1.5, ["1d"]])
    def test_non_string_until_is_refused(self, until: object) -> None:
        """A non-string ``until`` raises InvalidUntilError rather than a TypeError."""
        with pytest.raises(InvalidUntilError):
            resolve_until(until, NOW)  # type: ignore[arg-type]  # a wrong type on purpose

    def test_invalid_until_is_a_value_error(self) -> None:
        """InvalidUntilError is a ValueError, and its message says what forms are accepted."""
        with pytest.raises(ValueError, match=r"30m, 2h, 1d"):
            resolve_until("tomorrow-ish", NOW)

    @given(st.text().filter(lambda text: not re.search(r"\d{7,}", text)))
    def test_any_text_resolves_or_is_refused(self, text: str) -> None:
        """Arbitrary text either resolves to an aware UTC instant or raises InvalidUntilError."""
        try:
            resolved = resolve_until(text, NOW)
        except InvalidUntilError:
            return
        assert resolved.tzinfo is not None and resolved.utcoffset() == timedelta(0)
