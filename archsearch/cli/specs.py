"""Job specs on the light side: `archsearch spec-schema`, and the local check `submit` makes.

Both need only `archsearch.specs` (pydantic): a plain `pip install archsearch` prints the
schema and refuses a malformed spec before anything is sent, naming the field.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from pydantic import ValidationError

from archsearch.cli.common import console
from archsearch.specs import JOB_TYPES, parse_job_spec
from archsearch.specs import job_spec_adapter as spec_adapter
from archsearch.specs.errors import problem_field, problem_message

SPEC_TYPES = {t.model_fields["method"].default: t for t in JOB_TYPES}


@click.command("spec-schema")
@click.argument("method", required=False)
def spec_schema(method: str | None) -> None:
    """Print the JSON schema of job specs (every field, its default and allowed values)."""
    if method is None:
        click.echo(json.dumps(spec_adapter.json_schema(), indent=2))
        return
    if method not in SPEC_TYPES:
        console.print(
            f"[red]error:[/red] unknown method {method!r}; available: {', '.join(SPEC_TYPES)}",
            soft_wrap=True,
        )
        sys.exit(1)
    click.echo(json.dumps(SPEC_TYPES[method].model_json_schema(), indent=2))


def spec_problems(spec: Any) -> list[str]:
    """What is wrong with a job spec, one `field: message` line each (empty: it is valid)."""
    try:
        parse_job_spec(spec)
    except ValidationError as exc:
        return [_field_line(error) for error in exc.errors()]
    return []


def _field_line(error: Any) -> str:
    return f"{problem_field(error, 'spec')}: {problem_message(error)}"
