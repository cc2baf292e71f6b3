// Compare: jobs picked by id or by tag; final metrics, overlaid curves, and accuracy against
// parameters and MACs with the Pareto front (no other job both smaller and more accurate),
// and any knob against any metric (`knob` and `metric` kept in the URL).
"use strict";
(() => {
  const { api, el, svgNode, showError, num, shortId, lineChart } = AS;
  const form = document.getElementById("pick");
  const errorBox = document.getElementById("compare-error");
  const metricSelect = document.getElementById("curve-metric");
  let compared = []; // [{job, series}]
  let plot = null;
  const initial = new URLSearchParams(location.search);
  const knobPick = { knob: initial.get("knob"), metric: initial.get("metric") };

  const accuracyOf = (m) => m.test_accuracy ?? m.accuracy ?? m.final_test_accuracy;

  async function candidates() {
    const result = await api("/v1/jobs?status=succeeded&limit=50");
    const chosen = new URLSearchParams(location.search).getAll("job");
    document.getElementById("candidates").replaceChildren(...result.data.map((j) => el("label", {},
      el("input", { type: "checkbox", name: "job", value: j.id, checked: chosen.includes(j.id) }),
      el("span", { class: "mono", text: shortId(j.id) }), ` ${j.method} ${(j.tags || []).join(" ")}`)));
  }

  async function jobsFor(params) {
    const tag = params.get("tag");
    if (tag) return (await api(`/v1/jobs?tag=${encodeURIComponent(tag)}&limit=100`)).data;
    return Promise.all(params.getAll("job").map((id) => api(`/v1/jobs/${id}`)));
  }

  async function load() {
    const params = new URLSearchParams(location.search);
    form.elements.tag.value = params.get("tag") || "";
    const jobs = await jobsFor(params);
    compared = await Promise.all(jobs.map(async (job) => ({ job, series: (await api(`/v1/jobs/${job.id}/metrics`)).series })));
    table();
    curves();
    scatter("scatter-params", "parameters", "parameters");
    scatter("scatter-macs", "macs", "MACs");
    AS.knobPlot(document.getElementById("knob-plot"), compared.map((c) => c.job), { state: knobPick, onPick: keepPick });
  }

  function keepPick(pick) {
    const params = new URLSearchParams(location.search);
    params.set("knob", pick.knob);
    params.set("metric", pick.metric);
    history.replaceState(null, "", `/compare?${params}`);
  }

  function table() {
    // What a comparison is about first (accuracy, loss, size, cost), then the rest by name.
    const first = ["test_accuracy", "test_loss", "train_loss", "parameters", "parameters_compact", "macs", "macs_dense", "density"];
    const rank = (k) => (first.includes(k) ? first.indexOf(k) : first.length);
    const keys = [...new Set(compared.flatMap((c) => Object.keys(c.job.latest_metrics)))]
      .filter((k) => !k.includes("/")).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    document.querySelector("#compare-table thead").replaceChildren(el("tr", {},
      ["job", "method", "tags", ...keys].map((k) => el("th", { scope: "col", text: k }))));
    document.querySelector("#compare-table tbody").replaceChildren(...compared.map(({ job }) => el("tr", { "data-id": job.id },
      el("td", {}, el("a", { href: `/jobs/${job.id}`, class: "mono", text: shortId(job.id) })),
      el("td", { text: job.method }), el("td", { text: (job.tags || []).join(" ") }),
      keys.map((k) => el("td", { class: "num", text: num(job.latest_metrics[k]) })))));
  }

  function curves() {
    const names = [...new Set(compared.flatMap((c) => Object.keys(c.series)))].sort();
    const keep = metricSelect.value;
    metricSelect.replaceChildren(...names.map((n) => el("option", { value: n, text: n })));
    metricSelect.value = names.includes(keep) ? keep : names.find((n) => /test_acc/.test(n)) || names[0] || "";
    drawCurves();
  }

  function drawCurves() {
    const name = metricSelect.value;
    const box = document.getElementById("overlay");
    if (plot) { plot.destroy(); plot = null; }
    box.replaceChildren();
    const series = compared.filter((c) => c.series[name]).map((c) => ({
      label: shortId(c.job.id), points: c.series[name].map((p) => [p.step, p.value]) }));
    box.dataset.series = String(series.length);
    if (series.length) plot = lineChart(box, name, series);
  }

  // The jobs no other job dominates (at most the size and at least the accuracy, one strictly).
  function paretoFront(points) {
    return points.filter((p) => !points.some((q) => q !== p && q.x <= p.x && q.y >= p.y && (q.x < p.x || q.y > p.y)));
  }

  function scatter(id, key, label) {
    const box = document.getElementById(id);
    const points = compared.map(({ job }) => ({ job, x: job.latest_metrics[key], y: accuracyOf(job.latest_metrics) }))
      .filter((p) => p.x > 0 && p.y != null);
    const front = new Set(paretoFront(points));
    const W = 420, H = 260, L = 48, B = 36;
    const svg = svgNode(null, "svg", {
      viewBox: `0 0 ${W} ${H}`, class: "scatter", role: "img", "aria-label": `accuracy against ${label}`,
    });
    const add = (tag, attrs, text) => svgNode(svg, tag, attrs, text);
    add("text", { x: W / 2, y: H - 4, "text-anchor": "middle" }, `${label} (log scale)`);
    add("text", { x: 12, y: 14 }, "accuracy");
    add("line", { x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#999" });
    add("line", { x1: L, y1: 20, x2: L, y2: H - B, stroke: "#999" });
    if (points.length) {
      const lx = points.map((p) => Math.log10(p.x)), ys = points.map((p) => p.y);
      const [x0, x1] = [Math.min(...lx) - 0.1, Math.max(...lx) + 0.1];
      const [y0, y1] = [Math.min(...ys) - 0.02, Math.max(...ys) + 0.02];
      const sx = (x) => L + ((Math.log10(x) - x0) / (x1 - x0)) * (W - L - 10);
      const sy = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - B - 20);
      add("text", { x: L - 4, y: sy(y1) + 4, "text-anchor": "end" }, num(y1, 3));
      add("text", { x: L - 4, y: sy(y0), "text-anchor": "end" }, num(y0, 3));
      add("text", { x: L, y: H - B + 14 }, num(10 ** x0, 3));
      add("text", { x: W - 10, y: H - B + 14, "text-anchor": "end" }, num(10 ** x1, 3));
      const line = [...front].sort((a, b) => a.x - b.x).map((p) => `${sx(p.x)},${sy(p.y)}`).join(" ");
      add("polyline", { points: line, fill: "none", stroke: "#2459c8", "stroke-dasharray": "4 3" });
      for (const p of points) {
        const dot = add("circle", { cx: sx(p.x), cy: sy(p.y), r: 5, class: front.has(p) ? "front" : "other", "data-id": p.job.id });
        svgNode(dot, "title", {}, `${shortId(p.job.id)}: ${num(p.y)} at ${num(p.x)} ${label}`);
      }
    }
    box.replaceChildren(el("h3", { text: `accuracy vs ${label}` }), svg);
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const params = new URLSearchParams();
    const tag = form.elements.tag.value.trim();
    if (tag) params.set("tag", tag);
    else for (const box of form.querySelectorAll("input[name=job]:checked")) params.append("job", box.value);
    history.replaceState(null, "", `/compare?${params}`);
    load().catch((err) => showError(errorBox, err));
  });
  metricSelect.addEventListener("change", drawCurves);

  candidates().catch((e) => showError(errorBox, e));
  load().catch((e) => showError(errorBox, e));
})();
