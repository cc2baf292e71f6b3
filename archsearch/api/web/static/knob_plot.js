// Any knob against any metric: one point a job, x a spec field (hyper-parameter) or a
// metric, y a metric, both picked from selects. A small SVG like the Pareto plots: the
// points are few, and a text knob (an optimizer's name) gets one column a value.
"use strict";
(() => {
  const { el, num, shortId, svgNode: node } = AS;
  const W = 520, H = 300, L = 60, R = 14, T = 16, B = 42;

  function valueAt(job, key) {
    const [source, ...path] = key.split(".");
    if (source === "metrics") return job.latest_metrics[path.join(".")];
    let v = job.spec;
    for (const part of path) v = v && typeof v === "object" ? v[part] : undefined;
    return v;
  }

  // Every plain spec field and every metric of the jobs; the fields whose value differs
  // between the jobs first (those are the knobs a comparison is about).
  function candidates(jobs) {
    const spec = new Set(), metrics = new Set();
    const walk = (v, path) => {
      if (v && typeof v === "object" && !Array.isArray(v)) for (const [k, c] of Object.entries(v)) walk(c, `${path}.${k}`);
      else if (["number", "string", "boolean"].includes(typeof v)) spec.add(path);
    };
    for (const job of jobs) {
      walk(job.spec, "spec");
      for (const [name, v] of Object.entries(job.latest_metrics)) if (typeof v === "number") metrics.add(`metrics.${name}`);
    }
    const varies = (k) => new Set(jobs.map((j) => JSON.stringify(valueAt(j, k) ?? null))).size > 1;
    const knobs = [...spec].sort((a, b) => varies(b) - varies(a) || a.localeCompare(b));
    return { knobs: [...knobs, ...[...metrics].sort()], metrics: [...metrics].sort(), varies };
  }

  // x as a scale: numbers linear (log when all positive over two decades), text by category.
  function xScale(values) {
    if (values.every((v) => typeof v === "number")) {
      const log = values.every((v) => v > 0) && Math.max(...values) / Math.min(...values) >= 50;
      const f = log ? Math.log10 : (v) => v;
      const [lo, hi] = [Math.min(...values.map(f)), Math.max(...values.map(f))];
      const pad = (hi - lo) * 0.05 || 1;
      return { at: (v) => L + ((f(v) - lo + pad) / (hi - lo + 2 * pad)) * (W - L - R), ticks: [...new Set(values)].length <= 6 ? [...new Set(values)] : [Math.min(...values), Math.max(...values)], log };
    }
    const cats = [...new Set(values.map(String))].sort();
    return { at: (v) => L + ((cats.indexOf(String(v)) + 0.5) / cats.length) * (W - L - R), ticks: cats, log: false };
  }

  function draw(points, knob, metric, colorOf) {
    const svg = node(null, "svg", {
      viewBox: `0 0 ${W} ${H}`, class: "scatter knob", role: "img", "aria-label": `${metric} against ${knob}`,
    });
    const x = xScale(points.map((p) => p.x));
    const ys = points.map((p) => p.y);
    const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    const pad = (y1 - y0) * 0.08 || Math.abs(y0) * 0.05 || 1;
    const sy = (y) => H - B - ((y - y0 + pad) / (y1 - y0 + 2 * pad)) * (H - B - T);
    node(svg, "line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" });
    node(svg, "line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#999" });
    node(svg, "text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, x.log ? `${knob} (log scale)` : knob);
    for (const t of x.ticks) node(svg, "text", { x: x.at(t), y: H - B + 14, "text-anchor": "middle" }, typeof t === "number" ? num(t, 3) : t);
    for (const y of [y0, (y0 + y1) / 2, y1]) node(svg, "text", { x: L - 4, y: sy(y) + 4, "text-anchor": "end" }, num(y, 3));
    for (const p of points) {
      const dot = node(svg, "circle", { cx: x.at(p.x), cy: sy(p.y), r: 5, fill: colorOf(p.job), stroke: "#fff", "stroke-width": 1.2, "data-id": p.job.id });
      node(dot, "title", {}, `${shortId(p.job.id)}: ${metric} ${num(p.y)} at ${knob} ${typeof p.x === "number" ? num(p.x) : p.x}`);
    }
    return svg;
  }

  // Fill `box` with the two selects and the plot of `jobs`; `state` ({knob, metric}) is the
  // pick kept across redraws, `onPick` hears each new pick (to keep it in the URL).
  AS.knobPlot = (box, jobs, { state = {}, colorOf = () => "#2459c8", onPick = () => {} } = {}) => {
    const { knobs, metrics, varies } = candidates(jobs);
    const pick = (list, wanted, fallback) => (list.includes(wanted) ? wanted : fallback);
    state.knob = pick(knobs, state.knob, knobs.find(varies) || knobs[0]);
    state.metric = pick(metrics, state.metric, metrics.includes("metrics.test_accuracy") ? "metrics.test_accuracy" : metrics[0]);
    const select = (name, list, value) => el("select", { name, "aria-label": name },
      list.map((k) => el("option", { value: k, text: k, selected: k === value })));
    const knobSelect = select("knob", knobs, state.knob), metricSelect = select("metric", metrics, state.metric);
    const figure = el("div", { class: "knob-figure" });
    const redraw = () => {
      state.knob = knobSelect.value; state.metric = metricSelect.value;
      const points = jobs.map((job) => ({ job, x: valueAt(job, state.knob), y: valueAt(job, state.metric) }))
        .filter((p) => typeof p.y === "number" && Number.isFinite(p.y) && p.x !== undefined && p.x !== null);
      figure.dataset.points = String(points.length);
      figure.replaceChildren(points.length ? draw(points, state.knob, state.metric, colorOf)
        : el("p", { class: "muted", text: "No job has both values." }));
    };
    knobSelect.addEventListener("change", () => { redraw(); onPick(state); });
    metricSelect.addEventListener("change", () => { redraw(); onPick(state); });
    box.replaceChildren(el("div", { class: "filters" }, el("label", {}, "Knob ", knobSelect), el("label", {}, "Metric ", metricSelect)), figure);
    if (knobs.length && metrics.length) redraw();
  };
})();
