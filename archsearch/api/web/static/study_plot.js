// A study's arms as accuracy against parameters (log x): each arm a colour, mean ± std as
// error bars both ways, the Pareto front as a dashed line. A small SVG, no library: the
// points are few and the error bars are what matters.
"use strict";
(() => {
  const { el, num, svgNode: node } = AS;
  const W = 560, H = 320, L = 56, R = 14, T = 26, B = 40;

  // Ranges that hold every error bar: x in log10 (a bar reaching 0 stops at half the mean).
  function bounds(points) {
    const lo = points.map((p) => Math.log10(Math.max(p.x - p.dx, p.x / 2)));
    const hi = points.map((p) => Math.log10(p.x + p.dx));
    const y0 = Math.min(...points.map((p) => p.y - p.dy)), y1 = Math.max(...points.map((p) => p.y + p.dy));
    return { x0: Math.min(...lo) - 0.1, x1: Math.max(...hi) + 0.1, y0: Math.max(0, y0 - 0.02), y1: Math.min(1, y1 + 0.02) };
  }

  // Decades, or 1-2-5 steps when the range spans under two decades.
  function logTicks(x0, x1) {
    const ticks = [];
    for (let k = Math.floor(x0); k <= Math.ceil(x1); k++) {
      for (const m of x1 - x0 < 2 ? [1, 2, 5] : [1]) {
        const x = m * 10 ** k;
        if (Math.log10(x) >= x0 && Math.log10(x) <= x1) ticks.push(x);
      }
    }
    return ticks;
  }

  function axes(svg, b, sx, sy) {
    node(svg, "line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" });
    node(svg, "line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#999" });
    node(svg, "text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, "parameters (log scale)");
    node(svg, "text", { x: 12, y: 12 }, "test accuracy");
    for (const x of logTicks(b.x0, b.x1)) node(svg, "text", { x: sx(x), y: H - B + 14, "text-anchor": "middle" }, num(x, 2));
    for (let i = 0; i <= 4; i++) {
      const y = b.y0 + ((b.y1 - b.y0) * i) / 4;
      node(svg, "text", { x: L - 4, y: sy(y) + 4, "text-anchor": "end" }, num(y, 3));
    }
  }

  function errorBars(svg, p, sx, sy, color) {
    const [x, y] = [sx(p.x), sy(p.y)];
    const line = (x1, y1, x2, y2) => node(svg, "line", { x1, y1, x2, y2, stroke: color, "stroke-width": 1.2 });
    if (p.dy > 0) {
      line(x, sy(p.y - p.dy), x, sy(p.y + p.dy));
      line(x - 4, sy(p.y - p.dy), x + 4, sy(p.y - p.dy));
      line(x - 4, sy(p.y + p.dy), x + 4, sy(p.y + p.dy));
    }
    if (p.dx > 0) line(sx(Math.max(p.x - p.dx, p.x / 2)), y, sx(p.x + p.dx), y);
  }

  function draw(points, pareto, colorOf) {
    const svg = node(null, "svg", {
      viewBox: `0 0 ${W} ${H}`, class: "scatter pareto", role: "img",
      "aria-label": "test accuracy against parameters, one point an arm",
    });
    const b = bounds(points);
    const sx = (x) => L + ((Math.log10(x) - b.x0) / (b.x1 - b.x0)) * (W - L - R);
    const sy = (y) => H - B - ((y - b.y0) / (b.y1 - b.y0 || 1)) * (H - B - T);
    axes(svg, b, sx, sy);
    const front = [...pareto].sort((p, q) => p.parameters - q.parameters)
      .map((p) => `${sx(p.parameters)},${sy(p.test_accuracy)}`).join(" ");
    node(svg, "polyline", { points: front, fill: "none", stroke: "#1d2430", "stroke-dasharray": "5 4", class: "front-line" });
    for (const p of points) {
      const color = colorOf(p.label);
      errorBars(svg, p, sx, sy, color);
      const dot = node(svg, "circle", { cx: sx(p.x), cy: sy(p.y), r: p.front ? 6 : 5, fill: color,
        stroke: p.front ? "#1d2430" : "#fff", "stroke-width": 1.5, "data-arm": p.label });
      node(dot, "title", {}, `${p.label}: accuracy ${num(p.y, 4)} ± ${num(p.dy, 2)} at ${num(Math.round(p.x))} parameters`);
    }
    return svg;
  }

  function legend(points, colorOf) {
    return el("ul", { class: "legend" }, points.map((p) => el("li", {},
      el("span", { class: "swatch", style: `background:${colorOf(p.label)}` }), p.front ? `${p.label} ★` : p.label)));
  }

  AS.paretoPlot = (container, study, colorOf) => {
    const points = study.arms
      .filter((a) => a.test_accuracy && a.parameters && a.parameters.mean > 0)
      .map((a) => ({ label: a.label, front: a.on_front, x: a.parameters.mean, dx: a.parameters.std || 0,
        y: a.test_accuracy.mean, dy: a.test_accuracy.std || 0 }));
    if (!points.length) return;
    container.replaceChildren(draw(points, study.pareto, colorOf), legend(points, colorOf));
  };
})();
