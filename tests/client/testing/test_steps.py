"""A case's step vocabulary (``client/testing/steps.py``): the seed's kinds and this runtime's,
each listed once."""

from __future__ import annotations

from archmax_temporal.client.testing.steps import (
    EXTENSION_STEP_CLASSES,
    EXTENSION_STEP_KINDS,
    STEP_CLASSES,
    STEP_KINDS,
    STEP_MODELS,
)


def test_the_seeds_vocabulary_stays_the_seeds() -> None:
    """The extension keys are listed apart from the seed's, never mixed into them."""
    assert EXTENSION_STEP_KINDS == ("advance", "crash", "redeliver")
    assert not set(EXTENSION_STEP_KINDS) & set(STEP_KINDS)


def test_every_step_class_is_built_by_its_key() -> None:
    """The parser's table holds each class of both lists, by the key it carries."""
    assert list(STEP_MODELS.values()) == [*STEP_CLASSES, *EXTENSION_STEP_CLASSES]
    assert all(STEP_MODELS[cls.key] is cls for cls in STEP_MODELS.values())
