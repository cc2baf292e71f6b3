"""CLI commands and behaviours that need no server running."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

from click.testing import CliRunner

from archsearch.cli.common import local_time, unique_prefixes
from archsearch.cli.main import main
from archsearch.specs import METHOD_NAMES
from tests.conftest import REPO_ROOT
from tests.service.procs import free_port


def test_spec_schema_lists_every_field_of_every_method() -> None:
    runner = CliRunner()
    union = json.loads(runner.invoke(main, ["spec-schema"]).output)
    assert set(union["discriminator"]["mapping"]) == set(METHOD_NAMES)
    train = json.loads(runner.invoke(main, ["spec-schema", "train"]).output)
    assert train["required"] == ["dataset"]
    assert {"model", "training", "resources"} <= set(train["properties"])
    unknown = runner.invoke(main, ["spec-schema", "trian"])
    assert unknown.exit_code == 1 and "available: train" in unknown.output


def test_no_server_is_one_line_saying_what_to_run() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (
        ["list"],
        ["status", "3f2a9c1e"],
        ["wait", "3f2a9c1e-0000-4000-8000-000000000000"],
    ):
        result = CliRunner().invoke(main, [*args, "--url", url])
        assert result.exit_code == 1, result.output
        assert result.output.splitlines() == [
            f"error: no archsearch server at {url}: start one with `archsearch serve`"
        ]


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output == "archsearch 0.1.0\n"


def test_help_lists_the_server_commands_without_loading_the_server() -> None:
    code = (
        "import sys; from click.testing import CliRunner; from archsearch.cli.main import main; "
        "out = CliRunner().invoke(main, ['--help']).output; "
        "assert all(f'  {c} ' in out for c in ('serve', 'worker', 'db', 'admin', 'list')), out; "
        "loaded = [m for m in ('archsearch.server', 'torch', 'sqlalchemy', 'fastapi') "
        "if m in sys.modules]; assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True)
    assert result.returncode == 0, result.stderr.decode()


def test_unique_prefixes_grow_past_a_shared_start() -> None:
    ids = ["3f2a9c1e-aaaa", "3f2a9c1e-bbbb", "70000000-0000"]
    assert unique_prefixes(ids) == {
        "3f2a9c1e-aaaa": "3f2a9c1e-a",
        "3f2a9c1e-bbbb": "3f2a9c1e-b",
        "70000000-0000": "70000000",
    }


def test_times_are_shown_with_their_offset() -> None:
    moment = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)
    shown = local_time(moment)
    parsed = datetime.strptime(shown, "%Y-%m-%d %H:%M:%S %z")
    assert parsed == moment  # the offset is printed: the string names one instant
