// A job's log panel: reads /v1/jobs/{id}/logs?follow=true (NDJSON), which sends the lines
// written so far, then each new line as the worker stores it, and ends once the job has
// ended and every line was sent. A stream cut short (a proxy, the server's time limit)
// is read on from the last line received.
"use strict";
(() => {
  const panel = document.getElementById("log");
  const state = document.getElementById("log-state");
  const id = JSON.parse(document.getElementById("initial-job").textContent).id;
  let after = 0;

  function show(line) {
    after = line.id;
    const time = new Date(line.at).toLocaleTimeString("en-GB");
    const row = document.createElement("div");
    row.className = `log-line ${line.level.toLowerCase()}`;
    row.dataset.id = line.id;
    row.textContent = `${time} ${line.level.padEnd(7)} ${line.message}`;
    const atBottom = panel.scrollTop + panel.clientHeight >= panel.scrollHeight - 4;
    panel.append(row);
    if (atBottom) panel.scrollTop = panel.scrollHeight; // follow, unless the user scrolled up
    panel.dataset.lines = String(panel.children.length);
  }

  async function readStream() {
    const res = await fetch(`/v1/jobs/${id}/logs?follow=true&after=${after}`, {
      headers: { Accept: "application/x-ndjson" }, credentials: "same-origin",
    });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split("\n");
      buffer = lines.pop();
      for (const text of lines) if (text.trim()) show(JSON.parse(text));
    }
  }

  async function jobEnded() {
    const job = await AS.api(`/v1/jobs/${id}`);
    return AS.ended(job.status);
  }

  async function run() {
    panel.dataset.state = "following";
    state.textContent = "following";
    for (let attempt = 0; attempt < 100; attempt++) {
      try {
        await readStream();
        if (await jobEnded()) break;
      } catch (e) {
        state.textContent = `log unavailable (${e.message}); retrying`;
        await new Promise((resolve) => setTimeout(resolve, 2000));
      }
    }
    panel.dataset.state = "ended";
    state.textContent = panel.children.length ? "complete" : "no lines";
  }

  run();
})();
