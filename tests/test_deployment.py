"""Deployment: ``docker-compose.yml`` is a valid Compose file on today's Temporal images, with
health checks and the search attributes registered, two worker replicas and ``serve`` sharing
no volume, all on one ``s3://`` session store; the Dockerfile runs the worker as a non-root
user with a health check, its dependencies pinned. (No Docker daemon here: the files are
checked, not run.)"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from archmax_temporal.client.cli.parser import build_parser
from archmax_temporal.client.http import ServeSettings
from archmax_temporal.workflows import search_attributes as sa
from tests.support.paths import FIXTURES, REPO

SCHEMA = FIXTURES / "compose" / "compose-spec.json"
ARCHMAX_SERVICES = ("worker", "serve")
"""The services built from the Dockerfile, which read and write the session store."""


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
        replicas = json.loads(json.dumps(compose))
        replicas["services"]["worker"]["deploy"]["replicas"] = [2]
        assert list(_validator().iter_errors(replicas))

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
        for name in ("postgresql", "temporal", "minio", "worker", "serve"):
            assert services[name].get("healthcheck", {}).get("test"), name
        for name in ARCHMAX_SERVICES:
            for job in ("temporal-setup", "minio-setup"):
                condition = services[name]["depends_on"][job]["condition"]
                assert condition == "service_completed_successfully", (name, job)
        assert services["minio-setup"]["depends_on"]["minio"]["condition"] == "service_healthy"
        worker_env = services["worker"]["environment"]
        port = worker_env["ARCHMAX_HEALTH_ADDRESS"].rpartition(":")[2]
        assert f"127.0.0.1:{port}/readyz" in " ".join(services["worker"]["healthcheck"]["test"])
        assert "/healthz" in " ".join(services["serve"]["healthcheck"]["test"])

    def test_ports_published(self, services: dict[str, dict[str, Any]]) -> None:
        """gRPC 7233 and the HTTP API 7243, the UI, serve, MinIO and the worker's metrics, all
        on loopback."""
        published = {
            name: {str(p).rsplit(":", 1)[-1] for p in s.get("ports", [])}
            for name, s in services.items()
        }
        assert {"7233", "7243"} <= published["temporal"]
        assert "8080" in published["temporal-ui"]
        assert "8000" in published["serve"]
        assert "9000" in published["minio"]
        assert services["worker"]["environment"]["ARCHMAX_METRICS_ADDRESS"].endswith(":9464")
        assert "9464" in published["worker"]
        for name, service in services.items():
            for port in service.get("ports", []):
                assert str(port).startswith("127.0.0.1:"), (name, port)

    def test_two_worker_replicas_with_no_fixed_host_port(
        self, services: dict[str, dict[str, Any]]
    ) -> None:
        """The worker runs as two replicas; a replicated service publishes no fixed host port
        (two containers cannot bind one, and ``--scale`` may add more), nor names its
        container."""
        assert services["worker"]["deploy"]["replicas"] == 2
        assert "replicas" not in services["serve"].get("deploy", {})
        for name, service in services.items():
            if int(service.get("deploy", {}).get("replicas", 1)) == 1:
                continue
            assert "container_name" not in service, name
            for port in service.get("ports", []):
                host_ip, host_port, container_port = str(port).split(":")
                assert (host_ip, host_port) == ("127.0.0.1", ""), (name, port)
                assert container_port

    def test_no_volume_holds_sessions(self, services: dict[str, dict[str, Any]]) -> None:
        """Workers and serve mount nothing but the authoring root, read-only: no named volume,
        nothing writable, nothing at the image's folder-store path. Sessions are in the
        object store."""
        folder_store = re.search(r"ARCHMAX_STORE=(\S+)", (REPO / "Dockerfile").read_text())
        assert folder_store is not None
        for name in ARCHMAX_SERVICES:
            env = services[name]["environment"]
            mounts = services[name].get("volumes", [])
            assert len(mounts) == 1, (name, mounts)
            source, target, mode = str(mounts[0]).rsplit(":", 2)
            assert (target, mode) == (env["ARCHMAX_ROOT"], "ro"), (name, mounts)
            assert source.startswith(("./", "${ARCHMAX_AUTHORING")), (name, source)
            assert not target.startswith(folder_store[1]), name

    def test_every_archmax_service_shares_one_s3_store(
        self, services: dict[str, dict[str, Any]]
    ) -> None:
        """Every service that names ARCHMAX_STORE names the same ``s3://bucket/prefix``, with
        the same endpoint, region and credentials; the endpoint is this file's MinIO and the
        bucket is the one its setup job creates."""
        stores = {
            name: s["environment"]["ARCHMAX_STORE"]
            for name, s in services.items()
            if isinstance(s.get("environment"), dict) and "ARCHMAX_STORE" in s["environment"]
        }
        assert set(stores) == set(ARCHMAX_SERVICES)
        assert len(set(stores.values())) == 1
        url = urlsplit(next(iter(stores.values())))
        assert url.scheme == "s3" and url.netloc and url.path.strip("/")
        s3_variables = (
            "AWS_ENDPOINT_URL",
            "AWS_REGION",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
        )
        settings = {
            name: tuple(services[name]["environment"].get(key) for key in s3_variables)
            for name in ARCHMAX_SERVICES
        }
        assert len(set(settings.values())) == 1
        endpoint, region, key_id, secret = settings["worker"]
        assert all((endpoint, region, key_id, secret))
        host = urlsplit(endpoint)
        assert host.scheme == "http" and host.hostname in services
        assert host.hostname == "minio" and host.port == 9000
        assert services["minio-setup"]["environment"]["BUCKET"] == url.netloc
        assert 'mb --ignore-existing "store/$$BUCKET"' in _script(services["minio-setup"])

    def test_workers_and_serve_share_one_live_text_channel(
        self, services: dict[str, dict[str, Any]]
    ) -> None:
        """The workers publish the model's text on the Redis service and serve reads the same
        channel (``ARCHMAX_STREAM_URL`` alike on both); Redis persists nothing, publishes no
        port, has a health check, and both wait for it."""
        urls = {
            name: services[name]["environment"].get("ARCHMAX_STREAM_URL")
            for name in ARCHMAX_SERVICES
        }
        assert len(set(urls.values())) == 1
        url = urlsplit(urls["worker"] or "")
        assert url.scheme == "redis" and url.hostname == "redis" and url.port == 6379
        redis = services["redis"]
        assert redis["image"].startswith("redis:") and "ports" not in redis
        assert redis["command"] == ["redis-server", "--save", "", "--appendonly", "no"]
        assert "ping" in redis["healthcheck"]["test"]
        for name in ARCHMAX_SERVICES:
            assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
            for passed in ("ARCHMAX_NOTIFY_URL", "ARCHMAX_NOTIFY_SECRET", "ARCHMAX_STREAMING"):
                environment = services[name]["environment"]
                assert passed in environment and environment[passed] is None, (name, passed)

    @pytest.mark.parametrize(
        "env",
        [{}, {"MINIO_ROOT_USER": "someone", "MINIO_ROOT_PASSWORD": "a-longer-secret"}],
        ids=["dev-defaults", "from-the-environment"],
    )
    def test_the_s3_key_is_minios_and_comes_from_the_environment(self, env: dict[str, str]) -> None:
        """archmax's S3 key is the bundled MinIO's root credentials: from the host's
        environment when set there, else the labelled development defaults; the same on
        every side (the workers, serve, MinIO and the bucket job)."""
        services = _interpolated({"ARCHMAX_SERVE_TOKENS": "tok", **env})["services"]
        user = services["minio"]["environment"]["MINIO_ROOT_USER"]
        password = services["minio"]["environment"]["MINIO_ROOT_PASSWORD"]
        if env:
            assert (user, password) == (env["MINIO_ROOT_USER"], env["MINIO_ROOT_PASSWORD"])
        assert len(password) >= 8  # MinIO refuses a shorter root password
        for name in ARCHMAX_SERVICES:
            service_env = services[name]["environment"]
            assert service_env["AWS_ACCESS_KEY_ID"] == user, name
            assert service_env["AWS_SECRET_ACCESS_KEY"] == password, name
        setup = services["minio-setup"]["environment"]
        assert (setup["MINIO_ROOT_USER"], setup["MINIO_ROOT_PASSWORD"]) == (user, password)

    def test_secret_defaults_are_only_the_labelled_minio_dev_credentials(self) -> None:
        """In the raw file, a secret-looking value with a default (``${VAR:-…}``) is only
        MinIO's root credentials, under the comment that labels them development values;
        every other one in archmax's services is a ``${VAR…}`` reference or passed through."""
        text = (REPO / "docker-compose.yml").read_text()
        defaults = set(re.findall(r"\$\{(\w+):-[^}]+\}", text))
        secret_like = {d for d in defaults if re.search(r"KEY|SECRET|PASSWORD|TOKEN|USER", d)}
        assert secret_like == {"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"}
        labelled = text.index("LOCAL TRIAL ONLY")
        assert labelled < text.index("${MINIO_ROOT_USER:-") < text.index("x-archmax:")
        raw = yaml.safe_load(text)["services"]
        for name in ARCHMAX_SERVICES:
            for key, value in raw[name]["environment"].items():
                if re.search(r"KEY|SECRET|PASSWORD|TOKEN", key):
                    assert value is None or str(value).startswith("${"), (name, key)

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


