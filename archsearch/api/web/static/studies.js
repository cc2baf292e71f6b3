// Studies page: every study of the team, newest first, with its jobs by status; refreshed
// while one of them runs.
"use strict";
(() => {
  const { api, el, showError, badge, when, num } = AS;
  const body = document.querySelector("#studies tbody");
  const errorBox = document.getElementById("list-error");

  // "3 succeeded · 1 running": the jobs of a study by status, most first.
  function counts(byStatus) {
    const parts = Object.entries(byStatus || {}).sort((a, b) => b[1] - a[1]);
    if (!parts.length) return el("span", { class: "muted", text: "no jobs yet" });
    return el("span", {}, parts.map(([status, n], i) =>
      el("span", { class: `count ${status}`, text: `${i ? " · " : ""}${n} ${status}` })));
  }

  function budget(b) {
    if (!b) return "–";
    return b.steps ? `${num(b.steps)} steps` : `${num(b.epochs)} epochs`;
  }

  function row(study) {
    const dataset = study.dataset?.name || study.dataset?.id || "";
    return el("tr", { "data-id": study.id, "data-status": study.status },
      el("td", {}, el("a", { href: `/studies/${study.id}`, text: study.name })),
      el("td", {}, badge(study.status)),
      el("td", {}, counts(study.counts)),
      el("td", { class: "wide", text: dataset }),
      el("td", { class: "wide", text: budget(study.budget) }),
      el("td", { class: "wide", text: study.seeds.join(", ") }),
      el("td", { class: "wide", text: when(study.created_at) }));
  }

  async function load() {
    try {
      const result = await api("/v1/studies");
      body.replaceChildren(...result.data.map(row));
      document.getElementById("empty").hidden = result.data.length > 0;
      showError(errorBox, null);
      return result.data.some((s) => !AS.studyEnded(s.status));
    } catch (e) {
      showError(errorBox, e);
      return true;
    }
  }

  // Quick while some study runs; slowly otherwise, to show a study submitted meanwhile.
  async function loop() {
    setTimeout(loop, (await load()) ? 3000 : 15000);
  }
  loop();
})();
