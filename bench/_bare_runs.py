"""The runs table's baseline, served by uvicorn: one hand-written SQL query (the filter and
the sort on the JSON columns, 50 rows) behind a bare route, and a bare page that fetches it
and draws the rows, with no auth, no cursor, no owner names and no validation: the floor the
dashboard's first rows are measured against. Arguments: port, database URL."""

from __future__ import annotations

import sys
from typing import Any

import psycopg
import uvicorn
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from psycopg.rows import dict_row

app = FastAPI()
DATABASE_URL = sys.argv[2] if len(sys.argv) > 2 else ""
SQL = """
SELECT id, method, status, latest_metrics, spec, created_at FROM jobs
WHERE (latest_metrics->>'test_accuracy')::float > %(floor)s
ORDER BY (spec#>>'{training,optimizer,lr}')::float DESC NULLS LAST, id DESC LIMIT 50
"""
PAGE = """<!doctype html><title>bare runs</title><table id="jobs"><tbody></tbody></table>
<script>
fetch("/bare/rows" + location.search).then((r) => r.json()).then((rows) => {
  const body = document.querySelector("#jobs tbody");
  for (const job of rows) {
    const tr = document.createElement("tr");
    for (const v of [job.id, job.method, job.status, job.latest_metrics.test_accuracy,
      job.spec.training.optimizer.lr, job.created_at]) {
      const td = document.createElement("td"); td.textContent = v; tr.append(td);
    }
    body.append(tr);
  }
});
</script>"""


@app.get("/bare", response_class=HTMLResponse)
async def page() -> str:
    return PAGE


CONNECTION: list[psycopg.Connection[Any]] = []  # one, opened on the first request


@app.get("/bare/rows")
def rows(floor: float = 0.5) -> list[dict[str, Any]]:
    if not CONNECTION:
        CONNECTION.append(psycopg.connect(DATABASE_URL, row_factory=dict_row, autocommit=True))
    return CONNECTION[0].execute(SQL, {"floor": floor}).fetchall()


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
