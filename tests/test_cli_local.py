"""CLI commands that need no server."""

from __future__ import annotations

import json

from click.testing import CliRunner

from archsearch.cli.main import main
from archsearch.core.spec import METHOD_NAMES


def test_spec_schema_lists_every_field_of_every_method() -> None:
    runner = CliRunner()
    union = json.loads(runner.invoke(main, ["spec-schema"]).output)
    assert set(union["discriminator"]["mapping"]) == set(METHOD_NAMES)
    train = json.loads(runner.invoke(main, ["spec-schema", "train"]).output)
    assert train["required"] == ["dataset"]
    assert {"model", "training", "resources"} <= set(train["properties"])
    unknown = runner.invoke(main, ["spec-schema", "trian"])
    assert unknown.exit_code == 1 and "available: train" in unknown.output
