"""The token footer a command prints on stderr, and what it costs when prices are configured.

archmax's CLI closes a run (and each case of ``archmax test``) with
``tokens     in N · out N · cache r N/w N · $cost``. The cache part appears when the endpoint
reported cache use; the cost only when prices are set (``ARCHMAX_PRICE_INPUT``, ``_OUTPUT``,
``_CACHE_READ``, ``_CACHE_WRITE``, USD per million tokens; the cache rates default to the input
rate). Without prices the cost is omitted, never guessed; with nothing reported, so is the line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict

from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.models import Usage

PRICE_VARIABLES = {
    "input": "ARCHMAX_PRICE_INPUT",
    "output": "ARCHMAX_PRICE_OUTPUT",
    "cache_read": "ARCHMAX_PRICE_CACHE_READ",
    "cache_write": "ARCHMAX_PRICE_CACHE_WRITE",
}
"""The environment variables of the ``default`` pricing key, by rate."""


class Pricing(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    input: float
    output: float
    cache_read: float
    cache_write: float

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Pricing | None:
        """The configured prices, or None when neither input nor output is priced."""
        source = os.environ if env is None else env
        rates: dict[str, float] = {}
        for rate, name in PRICE_VARIABLES.items():
            raw = source.get(name, "").strip()
            if not raw:
                continue
            try:
                rates[rate] = float(raw)
            except ValueError:
                raise ConfigurationError(
                    f"{name} must be a number (USD per million tokens); got {raw!r}"
                ) from None
            if rates[rate] < 0:
                raise ConfigurationError(f"{name} must not be negative; got {raw!r}")
        if "input" not in rates and "output" not in rates:
            return None
        given_input = rates.get("input", 0.0)
        return cls(
            input=given_input,
            output=rates.get("output", 0.0),
            cache_read=rates.get("cache_read", given_input),
            cache_write=rates.get("cache_write", given_input),
        )

    def cost(self, usage: Usage) -> float:
        """What ``usage`` cost: uncached input, cache reads and writes, output."""
        cached = usage.cache_read_tokens + usage.cache_write_tokens
        uncached = max(0, usage.prompt_tokens - cached)
        return (
            uncached * self.input
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
            + usage.completion_tokens * self.output
        ) / 1_000_000


def configured_pricing(warn: Callable[[str], None]) -> Pricing | None:
    """The environment's prices for a footer; a malformed one is warned about and dropped,
    never failing a command whose work is done."""
    try:
        return Pricing.from_env()
    except ConfigurationError as exc:
        warn(f"⚠ {exc}; the cost is left out")
        return None


def footer_line(usage: Usage | None, pricing: Pricing | None = None) -> str | None:
    """``tokens     in N · out N[ · cache r N/w N][ · $cost]``, or None when nothing was
    reported."""
    if usage is None or not (usage.prompt_tokens or usage.completion_tokens):
        return None
    parts = [f"in {usage.prompt_tokens}", f"out {usage.completion_tokens}"]
    if usage.cache_read_tokens or usage.cache_write_tokens:
        parts.append(f"cache r {usage.cache_read_tokens}/w {usage.cache_write_tokens}")
    if pricing is not None:
        parts.append(f"${pricing.cost(usage):.4f}")
    return "tokens     " + " · ".join(parts)


__all__ = ["PRICE_VARIABLES", "Pricing", "configured_pricing", "footer_line"]
