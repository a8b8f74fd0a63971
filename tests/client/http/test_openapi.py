"""The HTTP API's contract: one status for every error class (a drift test), an OpenAPI
document that names every route, and a property-based run of that document (schemathesis)
against the live server that finds no 5xx and no answer the document does not describe."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.routing import Route
from temporalio.client import Client

from archmax_temporal.client.http import problems
from archmax_temporal.client.http.app import ROUTES
from archmax_temporal.client.http.openapi import openapi_document
from archmax_temporal.workflows import errors
from tests.support.agents import Scripted, copy_example
from tests.support.http_harness import http_api
from tests.support.paths import EXAMPLES

INBOX = "support-inbox"
EXAMPLES_PER_OPERATION = 25
"""Bounded so the whole run stays well under a minute on two shared cores."""


def _error_classes(module: ModuleType) -> set[type[errors.ArchmaxError]]:
    return {
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, errors.ArchmaxError) and cls.__module__ == module.__name__
    }


class TestStatusTable:
    def test_every_error_class_has_exactly_one_status(self) -> None:
        """Adding an error class to workflows/errors.py (or the HTTP layer) without giving it
        a status fails here."""
        every = _error_classes(errors) | _error_classes(problems)
        assert set(problems.STATUS) == every
        assert all(100 <= status <= 599 for status in problems.STATUS.values())

    def test_the_contract_codes(self) -> None:
        expected = {
            "UnknownWorkflowError": 404,
            "UnknownTriggerError": 404,
            "SessionNotFoundError": 404,
            "SessionNotAwaitingInputError": 409,
            "SessionNotResumableError": 409,
            "SessionBusyError": 409,
            "TriggerInputError": 422,
            "InvalidVariableNameError": 422,
            "PayloadTooLargeError": 413,
            "InvalidSessionIdError": 400,
            "AuthenticationRequiredError": 401,
            "SignatureRejectedError": 403,
            "TemporalUnavailableError": 503,
        }
        by_name = {cls.__name__: status for cls, status in problems.STATUS.items()}
        assert {name: by_name[name] for name in expected} == expected


class TestDocument:
    def test_every_route_and_method_is_documented_and_nothing_else(self) -> None:
        document = openapi_document()
        routes = {
            (route.path.replace(":path}", "}"), method.lower())
            for route in ROUTES
            if isinstance(route, Route)
            for method in route.methods or ()
            if method != "HEAD"
        }
        documented = {(path, method) for path, item in document["paths"].items() for method in item}
        assert documented == routes

    def test_every_reference_resolves(self) -> None:
        document = openapi_document()
        schemas = document["components"]["schemas"]
        text = str(document)
        for name in {part.split("'")[0] for part in text.split("#/components/schemas/")[1:]}:
            assert name in schemas, name


class TestPropertyBased:
    async def test_the_live_api_never_answers_5xx_nor_off_the_document(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        root = copy_example(INBOX, tmp_path)
        playbook = EXAMPLES / INBOX / "workflows" / INBOX / "playbook.yaml"
        async with http_api(
            client, task_queue, root, INBOX, scripted(playbook), store=tmp_path / "s"
        ) as api:
            document = (await api.http.get("/openapi.json")).json()
            failures, seen = await asyncio.to_thread(_fuzz, document, api.base)
        assert failures == [], "\n\n".join(failures)
        assert all(seen.values()), seen  # every operation was exercised
        statuses = {status for answered in seen.values() for status in answered}
        assert {200, 400, 404, 422} <= statuses, seen


def _fuzz(document: dict[str, object], base: str) -> tuple[list[str], dict[str, set[int]]]:
    """Every operation, a bounded number of generated requests each, every check; the
    failures and the statuses each operation answered."""
    schema = schemathesis.openapi.from_dict(document)
    failures: list[str] = []
    seen: dict[str, set[int]] = {}
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # an Err raises: the test fails
        name = f"{operation.method.upper()} {operation.path}"
        run = _exercise(operation, base, seen.setdefault(name, set()))
        try:
            run()
        except Exception as exc:  # hypothesis re-raises the shrunk failing example
            failures.append(f"{name}: {exc}")
    return failures, seen


def _exercise(operation: Any, base: str, answered: set[int]) -> Callable[[], None]:
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    ]

    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: schemathesis.Case[Any]) -> None:
        response = case.call(base_url=base, timeout=15)
        answered.add(response.status_code)
        case.validate_response(response, checks=checks)

    return run
