"""A case document's model (``client/testing/case_model.py``): the seed's keys and this runtime's,
and what a document says of itself."""

from __future__ import annotations

from archmax_temporal.client.testing.case_model import (
    EXTENSION_TOP_LEVEL_KEYS,
    TOP_LEVEL_KEYS,
)
from tests.support.case_docs import parse, steps_doc


class TestRegistry:
    def test_the_seeds_keys_stay_the_seeds(self) -> None:
        """This runtime's case fields are listed apart from the seed's, after them."""
        assert EXTENSION_TOP_LEVEL_KEYS == ("repeat", "passRate")
        assert TOP_LEVEL_KEYS[-2:] == EXTENSION_TOP_LEVEL_KEYS

    def test_a_case_without_them_parses_as_before(self) -> None:
        document = parse(steps_doc("- send: hi\n- succeeded: true\n"))
        assert (document.repeat, document.pass_rate) == (1, 1.0)
        assert not document.advances and not document.crashes
        assert document.recorded == document.assertions
