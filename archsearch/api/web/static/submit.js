// Submit: a form per method built from the specs' JSON schema (defaults as placeholders,
// help from field descriptions), a raw JSON editor on the same draft, and the API's 422
// errors shown next to the field they name. Only the fields the user sets are sent.
"use strict";
(() => {
  const { api, el, showError } = AS;
  const schema = JSON.parse(document.getElementById("spec-schema").textContent);
  const defs = schema.$defs;
  const methodSelect = document.getElementById("method");
  const fieldsBox = document.getElementById("fields");
  const raw = document.getElementById("raw-json");
  const errorBox = document.getElementById("submit-error");
  let datasets = [];
  let draft = { method: methodSelect.value };

  const deref = (s) => (s && s.$ref ? defs[s.$ref.split("/").pop()] : s);

  // A property's schema with $ref and `X | None` unwrapped; `nullable` says the latter.
  function resolve(prop) {
    let s = deref(prop);
    let nullable = false;
    if (s.anyOf) {
      const kinds = s.anyOf.filter((x) => x.type !== "null");
      nullable = kinds.length < s.anyOf.length;
      if (kinds.length === 1) s = { ...deref(kinds[0]), title: prop.title, description: prop.description };
    }
    return { s, nullable };
  }

  function getPath(obj, path) {
    return path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
  }
  function setPath(obj, path, value) {
    const keys = path.split(".");
    let o = obj;
    for (const k of keys.slice(0, -1)) o = o[k] = o[k] && typeof o[k] === "object" ? o[k] : {};
    if (value === undefined) delete o[keys.at(-1)];
    else o[keys.at(-1)] = value;
  }

  function syncRaw() { raw.value = JSON.stringify(draft, null, 2); }

  function field(path, label, help, control) {
    return el("div", { class: "field", "data-field": path },
      el("label", { for: `f-${path}`, text: label }), control,
      help ? el("span", { class: "help", text: help }) : null,
      el("span", { class: "field-error", role: "alert" }));
  }

  function parse(kind, text) {
    if (text === "") return undefined;
    if (kind === "integer") return Number.parseInt(text, 10);
    if (kind === "number") return Number(text);
    if (kind === "boolean") return text === "true";
    if (kind === "json") { try { return JSON.parse(text); } catch { return text; } }
    return text;
  }

  function leaf(path, prop, fallback) {
    const { s } = resolve(prop);
    const def = prop.default !== undefined ? prop.default : fallback;
    const current = getPath(draft, path);
    const shown = def === undefined || def === null ? "" : `default: ${typeof def === "object" ? JSON.stringify(def) : def}`;
    let control;
    let kind = s.type;
    const choices = s.enum || (s.const !== undefined ? [s.const] : null) || (s.type === "boolean" ? [true, false] : null);
    if (choices) {
      control = el("select", { id: `f-${path}`, "data-path": path },
        el("option", { value: "", text: shown || "(unset)" }),
        choices.map((c) => el("option", { value: String(c), text: String(c), selected: current === c })));
      if (s.type === "boolean") kind = "boolean";
    } else if (["integer", "number", "string"].includes(s.type)) {
      control = el("input", { id: `f-${path}`, "data-path": path, placeholder: shown,
        type: s.type === "string" ? "text" : "number", step: s.type === "number" ? "any" : "1",
        value: current === undefined || current === null ? "" : String(current) });
    } else {
      kind = "json";
      control = el("input", { id: `f-${path}`, "data-path": path, placeholder: shown || "JSON",
        value: current === undefined ? "" : JSON.stringify(current) });
    }
    control.addEventListener("change", () => { setPath(draft, path, parse(kind, control.value.trim())); syncRaw(); });
    return field(path, prop.title || s.title || path.split(".").pop(), prop.description || s.description, control);
  }

  // The dataset picker: built-ins by name, uploads by id; the other DatasetRef fields follow.
  function datasetPicker(path) {
    const ref = getPath(draft, path) || {};
    const chosen = ref.id ? `id:${ref.id}` : ref.name ? `name:${ref.name}` : "";
    const control = el("select", { id: `f-${path}.name`, "data-path": `${path}.name`, "data-aliases": `${path} ${path}.id` },
      el("option", { value: "", text: "(pick a dataset)" }),
      datasets.map((d) => {
        const value = d.id ? `id:${d.id}` : `name:${d.name}`;
        return el("option", { value, selected: value === chosen, text: `${d.name} (${d.source}, ${d.num_classes} classes)` });
      }));
    control.addEventListener("change", () => {
      const [kind, value] = control.value.split(/:(.*)/s);
      setPath(draft, `${path}.name`, undefined);
      setPath(draft, `${path}.id`, undefined);
      if (value) setPath(draft, `${path}.${kind}`, value);
      syncRaw();
    });
    return field(`${path}.name`, "Dataset", "a built-in dataset or one of your uploads", control);
  }

  function union(path, prop) {
    const key = prop.discriminator.propertyName;
    const variants = Object.keys(prop.discriminator.mapping);
    const current = getPath(draft, `${path}.${key}`) || prop.default?.[key] || variants[0];
    const select = el("select", { id: `f-${path}.${key}`, "data-path": `${path}.${key}` },
      variants.map((v) => el("option", { value: v, text: v, selected: v === current })));
    select.addEventListener("change", () => { setPath(draft, path, { [key]: select.value }); syncRaw(); render(); });
    const variant = defs[prop.discriminator.mapping[current].split("/").pop()];
    const defaults = prop.default?.[key] === current ? prop.default : {};
    return el("fieldset", {}, el("legend", { text: prop.title || path }),
      field(`${path}.${key}`, key, variant.description, select),
      properties(variant, path, defaults, [key]));
  }

  function properties(objectSchema, prefix, defaults = {}, skip = []) {
    const nodes = [];
    for (const [key, prop] of Object.entries(objectSchema.properties || {})) {
      if (skip.includes(key)) continue;
      const path = prefix ? `${prefix}.${key}` : key;
      if (prop.discriminator) { nodes.push(union(path, prop)); continue; }
      const { s } = resolve(prop);
      if (s.type === "object" && s.properties) {
        const inner = prop.default || defaults?.[key] || {};
        const isDataset = s.title === "DatasetRef";
        nodes.push(el("fieldset", {}, el("legend", { text: prop.title || key }),
          isDataset ? datasetPicker(path) : null,
          properties(s, path, inner, isDataset ? ["name", "id"] : [])));
      } else {
        nodes.push(leaf(path, prop, defaults?.[key]));
      }
    }
    return nodes;
  }

  function render() {
    const method = defs[schema.discriminator.mapping[draft.method].split("/").pop()];
    document.getElementById("method-help").textContent = method.description || "";
    fieldsBox.replaceChildren(...properties(method, "", {}, ["method"]));
    syncRaw();
  }

  function clearErrors() {
    for (const f of fieldsBox.querySelectorAll(".field.invalid")) {
      f.classList.remove("invalid");
      f.querySelector(".field-error").textContent = "";
    }
    showError(errorBox, null);
  }

  // Put each {field, message} next to its input (or its nearest named parent).
  function showFieldErrors(errors) {
    const unplaced = [];
    let first = null;
    for (const { field: name, message } of errors) {
      let path = name.replace(/^query\./, "");
      let input = null;
      while (path && !input) {
        input = fieldsBox.querySelector(`[data-path="${CSS.escape(path)}"]`)
          || [...fieldsBox.querySelectorAll("[data-aliases]")].find((n) => n.dataset.aliases.split(" ").includes(path));
        path = path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "";
      }
      if (!input && name.startsWith("query.tag")) input = document.getElementById("tags");
      const holder = input?.closest(".field");
      if (holder) {
        holder.classList.add("invalid");
        holder.querySelector(".field-error").textContent = message;
        first = first || input;
      } else {
        unplaced.push(`${name}: ${message}`);
      }
    }
    if (unplaced.length) showError(errorBox, new Error(unplaced.join("\n")));
    (first || errorBox).focus?.();
  }

  async function submit(event) {
    event.preventDefault();
    clearErrors();
    const params = new URLSearchParams({ priority: document.getElementById("priority").value });
    for (const tag of document.getElementById("tags").value.split(/[\s,]+/).filter(Boolean)) params.append("tag", tag);
    try {
      const job = await api(`/v1/jobs?${params}`, { method: "POST", json: draft });
      location.href = `/jobs/${job.id}`;
    } catch (e) {
      if (e.fields.length) showFieldErrors(e.fields);
      else showError(errorBox, e);
    }
  }

  methodSelect.addEventListener("change", () => { draft = { method: methodSelect.value }; render(); });
  document.getElementById("apply-json").addEventListener("click", () => {
    try {
      const parsed = JSON.parse(raw.value);
      if (!schema.discriminator.mapping[parsed.method]) throw new Error(`method must be one of ${Object.keys(schema.discriminator.mapping).join(", ")}`);
      draft = parsed;
      methodSelect.value = draft.method;
      render();
      showError(errorBox, null);
    } catch (e) { showError(errorBox, e); }
  });
  document.getElementById("submit-form").addEventListener("submit", submit);

  async function start() {
    try { datasets = (await api("/v1/datasets")).data; } catch (e) { showError(errorBox, e); }
    const from = new URLSearchParams(location.search).get("from");
    if (from) {
      // "Submit again with changes": the job's spec, its tags, ready to edit.
      const job = await api(`/v1/jobs/${from}`);
      draft = job.spec;
      methodSelect.value = draft.method;
      document.getElementById("tags").value = (job.tags || []).join(" ");
    }
    render();
  }
  start().catch((e) => showError(errorBox, e));
})();
