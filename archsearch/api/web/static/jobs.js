// Jobs page, a runs table: sortable columns (server-side, the sort and filters in the URL),
// columns of any metric or spec field (`col` in the URL), a metric filter (`where`), the
// same table as CSV, cursor paging, live rows from /v1/jobs/stream.
"use strict";
(() => {
  const { api, el, showError, badge, when, datasetOf, shortId, follow, every, num } = AS;
  const table = document.getElementById("jobs");
  const DEFAULT_SORT = "-created_at";
  const form = document.getElementById("filters");
  const body = document.querySelector("#jobs tbody");
  const errorBox = document.getElementById("list-error");
  const cursors = [null]; // the cursor of each page seen, for "first page"
  let page = 0;
  let nextCursor = null;
  const rows = new Map(); // job id -> row
  let columns = new URLSearchParams(location.search).getAll("col"); // chosen extra columns
  const columnNames = new Set(); // metric and spec keys seen, offered when adding a column

  // The listing's query: the form's filters, each comma-separated `where` condition apart.
  function filters() {
    const params = new URLSearchParams();
    for (const [k, v] of new FormData(form)) {
      if (k === "where") {
        for (const part of v.split(",")) if (part.trim()) params.append("where", part.trim());
        continue;
      }
      const value = k === "id_prefix" ? v.trim().replaceAll("-", "") : v.trim();
      if (value) params.set(k, value);
    }
    return params;
  }

  // What the page shows: the listing's query and its columns (the URL, and the CSV's query).
  function shown() {
    const params = filters();
    for (const key of columns) params.append("col", key);
    return params;
  }

  function setForm(params) {
    for (const input of form.elements) {
      if (!input.name) continue;
      if (input.type === "checkbox") input.checked = params.get(input.name) === input.value;
      else if (input.name === "where") input.value = params.getAll("where").join(", ");
      else input.value = params.get(input.name) || "";
    }
  }

  // A metric or spec field of a job: `metrics.test_accuracy`, `spec.training.optimizer.lr`.
  function valueAt(job, key) {
    const [source, ...path] = key.split(".");
    if (source === "metrics") return job.latest_metrics[path.join(".")];
    let node = job.spec;
    for (const part of path) node = node && typeof node === "object" ? node[part] : undefined;
    return node;
  }

  function shownValue(value) {
    if (typeof value === "number") return num(value);
    if (value === undefined || value === null) return "–";
    return typeof value === "object" ? JSON.stringify(value) : String(value);
  }

  // Column candidates: every metric, and every spec field holding a plain value.
  function learnColumns(job) {
    for (const name of Object.keys(job.latest_metrics)) columnNames.add(`metrics.${name}`);
    const walk = (node, path) => {
      for (const [k, v] of Object.entries(node || {})) {
        if (v && typeof v === "object" && !Array.isArray(v)) walk(v, `${path}.${k}`);
        else if (!Array.isArray(v)) columnNames.add(`${path}.${k}`);
      }
    };
    walk(job.spec, "spec");
  }

  function showColumnNames() {
    const list = document.getElementById("column-names");
    list.replaceChildren(...[...columnNames].sort().filter((k) => !columns.includes(k)).map((k) => el("option", { value: k })));
  }

  // A chosen column's header: the metric's name, or the spec path's last two fields (the
  // whole key in its title), so that a few columns fit beside the table's own.
  function columnHeader(key) {
    const [source, ...path] = key.split(".");
    const label = source === "metrics" ? path.join(".") : path.slice(-2).join(".");
    const th = el("th", { scope: "col", class: "num", "data-sort": key, "data-extra": key, title: key },
      el("button", { type: "button", class: "sort", text: label, onclick: () => sortBy(key) }),
      el("button", { type: "button", class: "remove-col", title: `remove column ${key}`,
        "aria-label": `remove column ${key}`, text: "×", onclick: () => removeColumn(key) }));
    return th;
  }

  function showColumnHeaders() {
    const head = table.querySelector("thead tr");
    for (const th of head.querySelectorAll("th[data-extra]")) th.remove();
    head.append(...columns.map(columnHeader));
  }

  function removeColumn(key) {
    columns = columns.filter((k) => k !== key);
    if (currentSort().replace(/^-/, "") === key) form.elements.sort.value = "";
    form.requestSubmit();
  }

  function currentSort() {
    return form.elements.sort.value || DEFAULT_SORT;
  }

  // A header click sorts by its column, best first (descending); a second click flips it.
  function sortBy(key) {
    const now = currentSort();
    form.elements.sort.value = now === `-${key}` ? key : `-${key}`;
    form.requestSubmit();
  }

  function markSorted() {
    const sort = currentSort();
    for (const th of table.querySelectorAll("th[data-sort]")) {
      const key = th.dataset.sort;
      const state = sort === key ? "ascending" : sort === `-${key}` ? "descending" : "none";
      th.setAttribute("aria-sort", state);
    }
  }

  // Seconds from start to end (or to now while running), as 42s, 3m05s, 1h02m.
  function duration(job) {
    if (!job.started_at) return "–";
    const end = job.finished_at ? new Date(job.finished_at) : new Date();
    const s = Math.max(0, Math.round((end - new Date(job.started_at)) / 1000));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
    return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  }

  function compact(n) {
    if (n === undefined || n === null) return "–";
    for (const [scale, suffix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (Math.abs(n) >= scale) return `${Number((n / scale).toPrecision(3))}${suffix}`;
    }
    return String(Math.round(n));
  }

  function warningMark(job) {
    if (!job.warnings || !job.warnings.length) return null;
    const text = job.warnings.map((w) => w.message).join("\n");
    return el("span", { class: "warning-mark", title: text, "aria-label": `warnings: ${text}`, text: " ⚠" });
  }

  function studyCell(job) {
    if (!job.study_id) return "";
    return el("a", { href: `/studies/${job.study_id}`, text: `${shortId(job.study_id)} / ${job.study_arm || ""}` });
  }

  function row(job) {
    const progress = el("progress", { max: 1, value: job.progress, "aria-label": `progress of ${shortId(job.id)}` });
    return el("tr", { "data-id": job.id, "data-status": job.status },
      el("td", {}, el("a", { href: `/jobs/${job.id}`, class: "mono", text: shortId(job.id) }), warningMark(job)),
      el("td", { text: job.method }),
      el("td", {}, badge(job.status)),
      el("td", {}, progress, " ", el("span", { class: "muted", text: `${job.step}/${job.total_steps}` })),
      el("td", { class: "num", "data-col": "test_accuracy", text: num(job.latest_metrics.test_accuracy) }),
      el("td", { class: "num", "data-col": "parameters", text: compact(job.latest_metrics.parameters) }),
      el("td", { class: "num", "data-col": "duration", text: duration(job) }),
      el("td", { class: "wide" }, studyCell(job)),
      el("td", { class: "wide", text: datasetOf(job.spec) }),
      el("td", {}, (job.tags || []).map((t) => el("span", { class: "tag", text: t }))),
      el("td", { class: "wide", text: when(job.created_at) }),
      el("td", { class: "wide", text: job.owner_name || (job.owner_id ? shortId(job.owner_id) : "local") }),
      columns.map((key) => el("td", { class: "num", "data-col": key, text: shownValue(valueAt(job, key)) })));
  }

  function put(job) {
    const fresh = row(job);
    const old = rows.get(job.id);
    if (old) old.replaceWith(fresh);
    else if (page === 0 && matches(job)) body.prepend(fresh);
    else return;
    rows.set(job.id, fresh);
    document.getElementById("empty").hidden = rows.size > 0;
  }

  // Does a job arriving on the stream belong on this (first, filtered) page?
  function matches(job) {
    const f = filters();
    if (currentSort() !== DEFAULT_SORT) return false; // a new job's place is the server's to say
    if (f.has("where")) return false; // so is whether it passes a metric filter
    if (f.get("study_jobs") === "false" && job.study_id) return false;
    if (f.get("study") && f.get("study") !== job.study_id) return false;
    if (f.get("status") && f.get("status") !== job.status) return false;
    if (f.get("method") && f.get("method") !== job.method) return false;
    if (f.get("dataset") && f.get("dataset") !== datasetOf(job.spec)) return false;
    if (f.get("owner") && f.get("owner") !== job.owner_id) return false;
    if (f.get("tag") && !(job.tags || []).includes(f.get("tag"))) return false;
    if (f.get("id_prefix") && !job.id.replaceAll("-", "").startsWith(f.get("id_prefix").toLowerCase())) return false;
    return true;
  }

  async function load() {
    const params = filters();
    if (cursors[page]) params.set("cursor", cursors[page]);
    try {
      const result = await api(`/v1/jobs?${params}`);
      body.replaceChildren();
      rows.clear();
      showColumnHeaders();
      for (const job of result.data) { const r = row(job); rows.set(job.id, r); body.append(r); learnColumns(job); }
      showColumnNames();
      document.getElementById("csv").href = `/v1/jobs.csv?${shown()}`;
      nextCursor = result.next_cursor;
      document.getElementById("empty").hidden = result.data.length > 0;
      document.getElementById("next-page").disabled = !nextCursor;
      document.getElementById("first-page").disabled = page === 0;
      markSorted();
      params.delete("cursor");
      for (const key of columns) params.append("col", key);
      table.dataset.loaded = params.toString(); // what the shown rows answer (tests wait on it)
      showError(errorBox, null);
    } catch (e) {
      showError(errorBox, e);
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    page = 0; cursors.length = 1;
    const params = shown();
    history.replaceState(null, "", params.toString() ? `/?${params}` : "/");
    load();
  });
  form.addEventListener("reset", () => setTimeout(() => form.requestSubmit(), 0));
  document.getElementById("add-column").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = document.getElementById("column-key");
    const key = input.value.trim();
    if (!/^(metrics|spec)\.\S+$/.test(key)) {
      showError(errorBox, new Error(`${key}: a column is metrics.<name> or spec.<path>`));
      return;
    }
    if (!columns.includes(key)) columns.push(key);
    input.value = "";
    form.requestSubmit();
  });
  document.getElementById("next-page").addEventListener("click", () => {
    cursors[page + 1] = nextCursor; page += 1; load();
  });
  document.getElementById("first-page").addEventListener("click", () => { page = 0; load(); });

  for (const th of table.querySelectorAll("th[data-sort]")) {
    th.querySelector("button").addEventListener("click", () => sortBy(th.dataset.sort));
  }
  form.elements.study_jobs.addEventListener("change", () => form.requestSubmit());

  api("/v1/studies?limit=100").then((r) => {
    const select = form.elements.study;
    const wanted = new URLSearchParams(location.search).get("study");
    for (const s of r.data) select.append(el("option", { value: s.id, text: `${shortId(s.id)} ${s.name}` }));
    if (wanted) select.value = wanted;
  }).catch(() => {});

  api("/v1/datasets").then((r) => {
    const list = document.getElementById("dataset-names");
    for (const d of r.data) list.append(el("option", { value: d.id || d.name, text: d.name }));
  }).catch(() => {});

  setForm(new URLSearchParams(location.search));
  load();
  follow("/v1/jobs/stream", { job: put }, () => every(3000, load));
})();
