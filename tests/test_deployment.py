"""Deployment: ``docker-compose.yml`` is a valid Compose file on today's Temporal images, with
health checks and the search attributes registered; the Dockerfile runs the worker as a
non-root user with a health check, its dependencies pinned. (No Docker daemon here: the files
are checked, not run.)"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from archmax_temporal.client.cli.parser import build_parser
from archmax_temporal.client.http import ServeSettings
from archmax_temporal.workflows import search_attributes as sa

REPO = Path(__file__).resolve().parents[1]
SCHEMA = Path(__file__).parent / "fixtures" / "compose" / "compose-spec.json"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return document


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def _script(service: dict[str, Any]) -> str:
    command = service.get("command")
    return "\n".join(command) if isinstance(command, list) else str(command)


def _validator() -> jsonschema.Draft7Validator:
    """A validator of the draft the vendored schema declares, draft-07 (its ``$schema`` is
    spelt ``https://…/draft-07/schema``, which jsonschema does not look up by itself)."""
    schema = json.loads(SCHEMA.read_text())
    assert re.fullmatch(r"https?://json-schema\.org/draft-07/schema#?", schema["$schema"])
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


class TestComposeFile:
    def test_validates_against_the_compose_schema(self, compose: dict[str, Any]) -> None:
        """The whole file (anchors resolved) is a valid Compose document."""
        validator = _validator()
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(compose)]
        assert errors == []

    def test_the_schema_catches_a_mistake(self, compose: dict[str, Any]) -> None:
        """The validation is real: a misspelt service key is refused."""
        broken = json.loads(json.dumps(compose))
        broken["services"]["worker"]["healthckeck"] = {}
        assert list(_validator().iter_errors(broken))

    def test_todays_temporal_images_and_no_auto_setup(
        self, services: dict[str, dict[str, Any]]
    ) -> None:
        """temporalio/server with admin-tools jobs and the current UI; auto-setup is gone."""
        images = {name: str(s.get("image", "")) for name, s in services.items()}
        assert not any("auto-setup" in image for image in images.values())
        assert images["temporal"].startswith("temporalio/server:")
        assert images["temporal-schema"].startswith("temporalio/admin-tools:")
        assert images["temporal-setup"].startswith("temporalio/admin-tools:")
        assert images["postgresql"].startswith("postgres:")
        ui = re.search(
            r"temporalio/ui:\$\{TEMPORAL_UI_VERSION:-(\d+)\.(\d+)\.\d+\}", images["temporal-ui"]
        )
        assert ui is not None and (int(ui[1]), int(ui[2])) >= (2, 54)  # the dev server's UI

    def test_the_schema_job_runs_before_the_server(
        self, services: dict[str, dict[str, Any]]
    ) -> None:
        """The server starts once the one-shot schema job finished; the job migrates both
        databases with temporal-sql-tool."""
        assert services["temporal"]["depends_on"]["temporal-schema"]["condition"] == (
            "service_completed_successfully"
        )
        script = _script(services["temporal-schema"])
        assert "temporal-sql-tool" in script and "update-schema" in script
        assert "temporal_visibility" in script

    def test_every_search_attribute_is_registered_with_its_type(
        self, services: dict[str, dict[str, Any]]
    ) -> None:
        """The setup job registers exactly the attributes workflows/search_attributes.py
        defines, each with its type (a new attribute there fails this test)."""
        kinds = {"KEYWORD": "Keyword", "DATETIME": "Datetime"}
        wanted = {
            f"{key.name}={kinds[key.indexed_value_type.name.removeprefix('INDEXED_VALUE_TYPE_')]}"
            for key in sa.ALL
        }
        script = _script(services["temporal-setup"])
        registered = set(re.findall(r"\bArchmax\w+=\w+", script))
        assert registered == wanted
        assert "namespace create" in script

    def test_health_checks_and_start_order(self, services: dict[str, dict[str, Any]]) -> None:
        """Database, server, worker and serve have health checks; worker and serve wait for
        the setup job; the worker's check asks /readyz."""
        for name in ("postgresql", "temporal", "worker", "serve"):
            assert services[name].get("healthcheck", {}).get("test"), name
        for name in ("worker", "serve"):
            condition = services[name]["depends_on"]["temporal-setup"]["condition"]
            assert condition == "service_completed_successfully"
        worker_env = services["worker"]["environment"]
        port = worker_env["ARCHMAX_HEALTH_ADDRESS"].rpartition(":")[2]
        assert f"127.0.0.1:{port}/readyz" in " ".join(services["worker"]["healthcheck"]["test"])
        assert "/healthz" in " ".join(services["serve"]["healthcheck"]["test"])

    def test_ports_published(self, services: dict[str, dict[str, Any]]) -> None:
        """gRPC 7233 and the HTTP API 7243, the UI, serve and the worker's metrics."""
        published = {
            name: {str(p).rsplit(":", 1)[-1] for p in s.get("ports", [])}
            for name, s in services.items()
        }
        assert {"7233", "7243"} <= published["temporal"]
        assert "8080" in published["temporal-ui"]
        assert "8000" in published["serve"]
        assert services["worker"]["environment"]["ARCHMAX_METRICS_ADDRESS"].endswith(":9464")
        assert "9464" in published["worker"]

    def test_archmax_commands_parse(self, services: dict[str, dict[str, Any]]) -> None:
        """The worker's and serve's command lines are ones the CLI accepts."""
        parser = build_parser()
        for name, command in (("worker", "worker"), ("serve", "serve")):
            argv = services[name]["command"]
            assert argv[0] == "archmax"
            assert parser.parse_args(argv[1:]).command == command

    def test_serve_starts_with_the_token_from_the_environment(self) -> None:
        """serve binds 0.0.0.0, so the stack passes ARCHMAX_SERVE_TOKENS through from the
        host: with it set, serve's settings (its compose environment, its command's host and
        port) pass the exposure check it runs at start."""
        services = _interpolated({"ARCHMAX_SERVE_TOKENS": "tok-a,tok-b"})["services"]
        serve = services["serve"]
        args = build_parser().parse_args(serve["command"][1:])
        settings = ServeSettings.from_env(serve["environment"], host=args.host, port=args.port)
        assert settings.host == "0.0.0.0" and settings.tokens == {"tok-a", "tok-b"}
        settings.check_exposure()  # raises ConfigurationError when serve would crash-loop

    @pytest.mark.parametrize("token", [None, ""])
    def test_without_a_token_compose_stops_with_a_message(self, token: str | None) -> None:
        """Unset or empty, the token stops ``docker compose up`` before anything starts,
        naming the variable (Compose's ``${VAR:?message}``)."""
        env = {} if token is None else {"ARCHMAX_SERVE_TOKENS": token}
        with pytest.raises(ValueError, match="ARCHMAX_SERVE_TOKENS"):
            _interpolated(env)


