// Datasets: built-ins beside uploads, an upload with a progress bar, an upload's preview grid
// and class counts, and delete.
"use strict";
(() => {
  const { api, el, showError, num } = AS;
  const errorBox = document.getElementById("datasets-error");

  async function load() {
    try {
      const result = await api("/v1/datasets");
      document.querySelector("#datasets tbody").replaceChildren(...result.data.map((d) => el("tr", { "data-name": d.name },
        el("td", {}, d.id ? el("a", { href: `#${d.id}`, text: d.name, onclick: (e) => { e.preventDefault(); detail(d.id); } }) : d.name),
        el("td", { text: d.source }), el("td", { class: "mono", text: d.input_shape.join("×") }),
        el("td", { class: "num", text: d.num_classes }), el("td", { class: "num", text: `${num(d.train_size)} / ${num(d.test_size)}` }),
        el("td", {}, d.id ? el("button", { class: "danger", text: "Delete", "aria-label": `delete ${d.name}`, onclick: () => remove(d) }) : null))));
      showError(errorBox, null);
    } catch (e) { showError(errorBox, e); }
  }

  async function detail(id) {
    const d = await api(`/v1/datasets/${id}`);
    const box = document.getElementById("detail");
    box.hidden = false;
    document.getElementById("h-detail").textContent = `${d.name} (${d.format}, ${d.kind})`;
    document.getElementById("preview").src = `/v1/datasets/${id}/preview.png`;
    const [train, test] = [d.class_counts.train || [], d.class_counts.test || []];
    const most = Math.max(1, ...train);
    document.querySelector("#class-counts tbody").replaceChildren(...d.class_names.map((name, i) => el("tr", {},
      el("td", { text: name }), el("td", { class: "num", text: train[i] ?? 0 }), el("td", { class: "num", text: test[i] ?? 0 }),
      el("td", {}, el("span", { class: "bar", style: `width:${Math.round(((train[i] || 0) / most) * 160)}px` })))));
    box.scrollIntoView();
  }

  async function remove(d) {
    if (!confirm(`Delete dataset ${d.name}?`)) return;
    try {
      await api(`/v1/datasets/${d.id}`, { method: "DELETE" });
      document.getElementById("detail").hidden = true;
      load();
    } catch (e) { showError(errorBox, e); }
  }

  // XMLHttpRequest, not fetch: only it reports upload progress.
  function upload(event) {
    event.preventDefault();
    const form = event.target;
    const bar = document.getElementById("upload-progress");
    const status = document.getElementById("upload-status");
    const data = new FormData(form);
    if (!data.get("name")) data.delete("name");
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/v1/datasets");
    if (AS.csrf) xhr.setRequestHeader("X-CSRF-Token", AS.csrf);
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = e.loaded / e.total; };
    xhr.onload = () => {
      bar.hidden = true;
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch { body = xhr.responseText; }
      if (xhr.status >= 400) { showError(errorBox, new AS.ApiError(xhr.status, body)); status.textContent = ""; return; }
      status.textContent = `stored ${body.name} (${body.id})`;
      form.reset();
      load().then(() => detail(body.id));
    };
    xhr.onerror = () => { bar.hidden = true; showError(errorBox, new Error("the upload was interrupted")); };
    bar.hidden = false; bar.value = 0; status.textContent = "uploading…";
    xhr.send(data);
  }

  document.getElementById("upload").addEventListener("submit", upload);
  const fromHash = location.hash.slice(1);
  load().then(() => fromHash && detail(fromHash));
})();
