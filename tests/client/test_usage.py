"""Token accounting: what one model call reports, what a command's footer says, what it costs."""

from __future__ import annotations

import pytest
from openai.types import CompletionUsage

from archmax_temporal.activities.model import usage_of
from archmax_temporal.client.usage import Pricing, configured_pricing, footer_line
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.models import Usage

SPENT = Usage(calls=2, prompt_tokens=1200, completion_tokens=300, total_tokens=1500)


def test_a_reported_usage_keeps_cache_reads_and_writes() -> None:
    reported = CompletionUsage.model_validate(
        {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 60},
            "cache_creation_input_tokens": 30,
        }
    )
    assert usage_of(reported) == Usage(
        calls=1,
        prompt_tokens=100,
        completion_tokens=20,
        total_tokens=120,
        cache_read_tokens=60,
        cache_write_tokens=30,
    )


def test_an_endpoint_that_reports_nothing_still_counts_the_call() -> None:
    assert usage_of(None) == Usage(calls=1)


def test_since_is_what_a_later_snapshot_added() -> None:
    later = SPENT.plus(Usage(calls=1, prompt_tokens=50, completion_tokens=5, total_tokens=55))
    assert later.since(SPENT) == Usage(
        calls=1, prompt_tokens=50, completion_tokens=5, total_tokens=55
    )


def test_the_footer_names_in_and_out() -> None:
    assert footer_line(SPENT) == "tokens     in 1200 · out 300"


def test_the_footer_shows_the_cache_only_when_it_was_used() -> None:
    cached = SPENT.model_copy(update={"cache_read_tokens": 800, "cache_write_tokens": 100})
    assert footer_line(cached) == "tokens     in 1200 · out 300 · cache r 800/w 100"


@pytest.mark.parametrize("usage", [None, Usage(), Usage(calls=3)])
def test_nothing_reported_means_no_footer(usage: Usage | None) -> None:
    assert footer_line(usage) is None


def test_cost_prices_uncached_input_cache_and_output_per_million() -> None:
    pricing = Pricing.from_env(
        {"ARCHMAX_PRICE_INPUT": "2", "ARCHMAX_PRICE_OUTPUT": "8", "ARCHMAX_PRICE_CACHE_READ": "0.5"}
    )
    assert pricing is not None
    assert pricing.cache_write == 2  # the cache rates default to the input rate
    cached = SPENT.model_copy(update={"cache_read_tokens": 1000})
    # 200 uncached × 2 + 1000 cached × 0.5 + 300 out × 8 = 3300 per million
    assert pricing.cost(cached) == pytest.approx(0.0033)
    assert footer_line(cached, pricing) == (
        "tokens     in 1200 · out 300 · cache r 1000/w 0 · $0.0033"
    )


def test_without_prices_no_cost_is_guessed() -> None:
    assert Pricing.from_env({}) is None
    assert Pricing.from_env({"ARCHMAX_PRICE_CACHE_READ": "1"}) is None


@pytest.mark.parametrize("raw", ["cheap", "-1"])
def test_a_price_that_is_no_number_names_its_variable(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="ARCHMAX_PRICE_OUTPUT"):
        Pricing.from_env({"ARCHMAX_PRICE_OUTPUT": raw})


def test_a_malformed_price_is_warned_about_and_the_cost_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARCHMAX_PRICE_INPUT", "lots")
    warnings: list[str] = []
    assert configured_pricing(warnings.append) is None
    assert len(warnings) == 1 and "ARCHMAX_PRICE_INPUT" in warnings[0]