_VARIABLE = re.compile(r"\$(?:(\$)|\{(\w+)(?:(:?[-?])([^}]*))?\})")


def _interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's interpolation of one string: ``$$``, ``${V}``, ``${V:-d}``/``${V-d}``,
    ``${V:?err}``/``${V?err}``."""

    def one(match: re.Match[str]) -> str:
        if match[1]:
            return "$"
        name, operator, argument = match[2], match[3], match[4]
        value = env.get(name)
        unset = value is None or (operator is not None and operator.startswith(":") and not value)
        if operator is not None and operator.endswith("?") and unset:
            raise ValueError(f"required variable {name} is missing a value: {argument}")
        if operator is not None and operator.endswith("-") and unset:
            return argument
        return value or ""

    return _VARIABLE.sub(one, text)


def _interpolated(env: dict[str, str]) -> dict[str, Any]:
    """The compose document as ``docker compose config`` resolves it against ``env``: every
    string interpolated, a bare ``NAME:`` environment entry taken from ``env`` (or dropped)."""

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            return _interpolate(node, env)
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, dict):
            return {key: walk(value) for key, value in node.items()}
        return node

    document: dict[str, Any] = walk(yaml.safe_load((REPO / "docker-compose.yml").read_text()))
    for service in document["services"].values():
        environment = service.get("environment")
        if isinstance(environment, dict):
            service["environment"] = {
                name: str(value) if value is not None else env[name]
                for name, value in environment.items()
                if value is not None or name in env
            }
    return document


@pytest.fixture(scope="module")
def dockerfile() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


class TestDockerfile:
    def test_runs_as_a_non_root_user(self, dockerfile: list[str]) -> None:
        """The last USER is neither root nor uid 0."""
        users = [line.split()[1] for line in dockerfile if line.startswith("USER ")]
        assert users and users[-1] not in ("root", "0", "0:0")

    def test_has_a_health_check_on_the_worker(self, dockerfile: list[str]) -> None:
        """HEALTHCHECK asks the worker's /readyz on the health address the image sets."""
        checks = [line for line in dockerfile if line.startswith("HEALTHCHECK ")]
        assert len(checks) == 1 and "/readyz" in checks[0]
        env = " ".join(line for line in dockerfile if line.startswith("ENV "))
        address = re.search(r"ARCHMAX_HEALTH_ADDRESS=(\S+)", env)
        assert address is not None and address[1].rpartition(":")[2] in checks[0]

    def test_installs_with_the_constraints_file(self, dockerfile: list[str]) -> None:
        """pip installs the package under constraints.txt."""
        installs = [line for line in dockerfile if "pip install" in line]
        assert installs and all("constraints.txt" in line for line in installs)
        assert any(line.startswith("COPY") and "constraints.txt" in line for line in dockerfile)

    def test_the_constraints_pin_every_runtime_dependency(self) -> None:
        """Every dependency pyproject.toml names is pinned (name==version) in constraints.txt."""
        pins: dict[str, str] = {}
        for line in (REPO / "constraints.txt").read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                name, sep, version = line.partition("==")
                assert sep and version, line
                pins[re.sub(r"[-_.]+", "-", name).lower()] = version
        project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
        for requirement in project["dependencies"]:
            name = re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0]
            assert re.sub(r"[-_.]+", "-", name).lower() in pins, name
        assert len(pins) > len(project["dependencies"])  # the transitive ones too

    def test_the_image_command_is_the_worker(self, dockerfile: list[str]) -> None:
        """CMD runs ``archmax worker``."""
        command = next(line for line in dockerfile if line.startswith("CMD "))
        assert json.loads(command.removeprefix("CMD ")) == ["archmax", "worker"]
