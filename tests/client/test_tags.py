"""Tags from the light side: `ArchsearchClient.submit(tags=...)`,
`list_jobs(tag=...)` and `archsearch submit --tag` / `list --tag`, against a real
`archsearch serve` process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from archsearch.cli.main import main
from archsearch.client import ArchsearchClient
from archsearch.client.errors import ApiError
from tests.embedded import start_embedded
from tests.service import procs

# Far too long to finish while the test runs: the jobs only need to exist.
SPEC = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 500}}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("tags-home")
    port = procs.free_port()
    server = start_embedded(home, port, home)
    yield f"http://127.0.0.1:{port}"
    server.stop()


def test_tags_given_at_submit_filter_the_listing(url: str) -> None:
    with ArchsearchClient(url) as client:
        both = client.submit(SPEC, tags=["sweep-1", "w16"])
        one = client.submit(SPEC, priority="low", tags=["sweep-1"])
        untagged = client.submit(SPEC)
        assert both.tags == ["sweep-1", "w16"] and one.tags == ["sweep-1"]
        assert untagged.tags == []
        sweep = [job.id for job in client.list_jobs(tag=["sweep-1"]).data]
        assert sweep == [one.id, both.id]  # newest first, the untagged job left out
        assert [job.id for job in client.list_jobs(tag=["sweep-1", "w16"]).data] == [both.id]
        assert client.list_jobs(tag=["nobody-uses-this"]).data == []
        for job in (both, one, untagged):
            client.cancel(job.id)


def test_a_bad_tag_is_refused_naming_the_field(url: str) -> None:
    with ArchsearchClient(url) as client, pytest.raises(ApiError) as caught:
        client.submit(SPEC, tags=["has space"])
    assert caught.value.status == 422
    (error,) = caught.value.detail  # the field, and the pattern a tag must match
    assert error.field == "query.tag.0" and "A-Za-z0-9" in error.message, error  # type: ignore[union-attr]


def test_the_cli_submits_and_lists_by_tag(url: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    runner = CliRunner()
    submitted = runner.invoke(
        main, ["submit", str(spec), "--tag", "cli-run", "--tag", "v2", "--url", url]
    )
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.output.strip()
    listed = runner.invoke(main, ["list", "--tag", "cli-run", "--tag", "v2", "-q", "--url", url])
    assert listed.exit_code == 0 and listed.output.split() == [job_id], listed.output
    with ArchsearchClient(url) as client:
        assert client.get_job(job_id).tags == ["cli-run", "v2"]
        client.cancel(job_id)
