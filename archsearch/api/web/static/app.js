// archsearch dashboard: what every page shares. Numbers come from the /v1 API; live pages
// follow its Server-Sent Event streams and fall back to polling when a stream is missing.
"use strict";

window.AS = (() => {
  const csrf = document.querySelector('meta[name="csrf-token"]')?.content || "";
  // The API's words (job statuses, the terminal ones, the ended study statuses, priority
  // levels), handed over by the page.
  const vocabulary = JSON.parse(document.getElementById("vocabulary").textContent);
  const ended = (status) => vocabulary.terminal.includes(status);
  const studyEnded = (status) => vocabulary.study_ended.includes(status);
  const priorityName = (level) =>
    Object.keys(vocabulary.priorities).find((name) => vocabulary.priorities[name] === level) ?? String(level);

  class ApiError extends Error {
    constructor(status, body) {
      super(describe(body) || `HTTP ${status}`);
      this.status = status;
      this.body = body;
    }
    // [{field, message}] of a 422, else [].
    get fields() {
      return Array.isArray(this.body?.detail) ? this.body.detail : [];
    }
  }

  function describe(body) {
    if (!body || typeof body !== "object") return String(body || "");
    const d = body.detail;
    if (Array.isArray(d)) return d.map((e) => `${e.field}: ${e.message}`).join("\n");
    return d || body.error || "";
  }

  async function api(path, opts = {}) {
    const headers = { Accept: "application/json", ...(opts.headers || {}) };
    let body = opts.body;
    if (opts.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(opts.json);
    }
    // The session's CSRF token (team mode): every state-changing request carries it.
    if (csrf) headers["X-CSRF-Token"] = csrf;
    const res = await fetch(path, { method: opts.method || "GET", headers, body, credentials: "same-origin" });
    if (res.status === 401 && document.body.dataset.page !== "signin") {
      location.href = "/signin?next=" + encodeURIComponent(location.pathname + location.search);
    }
    let data = null;
    if (res.status !== 204) {
      const type = res.headers.get("content-type") || "";
      data = type.includes("json") ? await res.json() : await res.text();
    }
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }

  // el("td", {class: "num", text: "3"}, child, ...): attributes, then children.
  // An SVG element appended to `parent` (null: a plot's own root): the scatter plots draw with it.
  function svgNode(parent, tag, attrs, text) {
    const n = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    if (parent) parent.append(n);
    return n;
  }

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function showError(node, error) {
    node.textContent = error ? error.message || String(error) : "";
    node.hidden = !error;
  }

  function num(value, digits = 4) {
    if (value === null || value === undefined || Number.isNaN(value)) return "–";
    if (Math.abs(value) >= 1e4 && Number.isInteger(value)) return value.toLocaleString("en");
    if (Number.isInteger(value)) return String(value);
    return Number(value).toPrecision(digits).replace(/\.?0+$/, "");
  }

  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return `${i ? n.toFixed(1) : n} ${units[i]}`;
  }

  function when(iso) {
    if (!iso) return "–";
    const d = new Date(iso);
    return d.toLocaleString("en-GB", { dateStyle: "short", timeStyle: "medium" });
  }

  function badge(status) {
    return el("span", { class: `badge ${status}`, text: status });
  }

  function datasetOf(spec) {
    const ref = spec?.dataset || {};
    return ref.name || ref.id || "";
  }

  function shortId(id) {
    return String(id).slice(0, 8);
  }

  // Follow an SSE stream: `handlers` maps event names to functions of the parsed data. When
  // the stream cannot be opened at all, `poll()` starts a polling loop and returns its stop.
  function follow(url, handlers, poll) {
    let opened = false;
    let stopPolling = null;
    const source = new EventSource(url);
    // Which way the page is live ("stream" or "poll"): shown to tests and to curious users.
    source.onopen = () => { opened = true; document.body.dataset.live = "stream"; };
    for (const [name, fn] of Object.entries(handlers)) {
      source.addEventListener(name, (e) => {
        fn(JSON.parse(e.data));
        if (name === "end") source.close(); // the stream ends after the terminal event
      });
    }
    source.onerror = () => {
      // Before any open, or closed for good: no stream here; poll instead. After an open,
      // the browser reconnects by itself with Last-Event-ID.
      if ((!opened || source.readyState === EventSource.CLOSED) && !stopPolling) {
        source.close();
        document.body.dataset.live = "poll";
        stopPolling = poll ? poll() : null;
      }
    };
    return () => { source.close(); if (stopPolling) stopPolling(); };
  }

  function every(ms, fn) {
    let stopped = false;
    const tick = async () => {
      if (stopped) return;
      try { await fn(); } catch (e) { console.warn(e); }
      if (!stopped) setTimeout(tick, ms);
    };
    setTimeout(tick, ms);
    return () => { stopped = true; };
  }

  // A uPlot line chart: `series` is [{label, points: [[x, y], ...]}], x shared after a join.
  function lineChart(container, title, series, opts = {}) {
    const width = Math.max(280, Math.min(container.clientWidth || 520, 640));
    const tables = series.map((s) => [s.points.map((p) => p[0]), s.points.map((p) => p[1])]);
    const data = tables.length ? uPlot.join(tables) : [[]];
    const colors = ["#2459c8", "#c2410c", "#15803d", "#7c3aed", "#b91c1c", "#0e7490", "#a16207", "#be185d"];
    // Away from the cursor the legend reads each series' last value (and the last step),
    // where uPlot would print "--" until the first hover.
    const lastOf = (u, i) => {
      const values = u.data[i] || [];
      for (let k = values.length - 1; k >= 0; k--) if (values[k] != null) return values[k];
      return null;
    };
    const value = (u, v, i, idx) => num(idx == null ? lastOf(u, i) : v);
    const options = {
      title, width, height: opts.height || 220,
      scales: { x: { time: false } },
      axes: [{ label: opts.xLabel || "step" }, { size: 72, values: (u, ticks) => ticks.map((t) => num(t, 3)) }],
      series: [{ label: opts.xLabel || "step", value },
        ...series.map((s, i) => ({ label: s.label, stroke: colors[i % colors.length], width: 1.5, spanGaps: true, value }))],
    };
    return new uPlot(options, data, container);
  }

  return { api, ApiError, el, svgNode, showError, num, bytes, when, badge, datasetOf, shortId, follow, every, lineChart, csrf, vocabulary, ended, studyEnded, priorityName };
})();
