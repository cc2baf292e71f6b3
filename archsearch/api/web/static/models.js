// Models page: the team's models (latest version, aliases), or one model's versions with
// their lineage (job link, metrics, dataset), downloads and the history of its aliases.
"use strict";
(() => {
  const { api, el, showError, when, num, bytes, shortId } = AS;
  const root = document.getElementById("models-page");
  const name = root.dataset.model;
  const enc = encodeURIComponent;

  function aliasList(aliases) {
    if (!aliases.length) return el("span", { class: "muted", text: "–" });
    return el("span", {}, aliases.map((a, i) =>
      el("span", { class: "alias", "data-alias": a.alias, text: `${i ? ", " : ""}${a.alias} → ${a.version}` })));
  }

  function modelRow(m) {
    return el("tr", { "data-name": m.name },
      el("td", {}, el("a", { href: `/models/${enc(m.name)}`, text: m.name })),
      el("td", { class: "num", text: String(m.latest_version) }),
      el("td", {}, aliasList(m.aliases)),
      el("td", { class: "wide", text: when(m.updated_at) }));
  }

  async function loadList() {
    const errorBox = document.getElementById("list-error");
    try {
      const result = await api("/v1/models");
      document.querySelector("#models tbody").replaceChildren(...result.data.map(modelRow));
      document.getElementById("empty").hidden = result.data.length > 0;
      showError(errorBox, null);
    } catch (e) {
      showError(errorBox, e);
    }
  }

  function metrics(values) {
    const parts = Object.entries(values || {}).sort();
    return parts.length ? parts.map(([k, v]) => `${k} ${num(v)}`).join(", ") : "–";
  }

  function downloads(v) {
    const base = `/v1/models/${enc(name)}/versions/${v.version}/artifacts/`;
    return el("ul", { class: "files" }, v.files.map((f) =>
      el("li", {}, el("a", { href: base + enc(f.name), download: f.name, text: f.name }),
        el("span", { class: "muted", text: ` ${bytes(f.size)}` }))));
  }

  function versionRow(v) {
    const lineage = v.lineage;
    const dataset = lineage.dataset?.name || lineage.dataset?.id || "–";
    const sha = lineage.dataset_sha256 ? ` (sha256 ${lineage.dataset_sha256.slice(0, 12)}…)` : "";
    return el("tr", { "data-version": String(v.version) },
      el("td", { class: "num", text: String(v.version) }),
      el("td", { text: v.aliases.join(", ") || "–" }),
      el("td", {}, el("a", { href: `/jobs/${lineage.job_id}`, text: shortId(lineage.job_id) })),
      el("td", { text: metrics(lineage.metrics) }),
      el("td", {}, downloads(v)),
      el("td", { class: "wide", text: dataset + sha }),
      el("td", { class: "wide", text: `${when(v.created_at)} by ${v.created_by}` }));
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
      document.querySelector("#versions tbody").replaceChildren(...model.versions.map(versionRow));
      document.getElementById("alias-history").replaceChildren(...model.alias_history.map(historyItem));
      showError(errorBox, null);
    } catch (e) {
      showError(errorBox, e);
    }
  }

  if (name) loadModel(); else loadList();
})();
