// A study: jobs by status, the per-arm table (mean ± std over seeds), accuracy
// against parameters with error bars and the Pareto front, any knob against any metric
// (one point a job), its jobs, cancel, artifacts.
// The study is polled from /v1/studies/{id} until it ended and its artifacts are built;
// its jobs' rows follow the jobs stream.
"use strict";
(() => {
  const { api, el, showError, badge, when, num, bytes, shortId, follow, every } = AS;
  let study = JSON.parse(document.getElementById("initial-study").textContent);
  const jobs = new Map(JSON.parse(document.getElementById("initial-jobs").textContent).map((j) => [j.id, j]));
  const id = study.id;
  const COLORS = ["#2459c8", "#c2410c", "#15803d", "#7c3aed", "#b91c1c", "#0e7490", "#a16207", "#be185d"];
  const errorBox = document.getElementById("action-error");

  const colorOf = (label) => COLORS[Math.max(0, study.arms.findIndex((a) => a.label === label)) % COLORS.length];
  const ended = () => AS.studyEnded(study.status);

  // Mean ± std over seeds, the std to two digits; one seed (or no spread) shows the mean.
  function stat(s, format = (v) => num(v, 3), spread = (v) => num(v, 2)) {
    if (!s) return "–";
    return s.n > 1 && s.std > 0 ? `${format(s.mean)} ± ${spread(s.std)}` : format(s.mean);
  }

  function showHeader() {
    const status = document.getElementById("status");
    status.textContent = study.status;
    status.className = `badge ${study.status}`;
    document.getElementById("cancel").hidden = ended() || study.cancel_requested;
    const counts = Object.entries(study.counts || {}).sort((a, b) => b[1] - a[1]);
    document.getElementById("counts").replaceChildren(...counts.map(([s, n]) =>
      el("span", { class: `badge ${s}`, "data-status": s, text: `${n} ${s}` }), " "));
    const b = study.budget;
    const facts = [
      ["Dataset", study.dataset?.name || study.dataset?.id || ""],
      ["Budget", b ? (b.steps ? `${num(b.steps)} optimizer steps an arm` : `${num(b.epochs)} epochs`) : "the arms' own"],
      ["Seeds", study.seeds.join(", ")],
      study.sampler && ["Sampler", `${study.sampler}: ${study.trials_asked} of ${study.n_trials} trials asked`],
      // A pruner's stopped trials count as spent: the study's whole spend is shown beside them.
      (study.config?.pruner?.name ?? "none") !== "none" && ["Pruner",
        `${study.config.pruner.name}: ${study.counts?.pruned || 0} job(s) pruned ` +
        "(stopped early, or not started once their arm's first seed was); " +
        `${num(study.optimizer_steps_spent ?? 0)} optimizer steps, ${num(Math.round(study.device_seconds ?? 0))} job-seconds spent`],
      ["Submitted", when(study.created_at)],
      ["Ended", when(study.finished_at)],
    ].filter(Boolean);
    document.getElementById("facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
  }

  const count = (v) => num(Math.round(v));
  const size = (v) => bytes(Math.round(v));

  function steps(arm) {
    const spent = arm.optimizer_steps ? num(Math.round(arm.optimizer_steps.mean)) : "–";
    const cell = el("td", { class: "num" }, `${spent} / ${arm.budget_steps ?? "–"}`);
    if (arm.over_budget) cell.append(" ", el("span", { class: "over", title: "over budget", text: "⚠ over" }));
    return cell;
  }

  function armRow(arm) {
    const jobsText = Object.entries(arm.counts).map(([s, n]) => `${n} ${s}`).join(", ");
    return el("tr", { "data-arm": arm.label, class: arm.on_front ? "on-front" : null },
      el("th", { scope: "row" }, el("span", { class: "swatch", style: `background:${colorOf(arm.label)}` }), arm.label),
      el("td", { text: arm.method }),
      el("td", { text: jobsText }),
      el("td", { class: "num", text: stat(arm.test_accuracy) }),
      el("td", { class: "num", text: stat(arm.val_accuracy) }),
      el("td", { class: "num", text: stat(arm.parameters, count, count) }),
      el("td", { class: "num", text: stat(arm.macs, count, count) }),
      el("td", { class: "num", text: stat(arm.compact_bytes, size, size) }),
      el("td", { class: "num", text: stat(arm.latency_ms) }),
      steps(arm),
      el("td", { class: "front-mark", text: arm.on_front ? "★" : "", title: arm.on_front ? "on the Pareto front" : null }));
  }

  function showArms() {
    document.querySelector("#arms tbody").replaceChildren(...study.arms.map(armRow));
  }

  function showJobs() {
    const rows = [...jobs.values()].map((job) => el("tr", { "data-id": job.id, "data-status": job.status },
      el("td", {}, el("a", { href: `/jobs/${job.id}`, class: "mono", text: shortId(job.id) })),
      el("td", { text: job.arm ?? "" }),
      el("td", { text: job.seed ?? "–" }),
      el("td", {}, badge(job.status))));
    document.querySelector("#study-jobs tbody").replaceChildren(...rows);
    const total = Object.values(study.counts || {}).reduce((a, b) => a + b, 0);
    const more = document.getElementById("more-jobs");
    more.hidden = total <= jobs.size;
    more.textContent = `${total - jobs.size} more job(s) asked since this page opened: listing them…`;
  }

  // A row of the jobs table from a JobPublic (the jobs route and the jobs stream).
  const jobRow = (job) => ({ id: job.id, arm: job.study_arm, seed: job.spec?.training?.seed, status: job.status });

  // An adaptive study asks new trials as it runs: list the ones this page has not seen.
  async function loadNewJobs() {
    const total = Object.values(study.counts || {}).reduce((a, b) => a + b, 0);
    if (total <= jobs.size) return;
    const page = await api(`/v1/jobs?study=${id}&limit=500`);
    for (const job of page.data) if (!jobs.has(job.id)) jobs.set(job.id, jobRow(job));
  }

  function showArtifacts() {
    const names = study.artifacts || [];
    const url = (name) => `/v1/studies/${id}/artifacts/${encodeURIComponent(name)}`;
    document.getElementById("study-artifacts").replaceChildren(...names.map((name) =>
      el("li", { "data-name": name }, el("a", { href: url(name), download: name, text: name }))));
    document.getElementById("no-artifacts").hidden = names.length > 0;
    const figure = document.getElementById("pareto-png");
    const img = figure.querySelector("img");
    if (names.includes("pareto.png") && !img.getAttribute("src")) {
      img.src = url("pareto.png");
      figure.querySelector("a").href = img.src;
    }
    figure.hidden = !names.includes("pareto.png");
  }

  // The knob plot needs whole jobs (spec and metrics): listed again when the counts move.
  const knobPick = {};
  let knobCounts = null;
  async function showKnobs() {
    const counts = JSON.stringify(study.counts || {});
    if (counts === knobCounts) return;
    knobCounts = counts;
    const listed = (await api(`/v1/jobs?study=${id}&limit=500`)).data.filter((j) => Object.keys(j.latest_metrics).length);
    if (!listed.length) return;
    AS.knobPlot(document.getElementById("knob-plot"), listed,
      { state: knobPick, colorOf: (job) => colorOf(job.study_arm) });
  }

  function show() {
    showKnobs().catch((e) => showError(errorBox, e));
    showHeader();
    showArms();
    AS.paretoPlot(document.getElementById("pareto-plot"), study, colorOf);
    showJobs();
    showArtifacts();
  }

  async function refresh() {
    study = await api(`/v1/studies/${id}`);
    await loadNewJobs();
    await reconcileJobs();
    show();
  }

  // A job that changed between the page's first listing and the stream's start has no event
  // to come: whenever the study's counts move, its open rows are read again.
  let countsSeen = null;
  async function reconcileJobs() {
    const counts = JSON.stringify(study.counts || {});
    if (counts === countsSeen || ![...jobs.values()].some((job) => !AS.ended(job.status))) return;
    countsSeen = counts;
    for (const job of (await api(`/v1/jobs?study=${id}&limit=500`)).data) onJob(job);
  }

  // Poll while the study runs, then until its artifacts are built (a little after it ends).
  function poll(afterEnd = 0) {
    setTimeout(async () => {
      try { await refresh(); showError(errorBox, null); } catch (e) { showError(errorBox, e); }
      const waited = ended() ? afterEnd + 1 : 0;
      if (!ended() || (!study.artifacts.length && waited < 60)) poll(waited);
    }, 2000);
  }

  function onJob(job) {
    const known = jobs.get(job.id);
    if (!known && job.study_id === id) {
      jobs.set(job.id, jobRow(job));  // a trial asked after the page opened
      showJobs();
      return;
    }
    if (!known || known.status === job.status) return;
    known.status = job.status;
    showJobs();
  }

  // Jobs still open get their status by polling when no stream can be opened.
  async function pollJobs() {
    for (const job of jobs.values()) {
      if (!AS.ended(job.status)) onJob(await api(`/v1/jobs/${job.id}`));
    }
  }

  document.getElementById("cancel").addEventListener("click", async () => {
    try {
      study = { ...study, ...(await api(`/v1/studies/${id}/cancel`, { method: "POST" })) };
      show();
      showError(errorBox, null);
    } catch (e) { showError(errorBox, e); }
  });

  show();
  if (!ended() || !study.artifacts.length) poll();
  if ([...jobs.values()].some((job) => !AS.ended(job.status))) {
    follow("/v1/jobs/stream", { job: onJob }, () => every(3000, pollJobs));
  }
})();
