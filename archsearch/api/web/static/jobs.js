// Jobs page: newest first, filters in the URL, cursor paging, live rows from /v1/jobs/stream.
"use strict";
(() => {
  const { api, el, showError, badge, when, datasetOf, shortId, follow, every } = AS;
  const form = document.getElementById("filters");
  const body = document.querySelector("#jobs tbody");
  const errorBox = document.getElementById("list-error");
  const cursors = [null]; // the cursor of each page seen, for "first page"
  let page = 0;
  let nextCursor = null;
  const rows = new Map(); // job id -> row

  function filters() {
    const params = new URLSearchParams();
    for (const [k, v] of new FormData(form)) {
      const value = k === "id_prefix" ? v.trim().replaceAll("-", "") : v.trim();
      if (value) params.set(k, value);
    }
    return params;
  }

  function setForm(params) {
    for (const input of form.elements) if (input.name) input.value = params.get(input.name) || "";
  }

  function row(job) {
    const progress = el("progress", { max: 1, value: job.progress, "aria-label": `progress of ${shortId(job.id)}` });
    return el("tr", { "data-id": job.id, "data-status": job.status },
      el("td", {}, el("a", { href: `/jobs/${job.id}`, class: "mono", text: shortId(job.id) })),
      el("td", { text: job.method }),
      el("td", {}, badge(job.status)),
      el("td", {}, progress, " ", el("span", { class: "muted", text: `${job.step}/${job.total_steps}` })),
      el("td", { class: "wide", text: datasetOf(job.spec) }),
      el("td", {}, (job.tags || []).map((t) => el("span", { class: "tag", text: t }))),
      el("td", { class: "wide", text: when(job.created_at) }),
      el("td", { class: "mono wide", text: job.owner_id ? shortId(job.owner_id) : "local" }));
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
      for (const job of result.data) { const r = row(job); rows.set(job.id, r); body.append(r); }
      nextCursor = result.next_cursor;
      document.getElementById("empty").hidden = result.data.length > 0;
      document.getElementById("next-page").disabled = !nextCursor;
      document.getElementById("first-page").disabled = page === 0;
      showError(errorBox, null);
    } catch (e) {
      showError(errorBox, e);
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    page = 0; cursors.length = 1;
    const params = filters();
    history.replaceState(null, "", params.toString() ? `/?${params}` : "/");
    load();
  });
  form.addEventListener("reset", () => setTimeout(() => form.requestSubmit(), 0));
  document.getElementById("next-page").addEventListener("click", () => {
    cursors[page + 1] = nextCursor; page += 1; load();
  });
  document.getElementById("first-page").addEventListener("click", () => { page = 0; load(); });

  api("/v1/datasets").then((r) => {
    const list = document.getElementById("dataset-names");
    for (const d of r.data) list.append(el("option", { value: d.id || d.name, text: d.name }));
  }).catch(() => {});

  setForm(new URLSearchParams(location.search));
  load();
  follow("/v1/jobs/stream", { job: put }, () => every(3000, load));
})();
