// Queue and workers: waiting jobs in scheduler order with why they wait, running jobs, and
// workers with device, memory, heartbeat age and current job. Redrawn when a job changes.
"use strict";
(() => {
  const { api, el, showError, shortId, follow, every } = AS;
  const jobLink = (id) => el("a", { href: `/jobs/${id}`, class: "mono", text: shortId(id) });

  // A table with no rows says so, in one cell across it.
  function fill(id, rows, empty) {
    const columns = document.querySelectorAll(`#${id} thead th`).length;
    document.querySelector(`#${id} tbody`).replaceChildren(
      ...(rows.length ? rows : [el("tr", {}, el("td", { colspan: columns, class: "muted", text: empty }))]));
  }

  async function load() {
    try {
      const q = await api("/v1/queue");
      fill("waiting", q.waiting.map((j) => el("tr", { "data-id": j.id },
        el("td", { class: "num", text: j.queue_position ?? "–" }), el("td", {}, jobLink(j.id)),
        el("td", { text: j.method }), el("td", { text: AS.priorityName(j.priority) }),
        el("td", { text: j.device }), el("td", { text: j.pending_reason || "" }))), "No job waits.");
      fill("running", q.running.map((j) => el("tr", { "data-id": j.id },
        el("td", {}, jobLink(j.id)), el("td", { text: j.method }),
        el("td", {}, el("progress", { max: 1, value: j.progress, "aria-label": `progress of ${shortId(j.id)}` })),
        el("td", { text: j.worker || "" }))), "No job runs.");
      fill("workers", q.workers.map((w) => el("tr", {},
        el("td", { text: w.name }),
        el("td", { text: w.device_name ? `${w.device} (${w.device_name})` : w.device }),
        el("td", { text: w.gpu_memory_gb ? `${w.gpu_memory_gb.toFixed(1)} GB` : "–" }),
        el("td", { text: `${w.heartbeat_age_seconds.toFixed(0)} s ago${w.alive ? "" : " (lost)"}` }),
        el("td", {}, w.current_job_id ? jobLink(w.current_job_id) : w.busy ? "busy (another team)" : "idle"))),
        "No worker has reported (embedded serve runs jobs inside the API process).");
      showError(document.getElementById("queue-error"), null);
    } catch (e) {
      showError(document.getElementById("queue-error"), e);
    }
  }

  let pending = null;
  const soon = () => { if (!pending) pending = setTimeout(() => { pending = null; load(); }, 300); };
  load();
  every(5000, load); // heartbeat ages move even when no job does
  follow("/v1/jobs/stream", { job: soon }, null);
})();