@pytest.fixture(scope="module")
def section() -> str:
    """The docs' "Scaling out" page."""
    text = (REPO / "docs" / "production" / "scaling-out.md").read_text(encoding="utf-8")
    assert text.startswith("# Scaling out: N workers on N machines\n")
    return text


class TestDocsScalingOut:
    """The docs' "Scaling out" page names what the compose file sets for a worker."""

    def test_names_every_store_and_temporal_variable_the_workers_get(
        self, section: str, services: dict[str, dict[str, Any]]
    ) -> None:
        env = services["worker"]["environment"]
        wanted = [
            key
            for key in env
            if key.startswith(("AWS_", "TEMPORAL_")) or key in ("ARCHMAX_STORE", "ARCHMAX_ROOT")
        ]
        assert len(wanted) >= 8
        for key in wanted:
            assert f"`{key}`" in section or f"{key}=" in section, key
        assert env["ARCHMAX_STORE"] in section

    def test_explains_the_store_identity_check(self, section: str) -> None:
        for word in ("`_store.json`", "`StoreMismatchError`", "docker compose up", "http://"):
            assert word in section, word


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

    def test_the_image_has_the_live_text_channel(self, dockerfile: list[str]) -> None:
        """The image installs the ``stream`` extra (the Redis client ``ARCHMAX_STREAM_URL``
        needs), pinned like every other dependency."""
        (install,) = [line for line in dockerfile if "pip install" in line]
        assert '".[stream]"' in install
        extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
        (redis,) = extra["optional-dependencies"]["stream"]
        pinned = (REPO / "constraints.txt").read_text().splitlines()
        assert any(line.startswith(redis.split(">")[0] + "==") for line in pinned)

    def test_the_image_command_is_the_worker(self, dockerfile: list[str]) -> None:
        """CMD runs ``archmax worker``."""
        command = next(line for line in dockerfile if line.startswith("CMD "))
        assert json.loads(command.removeprefix("CMD ")) == ["archmax", "worker"]
