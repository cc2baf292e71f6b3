// Models page: the team's models (latest version, aliases) and a form to promote a job; or
// one model's versions, key metrics first, with their lineage (job, study, the jobs it built
// on and their model versions), downloads, and the actions of the registry: promote, set or
// remove an alias, archive and restore. Every write goes through `AS.api`, which sends the
// session's CSRF token.
"use strict";
(() => {
  const { api, el, showError, when, num, bytes, shortId } = AS;
  const root = document.getElementById("models-page");
  const name = root.dataset.model;
  const enc = encodeURIComponent;
  const actionError = document.getElementById("action-error");
  const LABELS = {
    test_accuracy: "test accuracy", parameters: "parameters",
    parameters_compact: "parameters (compact)", density: "density",
    weight_density: "weight density", latency_batch_1_compact_ms: "latency (ms, batch 1)",
    latency_batch_1_dense_ms: "latency (ms, batch 1)",
  };

  // Run a registry action; its refusal (409, 422 naming the field) shows above the table.
  async function act(fn) {
    try {
      await fn();
      showError(actionError, null);
    } catch (e) {
      showError(actionError, e);
    }
    await (name ? loadModel() : loadList());
  }

  function aliasList(aliases) {
    if (!aliases.length) return el("span", { class: "muted", text: "–" });
    return el("span", {}, aliases.map((a, i) =>
      el("span", { class: "alias", "data-alias": a.alias, text: `${i ? ", " : ""}${a.alias} → ${a.version}` })));
  }

  // An admin's list holds every team's models: then each name says whose it is.
  function modelRow(m, manyTeams) {
    const team = manyTeams && m.team_id ? el("span", { class: "muted", text: ` team ${shortId(m.team_id)}` }) : null;
    return el("tr", { "data-name": m.name },
      el("td", {}, el("a", { href: `/models/${enc(m.name)}`, text: m.name }), team),
      el("td", { class: "num", text: String(m.latest_version) }),
      el("td", {}, aliasList(m.aliases)),
      el("td", { class: "wide", text: when(m.updated_at) }));
  }

  async function loadList() {
    const errorBox = document.getElementById("list-error");
    try {
      const result = await api("/v1/models");
      const manyTeams = new Set(result.data.map((m) => m.team_id)).size > 1;
      document.querySelector("#models tbody").replaceChildren(...result.data.map((m) => modelRow(m, manyTeams)));
      document.getElementById("empty").hidden = result.data.length > 0;
      showError(errorBox, null);
    } catch (e) {
      showError(errorBox, e);
    }
  }

  // The key metrics (the API names them, in reading order), then every other one folded.
  function metrics(v) {
    const values = v.lineage.metrics || {};
    const rest = Object.keys(values).filter((k) => !v.key_metrics.includes(k)).sort();
    const keyList = el("dl", { class: "key-metrics" }, v.key_metrics.flatMap((k) => [
      el("dt", { text: LABELS[k] || k }), el("dd", { "data-metric": k, text: num(values[k]) })]));
    const others = rest.length ? el("details", { class: "all-metrics" },
      el("summary", { text: `${rest.length} more metrics` }),
      el("ul", {}, rest.map((k) => el("li", { text: `${k} ${num(values[k])}` })))) : null;
    if (!v.key_metrics.length && !rest.length) return el("span", { class: "muted", text: "–" });
    return el("div", {}, keyList, others);
  }

  function lineage(v) {
    const l = v.lineage;
    const dataset = l.dataset?.name || l.dataset?.id || "–";
    const sha = l.dataset_sha256 ? ` (sha256 ${l.dataset_sha256.slice(0, 12)}…)` : "";
    const items = [
      el("li", {}, `${l.method} job `, el("a", { class: "job-link", href: `/jobs/${l.job_id}`, text: shortId(l.job_id) })),
      v.study_id ? el("li", {}, "study ", el("a", { class: "study-link", href: `/studies/${v.study_id}`, text: shortId(v.study_id) })) : null,
      ...v.parents.map((p) => el("li", { class: "parent" }, `built on (${p.field}) `,
        p.model ? el("a", { class: "parent-model", href: `/models/${enc(p.model)}`, text: `${p.model}@${p.version}` }) : null,
        p.model ? " from job " : "job ",
        el("a", { href: `/jobs/${p.job_id}`, text: shortId(p.job_id) }))),
      el("li", { text: `dataset ${dataset}${sha}` }),
    ];
    return el("ul", { class: "files" }, items);
  }

  function downloads(v) {
    const base = `/v1/models/${enc(name)}/versions/${v.version}/artifacts/`;
    return el("ul", { class: "files" }, v.files.map((f) =>
      el("li", {}, el("a", { href: base + enc(f.name), download: f.name, text: f.name }),
        el("span", { class: "muted", text: ` ${bytes(f.size)}` }))));
  }

  function aliasChips(v) {
    if (!v.aliases.length) return el("span", { class: "muted", text: "–" });
    return el("span", {}, v.aliases.map((a) => el("span", { class: "tag", "data-alias": a }, a,
      el("button", { type: "button", class: "remove-alias", title: `remove alias ${a}`, "aria-label": `remove alias ${a}`,
        onclick: () => act(() => api(`/v1/models/${enc(name)}/aliases/${enc(a)}`, { method: "DELETE" })) }, "×"))));
  }

  function aliasForm(v) {
    const input = el("input", { name: "alias", placeholder: "production", size: "10", "aria-label": `alias for version ${v.version}` });
    return el("form", { class: "inline set-alias", onsubmit: (e) => {
      e.preventDefault();
      act(() => api(`/v1/models/${enc(name)}/aliases/${enc(input.value.trim())}`, { method: "PUT", json: { version: v.version } }));
    } }, input, el("button", { type: "submit", text: "Set alias" }));
  }

  function archiveButton(v, archived) {
    return el("button", { type: "button", class: archived ? "archive" : "restore",
      text: archived ? "Archive" : "Restore",
      onclick: () => act(() => api(`/v1/models/${enc(name)}/versions/${v.version}`, { method: "PATCH", json: { archived } })) });
  }

  function versionRow(v) {
    return el("tr", { "data-version": String(v.version) },
      el("td", { class: "num", text: String(v.version) }),
      el("td", {}, aliasChips(v)),
      el("td", {}, metrics(v)),
      el("td", {}, lineage(v)),
      el("td", {}, downloads(v)),
      el("td", { class: "wide", text: `${when(v.created_at)} by ${v.created_by}` }),
      el("td", {}, aliasForm(v), " ", archiveButton(v, true)));
  }

  function archivedRow(v) {
    return el("tr", { "data-version": String(v.version) },
      el("td", { class: "num", text: String(v.version) }),
      el("td", {}, metrics(v)),
      el("td", {}, lineage(v)),
      el("td", {}, downloads(v)),
      el("td", { class: "wide", text: `${when(v.archived_at)} by ${v.archived_by}` }),
      el("td", {}, archiveButton(v, false)));
  }

  function historyItem(e) {
    const to = e.to_version === null ? "removed" : `→ ${e.to_version}`;
    const from = e.from_version === null ? "" : `${e.from_version} `;
    return el("li", { text: `${when(e.at)} ${e.alias}: ${from}${to} by ${e.actor}` });
  }

  async function loadModel() {
    const errorBox = document.getElementById("model-error");
    try {
      const model = await api(`/v1/models/${enc(name)}`);
      const live = model.versions.filter((v) => !v.archived_at);
      const archived = model.versions.filter((v) => v.archived_at);
      document.querySelector("#versions tbody").replaceChildren(...live.map(versionRow));
      document.querySelector("#archived tbody").replaceChildren(...archived.map(archivedRow));
      document.getElementById("archived-count").textContent = String(archived.length);
      document.getElementById("archived-versions").hidden = !archived.length;
      document.getElementById("alias-history").replaceChildren(...model.alias_history.map(historyItem));
      showError(errorBox, null);
    } catch (e) {
      showError(errorBox, e);
    }
  }

  // Promote: the job may be named by the start of its id, as everywhere else.
  document.getElementById("promote").addEventListener("submit", (e) => {
    e.preventDefault();
    const form = new FormData(e.target);
    const model = String(form.get("name")).trim();
    act(async () => {
      const job = await api(`/v1/jobs/${enc(String(form.get("job")).trim())}`);
      const version = await api(`/v1/models/${enc(model)}/versions`, { method: "POST",
        json: { job_id: job.id, description: String(form.get("description") || "") } });
      e.target.reset();
      if (!name) location.href = `/models/${enc(model)}#v${version.version}`;
    });
  });

  if (name) loadModel(); else loadList();
})();
