"""Upload benchmark: the API's peak memory and the latency of other requests
while datasets at the limits are uploaded.

Starts, on this machine, a fresh PostgreSQL database and one `archsearch api` process whose
in-memory budget for an upload's decoded arrays is ARCHSEARCH_UPLOAD_MAX_MEMORY_BYTES
(--budget-mib, 256 by default). Submits one job (it stays queued: no worker), then samples
`GET /v1/jobs/{id}` back to back, first idle, then during each upload:

- a zip of PNGs of a few kilobytes that decodes to most of the budget (the issue's bomb),
- a 32 MiB .csv (the issue's), parsed row by row,
- a 200 MiB .npz (the issue's "200 MiB upload").

For each it prints the upload's answer, the growth of the API's peak resident memory
(VmHWM) over its size before the upload next to 2x the budget, and the GET latencies during
the upload next to the idle ones. Files go to a temporary folder; the database is dropped.

    python bench/upload.py [--budget-mib 256] [--npz-mib 200] [--idle-seconds 5]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from tests.service import procs  # noqa: E402
from tests.service.upload_probe import (  # noqa: E402
    MIB,
    QUICK_JOB,
    PeakMemory,
    Sampler,
    csv_file,
    image_zip,
    npz_file,
    upload,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget-mib", type=int, default=256)
    parser.add_argument("--npz-mib", type=int, default=200)
    parser.add_argument("--csv-rows", type=int, default=400_000)  # about 32 MiB
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    args = parser.parse_args()

    name = f"archsearch_bench_{uuid.uuid4().hex[:8]}"
    pg_url = procs.create_database(name)
    tmp = Path(tempfile.mkdtemp(prefix="archsearch-bench-upload-"))
    api = None
    try:
        upgrade(pg_url)
        token = procs.user_with_token(pg_url)
        env = {
            "ARCHSEARCH_DATABASE_URL": pg_url,
            "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
            "ARCHSEARCH_QUEUE_NAME": f"bench-{name}",
            "ARCHSEARCH_HOME": str(tmp),
            "ARCHSEARCH_UPLOAD_MAX_MEMORY_BYTES": str(args.budget_mib * MIB),
        }
        port = procs.free_port()
        api = procs.start("api", ["api", "--port", str(port)], env, tmp)
        url = f"http://127.0.0.1:{port}"
        procs.wait_http(f"{url}/healthz", api)
        headers = {"Authorization": f"Bearer {token}"}
        job = httpx.post(f"{url}/v1/jobs", json=QUICK_JOB, headers=headers, timeout=30).json()
        job_url = f"{url}/v1/jobs/{job['id']}"

        files = [
            ("zip of PNGs", image_zip(tmp / "bomb.zip", 200, 256)),
            ("csv", csv_file(tmp / "table.csv", args.csv_rows)),
            ("npz", npz_file(tmp / "arrays.npz", args.npz_mib)),
        ]
        with Sampler(job_url, headers) as idle:
            time.sleep(args.idle_seconds)
        budget = args.budget_mib * MIB
        print(
            f"in-memory budget of one upload: {args.budget_mib} MiB; limit: 2x = "
            f"{2 * args.budget_mib} MiB of API memory growth"
        )
        print(f"GET /v1/jobs/{{id}} idle:          {idle.summary()}")
        peak = PeakMemory(api.popen.pid)
        for label, path in files:
            peak.reset()
            started = time.perf_counter()
            with Sampler(job_url, headers) as during:
                answer = upload(url, headers, path)
            seconds = time.perf_counter() - started
            growth = peak.growth()
            print(
                f"{label:12s} {path.stat().st_size / MIB:7.2f} MiB -> {answer.status_code} in "
                f"{seconds:5.1f} s; API peak growth {growth / MIB:6.0f} MiB "
                f"= {growth / budget:.2f}x budget (limit 2.00x)"
            )
            print(f"  GET /v1/jobs/{{id}} during upload: {during.summary()}")
            print(f"  GET /v1/jobs/{{id}} idle:          {idle.summary()}")
            if answer.status_code >= 300:
                print(f"  answer: {answer.text[:300]}")
    finally:
        if api is not None:
            api.stop()
        procs.drop_database(name)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
