"""The OpenAPI document as standard client generators read it.

Pydantic writes a nested model field's default (`"training": {"$ref": ..., "default":
{...}}`) into the schema. JSON Schema allows it, but generators such as
openapi-python-client refuse a model-typed property with a default, and then drop every
job schema and the submit operation with them. Those defaults are the server's business (it
fills every field a spec leaves out, and `archsearch spec-schema` shows them), so the
document states them in the field's description instead.

OpenAPI also requires a discriminator's property in every schema it maps to; pydantic leaves
`method` optional (it has its one value as default), so a generated client would not send it
and the server could not tell a train job from a prune job. The document marks it required.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI


def serve_portable_openapi(app: FastAPI) -> None:
    """Make `app.openapi()` (and so `/openapi.json`) the generator-friendly document."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            schemas = document.get("components", {}).get("schemas", {})
            for schema in schemas.values():
                describe_object_defaults(schema)
            require_discriminators(document, schemas)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def describe_object_defaults(schema: dict[str, Any]) -> None:
    for prop in schema.get("properties", {}).values():
        default = prop.get("default")
        if isinstance(default, dict):
            del prop["default"]
            note = f"Default: {json.dumps(default, separators=(', ', ': '))}"
            prop["description"] = f"{prop['description']} {note}" if "description" in prop else note


def require_discriminators(node: Any, schemas: dict[str, Any]) -> None:
    """Every schema a discriminator maps to lists the discriminator's property as required."""
    if isinstance(node, list):
        for item in node:
            require_discriminators(item, schemas)
    if not isinstance(node, dict):
        return
    if isinstance(discriminator := node.get("discriminator"), dict):
        name = discriminator["propertyName"]
        for ref in discriminator.get("mapping", {}).values():
            target = schemas[ref.rsplit("/", 1)[-1]]
            if name not in target.setdefault("required", []):
                target["required"].insert(0, name)
    for value in node.values():
        require_discriminators(value, schemas)
