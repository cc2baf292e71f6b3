// A job: status, progress, facts, live curves, architecture, artifacts, events, spec, cancel.
// Follows /v1/jobs/{id}/stream (status, progress, metric, event, end); polls without it.
"use strict";
(() => {
  const { api, el, showError, num, bytes, when, badge, shortId, follow, every, lineChart } = AS;
  let job = JSON.parse(document.getElementById("initial-job").textContent);
  const id = job.id;
  const series = new Map(); // metric name -> [[step, value], ...]
  const charts = new Map(); // chart key -> {plot, names}
  const seenEvents = new Set();
  let artifactsShown = null;

  // Which chart a metric is drawn on: loss and accuracy together, each other series alone
  // (density and temperatures of prune, swaps of search, widths and lambda of grow, ...).
  function chartOf(name) {
    if (/loss/.test(name)) return "loss";
    if (/acc/.test(name)) return "accuracy";
    return name.split("/")[0];
  }

  function fact(label, value) {
    return [el("dt", { text: label }), el("dd", { text: value ?? "–" })];
  }

  function showJob(next) {
    // An ended job stays ended: an answer sent before its end (the cancel's own, which can
    // arrive after the stream's terminal event and its close) must not show it running again.
    if (AS.ended(job.status) && !AS.ended(next.status)) return;
    job = next;
    const status = document.getElementById("status");
    status.className = `badge ${job.status}`;
    status.textContent = job.status;
    document.getElementById("cancel").hidden = AS.ended(job.status) || job.cancel_requested;
    showProgress(job.step, job.total_steps);
    const facts = [
      fact("method", job.method),
      fact("tags", (job.tags || []).join(" ") || "–"),
      fact("label", job.label),
      fact("owner", job.owner_name || (job.owner_id ? shortId(job.owner_id) : "local")),
      fact("study / arm", job.study_id ? `${shortId(job.study_id)} / ${job.study_arm || ""}` : "–"),
      fact("submitted", when(job.created_at)),
      fact("started", when(job.started_at)),
      fact("finished", when(job.finished_at)),
      fact("worker", job.worker),
      fact("device", job.device),
      fact("attempts", String(job.attempts)),
    ];
    if (job.status === "queued") {
      facts.push(fact("queue position", job.queue_position == null ? "–" : String(job.queue_position)));
      facts.push(fact("waiting because", job.pending_reason));
    }
    document.getElementById("facts").replaceChildren(...facts.flat());
    const errorBox = document.getElementById("error-box");
    errorBox.hidden = !job.error;
    errorBox.textContent = job.error || "";
    document.getElementById("warnings").replaceChildren(
      ...(job.warnings || []).map((w) => el("li", { class: "error", text: `${w.code}: ${w.message}` })));
    document.getElementById("spec").textContent = JSON.stringify(job.spec, null, 2);
    showArchitecture();
  }

  function showProgress(step, total) {
    const bar = document.getElementById("progress");
    bar.value = total ? step / total : 0;
    document.getElementById("progress-text").textContent = `step ${step} of ${total || "?"}`;
  }

  function addPoint(name, step, value) {
    const points = series.get(name) || [];
    const at = points.findIndex((p) => p[0] >= step);
    if (at >= 0 && points[at][0] === step) points[at] = [step, value]; // a resumed step rewrites
    else if (at >= 0) points.splice(at, 0, [step, value]);
    else points.push([step, value]);
    series.set(name, points);
  }

  function redraw() {
    const box = document.getElementById("charts");
    const groups = new Map();
    for (const name of [...series.keys()].sort()) {
      const key = chartOf(name);
      groups.set(key, [...(groups.get(key) || []), name]);
    }
    document.getElementById("no-curves").hidden = series.size > 0;
    for (const [key, names] of groups) {
      const data = names.map((n) => ({ label: n, points: series.get(n) }));
      const current = charts.get(key);
      if (current && current.names.join() === names.join()) {
        current.plot.setData(uPlot.join(data.map((s) => [s.points.map((p) => p[0]), s.points.map((p) => p[1])])));
        continue;
      }
      if (current) current.plot.destroy();
      let holder = box.querySelector(`[data-chart="${CSS.escape(key)}"]`);
      if (!holder) {
        holder = el("figure", { class: "chart", "data-chart": key, "aria-label": `${key} curve` });
        box.append(holder);
      }
      holder.replaceChildren();
      charts.set(key, { plot: lineChart(holder, key, data), names });
      holder.dataset.points = String(data.reduce((n, s) => n + s.points.length, 0));
    }
    for (const [key, c] of charts) {
      const holder = box.querySelector(`[data-chart="${CSS.escape(key)}"]`);
      // A chart may name a series the last full reload no longer has (series.clear()).
      holder.dataset.points = String(c.names.reduce((n, name) => n + (series.get(name) || []).length, 0));
    }
  }

  async function loadMetrics() {
    const result = await api(`/v1/jobs/${id}/metrics`);
    series.clear();
    for (const [name, points] of Object.entries(result.series)) {
      series.set(name, points.map((p) => [p.step, p.value]));
    }
    redraw();
  }

  function addEvent(e) {
    const key = `${e.at}|${e.to_status}|${e.reason}`;
    if (seenEvents.has(key)) return;
    seenEvents.add(key);
    const from = e.from_status ? `${e.from_status} → ` : "";
    document.getElementById("events").append(el("li", {},
      el("time", { datetime: e.at, text: when(e.at) }), " ",
      el("strong", { text: `${from}${e.to_status}` }), ` ${e.reason}`, e.actor ? el("span", { class: "muted", text: ` (${e.actor})` }) : null));
  }

  async function loadEvents() {
    const result = await api(`/v1/jobs/${id}/events`);
    for (const e of result.data) addEvent(e);
  }

  async function loadArtifacts() {
    const result = await api(`/v1/jobs/${id}/artifacts`);
    const signature = result.data.map((a) => a.name + a.sha256).join();
    if (signature === artifactsShown) return;
    artifactsShown = signature;
    const rows = result.data.map((a) => {
      const url = `/v1/jobs/${id}/artifacts/${encodeURIComponent(a.name)}`;
      return el("tr", { "data-name": a.name },
        el("td", {}, el("a", { href: url, text: a.name })),
        // A chart is drawn on its first download: no size nor digest before that.
        el("td", { class: "num", text: a.size === null ? "drawn when opened" : bytes(a.size) }),
        el("td", { class: "mono sha", text: a.sha256 ?? "" }),
        el("td", {}, el("a", { class: "button secondary", href: url, download: a.name, text: "Download", "aria-label": `download ${a.name}` })));
    });
    document.querySelector("#artifacts tbody").replaceChildren(...rows);
    const previews = result.data.filter((a) => a.media_type === "image/png").map((a) =>
      el("figure", {}, el("img", { src: `/v1/jobs/${id}/artifacts/${encodeURIComponent(a.name)}`, alt: a.name, loading: "lazy" }),
        el("figcaption", { class: "muted", text: a.name })));
    document.getElementById("previews").replaceChildren(...previews);
    const names = result.data.map((a) => a.name);
    if (names.includes("figures.json")) showFigures();
    if (AS.ended(job.status)) showRuns();
    if (names.includes("deployment.json")) showLayers(names.includes("density.json"));
    else if (names.includes("density.json")) showDensity();
  }

  // The run's device figures (figures.json): what each number is comes with it, and a
  // missing utilisation says why instead of showing a blank.
  // A utilisation as its device measures it: a GPU's busy fraction, a CPU's cores kept busy.
  function busyText(run) {
    if (run.utilization == null) return "–";
    return run.device === "cuda" ? `${(100 * run.utilization).toFixed(0)} %` : `${num(run.utilization, 2)} cores`;
  }
  const PEAK_KINDS = {
    cuda_max_allocated: "peak GPU memory allocated by the run",
    rss_since_run_start: "peak resident memory of the process during the run",
    rss_process_lifetime: "peak resident memory of the process since it started",
  };
  async function showFigures() {
    const f = await api(`/v1/jobs/${id}/artifacts/figures.json`);
    const busy = f.utilization == null ? `unknown: ${f.utilization_note || "not measured"}`
      : `${busyText(f)} ${f.device === "cuda" ? "(GPU, NVML mean)" : "busy on average (CPU time / wall time)"}`;
    const rows = [["device", `${f.device} · ${f.device_name}`],
      ["peak memory", f.peak_memory_bytes == null ? "unknown" : `${bytes(f.peak_memory_bytes)} (${PEAK_KINDS[f.peak_memory_kind] || f.peak_memory_kind})`],
      ["utilisation", busy], ["wall time", `${f.wall_seconds.toFixed(1)} s`]];
    document.getElementById("device-figures").replaceChildren(el("dl", { class: "facts", id: "figures" },
      rows.flatMap(([label, value]) => fact(label, value))));
  }

  // Every run of the job (a job handed back or whose worker was lost runs again), from the
  // usage API: what each run held, the share of its device it was charged for, and what it
  // used of it. A run killed with its process could not report its figures: "–".
  async function showRuns() {
    const usage = await api(`/v1/usage/jobs/${id}`);
    if (!usage.runs.length) return;
    const headings = ["run", "device", "worker", "held", "device share", "charged", "peak memory", "utilisation", "ended"];
    const table = el("table", { class: "grid", id: "runs" },
      el("thead", {}, el("tr", {}, headings.map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, usage.runs.map((r) => el("tr", { "data-attempt": String(r.attempt) },
        el("td", { class: "num", text: String(r.attempt) }),
        el("td", { text: r.device_name ? `${r.device} · ${r.device_name}` : r.device }),
        el("td", { class: "mono", text: r.worker }),
        el("td", { class: "num", text: `${r.held_seconds.toFixed(1)} s` }),
        el("td", { class: "num", text: num(r.device_share, 3) }),
        el("td", { class: "num", text: `${r.device_seconds.toFixed(1)} s` }),
        el("td", { class: "num", text: r.peak_memory_mb == null ? "–" : bytes(r.peak_memory_mb * 2 ** 20) }),
        el("td", { class: "num", text: busyText(r) }),
        el("td", { text: r.given_back ? "handed back" : r.ended_at ? when(r.ended_at) : "–" })))));
    const total = `${usage.device_seconds.toFixed(1)} device-seconds charged in ${usage.runs.length} run${usage.runs.length === 1 ? "" : "s"}`;
    document.getElementById("device-runs").replaceChildren(el("h3", { text: "Runs" }),
      el("div", { class: "table-wrap" }, table), el("p", { class: "muted", id: "runs-total", text: total }));
  }

  // Dense against compact (or nonzero) counts, from the metrics the methods report.
  function showArchitecture() {
    const m = job.latest_metrics || {};
    const pairs = [
      ["parameters", m.parameters_dense ?? m.parameters, m.parameters_compact ?? (m.parameters_dense != null ? m.parameters : undefined)],
      ["MACs", m.macs_dense ?? m.masked_model_macs ?? m.macs, m.macs_compact_dense ?? (m.macs_dense != null || m.masked_model_macs != null ? m.macs : undefined)],
    ].filter((p) => p[1] != null);
    if (!pairs.length) return;
    if (pairs.every((p) => p[2] == null)) { // a dense model: its counts alone
      document.getElementById("arch-counts").replaceChildren(el("table", { class: "grid", id: "arch-table" },
        el("tbody", {}, pairs.map(([what, dense]) => el("tr", {},
          el("th", { scope: "row", text: what }), el("td", { class: "num", text: num(dense) }))))));
      return;
    }
    const table = el("table", { class: "grid", id: "arch-table" },
      el("thead", {}, el("tr", {}, el("th", { text: "" }), el("th", { text: "dense" }), el("th", { text: "compact" }), el("th", { text: "kept" }))),
      el("tbody", {}, pairs.map(([what, dense, compact]) => el("tr", {},
        el("th", { scope: "row", text: what }), el("td", { class: "num", text: num(dense) }),
        el("td", { class: "num", text: compact == null ? "–" : num(compact) }),
        el("td", { class: "num", text: compact == null ? "–" : `${(100 * compact / dense).toFixed(1)} %` })))));
    document.getElementById("arch-counts").replaceChildren(el("div", { class: "table-wrap" }, table));
  }

  // Per layer, from deployment.json: the weight's shape, its dense and kept (nonzero) counts,
  // and the form (dense or sparse kernel) chosen for batch 1.
  // At unit granularity the compact layers are dense and smaller: the table that says what
  // was pruned is the units each layer kept (density.json's `units`), shown above them.
  async function showLayers(hasDensity) {
    const deployment = await api(`/v1/jobs/${id}/artifacts/deployment.json`);
    const units = hasDensity ? (await api(`/v1/jobs/${id}/artifacts/density.json`)).units || [] : [];
    const forms = deployment.forms || [];
    if (!forms.length && !units.length) return;
    const table = el("table", { class: "grid", id: "layers" },
      el("thead", {}, el("tr", {}, ["layer", "weight shape", "weights dense", "weights kept", "density", "batch-1 form"]
        .map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, forms.map((f) => {
        const dense = (f.shape || []).reduce((a, b) => a * b, 1);
        return el("tr", {}, el("td", { class: "mono", text: f.layer }), el("td", { class: "mono", text: (f.shape || []).join("×") }),
          el("td", { class: "num", text: num(dense) }), el("td", { class: "num", text: num(Math.round(dense * f.density)) }),
          el("td", {}, el("span", { class: "bar", style: `width:${Math.round(f.density * 80)}px` }), ` ${num(f.density, 3)}`),
          el("td", { text: f.batch_1 || "–" }));
      })));
    const unitTable = el("table", { class: "grid", id: "units" },
      el("thead", {}, el("tr", {}, ["layer", "read by", "units", "units kept", "fraction kept"]
        .map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, units.map((u) => el("tr", {}, el("td", { class: "mono", text: u.layer }),
        el("td", { class: "mono", text: u.read_by }), el("td", { class: "num", text: num(u.units) }),
        el("td", { class: "num", text: num(u.kept) }),
        el("td", {}, el("span", { class: "bar", style: `width:${Math.round((u.kept / u.units) * 80)}px` }), ` ${num(u.kept / u.units, 3)}`)))));
    const parts = units.length ? [el("h3", { text: "Units kept" }), el("div", { class: "table-wrap" }, unitTable)] : [];
    if (forms.length) parts.push(el("h3", { text: units.length ? "Layers of the compact model" : "Layers" }), el("div", { class: "table-wrap" }, table));
    document.getElementById("arch-layers").replaceChildren(...parts);
  }

  async function showDensity() {
    const density = await api(`/v1/jobs/${id}/artifacts/density.json`);
    const layers = Object.entries(density).filter(([k]) => k.startsWith("density/"));
    const table = el("table", { class: "grid", id: "density" },
      el("thead", {}, el("tr", {}, el("th", { text: "layer" }), el("th", { text: "density (fraction kept)" }))),
      el("tbody", {}, layers.map(([k, v]) => el("tr", {}, el("td", { class: "mono", text: k.slice(8) }),
        el("td", {}, el("span", { class: "bar", style: `width:${Math.round(v * 120)}px` }), ` ${num(v, 3)}`)))));
    document.getElementById("arch-layers").replaceChildren(el("h3", { text: "Layers" }), el("div", { class: "table-wrap" }, table));
  }

  async function refresh() {
    showJob(await api(`/v1/jobs/${id}`));
    await Promise.all([loadMetrics(), loadEvents()]);
    if (AS.ended(job.status)) await loadArtifacts();
  }

  function live() {
    return follow(`/v1/jobs/${id}/stream`, {
      status: showJob,
      progress: (p) => { showProgress(p.step, p.total); },
      metric: (m) => { addPoint(m.name, m.step, m.value); redraw(); },
      event: addEvent,
      end: (final) => { showJob(final); loadArtifacts(); loadEvents(); },
    }, () => {
      const stop = every(1500, async () => {
        await refresh();
        if (AS.ended(job.status)) stop();
      });
      return stop;
    });
  }

  document.getElementById("cancel").addEventListener("click", async () => {
    const box = document.getElementById("action-error");
    try {
      showJob(await api(`/v1/jobs/${id}/cancel`, { method: "POST" }));
      showError(box, null);
    } catch (e) { showError(box, e); }
  });
  document.getElementById("copy-spec").addEventListener("click", async () => {
    const text = JSON.stringify(job.spec, null, 2);
    try { await navigator.clipboard.writeText(text); } catch {
      const range = document.createRange();
      range.selectNodeContents(document.getElementById("spec"));
      getSelection().removeAllRanges(); getSelection().addRange(range);
    }
    document.getElementById("copied").textContent = "copied";
  });

  showJob(job);
  Promise.all([loadMetrics(), loadEvents(), loadArtifacts()]).catch((e) => showError(document.getElementById("action-error"), e));
  if (!AS.ended(job.status)) live();
})();
