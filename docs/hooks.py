"""MkDocs hooks (mkdocs.yml ``hooks:``): the HTTP API's OpenAPI document, rendered at build time.

``docs/http/openapi.json`` is the document ``GET /openapi.json`` serves, exported from
``archmax_temporal.client.http.openapi.openapi_document()`` (``tests/docs/test_docs_site.py`` fails
when it differs; regenerate it with ``python docs/hooks.py``). ``docs/http/openapi.md`` holds
the marker ``<!-- openapi:render -->``, which this hook replaces with the document's routes and
schemas; the JSON file is published beside the page. Reading the export rather than importing
the HTTP stack keeps the build from loading the runtime.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # render() needs no MkDocs: tests/docs/test_docs_site.py runs it without one
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

MARKER = "<!-- openapi:render -->"
EXPORT = Path(__file__).resolve().parent / "http" / "openapi.json"


def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXPORT.read_text(encoding="utf-8"))
    return document


def export() -> str:
    """The document as the export holds it: the code's, as JSON."""
    from archmax_temporal.client.http.openapi import openapi_document

    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"


def _cell(text: object) -> str:
    """One table cell: pipes escaped, newlines folded."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _type(schema: dict[str, Any]) -> str:
    """A schema in a few words: its ``$ref`` as a link, its type, its items' type."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[`{name}`](#schema-{name.lower()})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    return f"`{kind}`"


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    out = [f"### `{method.upper()} {path}`", ""]
    out += [op.get("summary", ""), ""]
    if op.get("description"):
        out += [op["description"], ""]
    security = sorted({name for rule in op.get("security", []) for name in rule})
    out += [f"Authentication: {', '.join(security) if security else 'none'}.", ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | required | type | meaning |", "| --- | --- | --- | --- | --- |"]
        for p in params:
            out.append(
                f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} "
                f"| {_type(p.get('schema', {}))} | {_cell(p.get('description', ''))} |"
            )
        out.append("")
    body = op.get("requestBody")
    if body:
        kinds = ", ".join(
            f"`{media}`: {_type(spec.get('schema', {}))}" for media, spec in body["content"].items()
        )
        out += [f"Request body: {kinds}", ""]
    out += ["| status | answer | body |", "| --- | --- | --- |"]
    for status, answer in op.get("responses", {}).items():
        content = answer.get("content", {})
        bodies = ", ".join(
            f"`{media}` {_type(spec.get('schema', {}))}" for media, spec in content.items()
        )
        out.append(f"| {status} | {_cell(answer.get('description', ''))} | {bodies} |")
    return [*out, ""]


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### `{name}` {{#schema-{name.lower()}}}", ""]
    if schema.get("description"):
        out += [_cell(schema["description"]), ""]
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    if props:
        out += ["| field | type | required | meaning |", "| --- | --- | --- | --- |"]
        for field, spec in props.items():
            out.append(
                f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} "
                f"| {_cell(spec.get('description', ''))} |"
            )
    else:
        out.append(f"Type: {_type(schema)}.")
    return [*out, ""]


def render(document: dict[str, Any]) -> str:
    """The markdown of the whole document: routes in the document's order, then schemas."""
    info = document["info"]
    out = [
        f"OpenAPI {document['openapi']}, API version {info['version']}: {info['description']}",
        "",
        "## Routes",
        "",
    ]
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            out += _operation(method, path, op)
    out += ["## Schemas", ""]
    for name, schema in document["components"]["schemas"].items():
        out += _schema(name, schema)
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(_document()))


SPHINX_ROLE = re.compile(r":(?:func|class|mod|data|meth|attr|exc|obj):<code>~?\.?")
"""A Sphinx cross-reference role in a docstring (``:func:`x```), as Markdown renders it."""


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """The docstrings' Sphinx roles shown as the plain code they name."""
    return SPHINX_ROLE.sub("<code>", html)


if __name__ == "__main__":
    EXPORT.write_text(export(), encoding="utf-8")
