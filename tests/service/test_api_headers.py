"""What every answer carries and what a deployment must set right: `nosniff` on JSON, an
`Allow` on 405, forwarded headers trusted only from `FORWARDED_ALLOW_IPS`, and a session
secret too short to be safe refused at start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from archsearch.api.web.session import COOKIE
from tests.service import procs

pytestmark = pytest.mark.service


def test_json_answers_carry_nosniff(api_url: str, auth_headers: dict[str, str]) -> None:
    for response in (
        httpx.get(f"{api_url}/v1/jobs", headers=auth_headers),  # 200
        httpx.get(f"{api_url}/v1/jobs"),  # 401
        httpx.get(f"{api_url}/v1/jobs/not-a-uuid", headers=auth_headers),  # 422
        httpx.get(f"{api_url}/readyz"),
    ):
        assert response.headers["content-type"] == "application/json", response.url
        assert response.headers["x-content-type-options"] == "nosniff", response.url


def test_a_405_names_the_allowed_methods(api_url: str, auth_headers: dict[str, str]) -> None:
    response = httpx.put(f"{api_url}/healthz", headers=auth_headers)
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"
    assert response.headers["allow"] == "GET"


def _sign_in_over_forwarded_https(url: str, token: str) -> httpx.Response:
    headers = {"X-Forwarded-Proto": "https", "Origin": url.replace("http://", "https://")}
    return httpx.post(f"{url}/signin", data={"token": token}, headers=headers)


def test_forwarded_proto_is_trusted_only_from_forwarded_allow_ips(
    api_url: str, service_env: dict[str, str], log_dir: Path, token: str
) -> None:
    """Behind a TLS proxy the cookie keeps `Secure` when the proxy's address is trusted
    (loopback by default); a proxy not named in ARCHSEARCH_FORWARDED_ALLOW_IPS is not."""
    trusted = _sign_in_over_forwarded_https(api_url, token)
    assert trusted.status_code == 303
    assert "secure" in trusted.headers["set-cookie"].lower()

    port = procs.free_port()
    env = {**service_env, "ARCHSEARCH_FORWARDED_ALLOW_IPS": "10.9.8.7"}
    other = procs.start("api-untrusted", ["api", "--port", str(port)], env, log_dir)
    try:
        url = f"http://127.0.0.1:{port}"
        procs.wait_http(f"{url}/healthz", other)
        untrusted = _sign_in_over_forwarded_https(url, token)
        # The forwarded scheme is ignored: the Origin (https) is then another site's.
        assert untrusted.status_code == 401
        assert COOKIE not in untrusted.headers.get("set-cookie", "")
    finally:
        other.stop()


def test_a_short_session_secret_is_refused_at_start(
    service_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**service_env, "ARCHSEARCH_SESSION_SECRET": "x" * 31, "ARCHSEARCH_HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "archsearch.cli.main", "api", "--port", str(procs.free_port())],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    output = result.stdout + result.stderr
    assert "ARCHSEARCH_SESSION_SECRET" in output and "at least 32" in output, output
