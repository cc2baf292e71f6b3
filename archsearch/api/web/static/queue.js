// Queue and workers: the team's limits and hold, waiting jobs in scheduler order with why
// they wait, running jobs, workers with device, memory, heartbeat age and current job, and
// device time over the quota's window. Redrawn when a job changes.
"use strict";
(() => {
  const { api, el, showError, shortId, follow, every } = AS;
  const jobLink = (id) => el("a", { href: `/jobs/${id}`, class: "mono", text: shortId(id) });

  // How long a job has waited since it was submitted: 42s, 3m05s, 2h10m.
  function waited(createdAt) {
    const s = Math.max(0, Math.round((Date.now() - new Date(createdAt)) / 1000));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
    return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  }

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
        el("td", { text: j.device }), el("td", { class: "num", text: waited(j.created_at) }),
        el("td", { text: j.study_id ? `${shortId(j.study_id)} / ${j.study_arm || ""}` : "–" }),
        el("td", { text: j.owner_name || (j.owner_id ? shortId(j.owner_id) : "local") }),
        el("td", { text: j.pending_reason || "" }))), "No job waits.");
      fill("running", q.running.map((j) => el("tr", { "data-id": j.id },
        el("td", {}, jobLink(j.id)), el("td", { text: j.method }),
        el("td", {}, el("progress", { max: 1, value: j.progress, "aria-label": `progress of ${shortId(j.id)}` })),
        el("td", { text: j.worker || "" }))), "No job runs.");
      fill("teams", (q.teams || []).map(teamRow), "No team (embedded mode has no quotas).");
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

  // The API's default window, the last 7 days up to now: the window the weekly quota counts.
  async function loadUsage() {
    try {
      const u = await api("/v1/usage?group_by=team");
      document.getElementById("usage-window").textContent =
        `From ${AS.when(u.start)} to ${AS.when(u.end)} (the last 7 days, rolling: the window the weekly quota counts)`;
      fill("usage", u.data.map((r) => el("tr", { "data-team": r.group, "data-device": r.device },
        el("td", { text: r.group }), el("td", { text: r.device }),
        el("td", { class: "num", text: AS.num(r.device_hours) }),
        el("td", { class: "num", text: String(r.jobs) }))), "No device time in the last 7 days.");
    } catch (e) {
      showError(document.getElementById("queue-error"), e);
    }
  }

  // A team's limits: running against its limit, device-hours against its quota, its hold.
  function teamRow(t) {
    const limit = t.max_running === null ? "no limit" : String(t.max_running);
    const quota = t.weekly_device_hours === null ? "no quota" : `${AS.num(t.weekly_device_hours)} h`;
    return el("tr", { "data-team": t.team },
      el("td", { text: t.team }),
      el("td", { class: "num", "data-col": "running", text: `${t.running} / ${limit}` }),
      el("td", { class: "num", "data-col": "hours", text: `${AS.num(t.device_hours_used, 3)} h / ${quota}` }),
      el("td", { "data-col": "held", class: t.held ? "error" : "", text: t.held ? `held: ${t.held_reason}` : "not held" }));
  }

  let pending = null;
  const soon = () => { if (!pending) pending = setTimeout(() => { pending = null; load(); }, 300); };
  load();
  loadUsage();
  every(5000, load); // heartbeat ages move even when no job does
  every(30000, loadUsage);
  follow("/v1/jobs/stream", { job: soon }, null);
})();
