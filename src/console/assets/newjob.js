// New job: a form that produces the JSON of POST /v1/jobs (shown as it is edited, so users learn
// the API) and shows the API's 422 errors next to the field they name.

import { api } from "./api.js";
import { h, fill, notice } from "./ui.js";

const ROLES = ["insensitive", "quasi_identifying", "sensitive", "identifying"];
const QUALITY = ["loss", "aecs", "discernibility", "discernibility-star", "precision", "height", "entropy",
  "normalized-entropy", "kl-divergence", "ambiguity"];
const LOCAL_METHODS = [
  ["", "global: one transformation for every record"],
  ["auto", "local: auto (sweep for k-anonymity, else steps)"],
  ["sweep", "local: sweep over the transformations"],
  ["steps", "local: ARX's steps"],
];
const ALGORITHMS = ["auto", "flash", "lightning", "top-down", "genetic", "bfs", "datafly", "improved-greedy", "exhaustive"];

/** A labelled field with its error slot; `path` is the specification field it edits. */
function field(path, label, control, hint) {
  const id = control.id;
  const err = h("div", { class: "field-error", id: id + "-error", role: "alert" });
  control.setAttribute("aria-describedby", id + "-error");
  return h("div", { class: "field", "data-field": path }, h("label", { for: id }, label), control,
    hint ? h("div", { class: "muted" }, hint) : null, err);
}

/** The error slot of the field `path` names (or of its closest parent field). */
function slotFor(form, path) {
  let p = path || "";
  while (p) {
    const f = [...form.querySelectorAll("[data-field]")].find((x) => x.dataset.field === p);
    if (f) return f;
    const cut = Math.max(p.lastIndexOf("."), p.lastIndexOf("["));
    p = cut > 0 ? p.slice(0, cut) : "";
  }
  return null;
}

/** Every item of a list, page by page (at most 50 pages of 100). */
async function allPages(base, signal) {
  const items = [];
  let cursor = null;
  for (let i = 0; i < 50; i++) {
    const q = new URLSearchParams({ limit: "100" });
    if (cursor) q.set("cursor", cursor);
    const page = await api(`${base}?${q}`, { signal });
    items.push(...page.items);
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return items;
}

/** #/new and #/new?dataset={id} */
export async function newJob(main, [datasetId], signal) {
  const page = { items: await allPages("/v1/datasets", signal) };
  main.append(h("h1", null, "New job"));
  if (!page.items.length) {
    main.append(h("p", null, "Upload a dataset first: ", h("a", { href: "#/datasets" }, "Datasets"), "."));
    return;
  }
  const dataset = h("select", { id: "dataset" }, page.items.map((d) => h("option", { value: d.id }, `${d.name} (${d.id})`)));
  if (datasetId && page.items.some((d) => d.id === datasetId)) dataset.value = datasetId;
  const columns = h("div", { id: "columns" });
  const privacy = h("textarea", { id: "privacy", rows: 3, spellcheck: "false" });
  privacy.value = "k-anonymity(k=2)";
  const suppression = h("input", { id: "suppression_limit", type: "number", min: 0, max: 1, step: "0.01", value: "0.05" });
  const quality = h("select", { id: "quality" }, QUALITY.map((q) => h("option", { value: q }, q)));
  const algorithm = h("select", { id: "algorithm" }, ALGORITHMS.map((a) => h("option", { value: a }, a)));
  const timeLimit = h("input", { id: "time_limit", type: "text", value: "30s", size: 8 });
  const localMethod = h("select", { id: "local_method" }, LOCAL_METHODS.map(([v, label]) => h("option", { value: v }, label)));
  const candidates = h("input", { id: "candidates", type: "number", min: 0, max: 100, step: 1, placeholder: "20" });
  const preview = h("pre", { id: "job-json", "aria-live": "off" });
  const formError = h("div", { id: "form-error" });
  const submit = h("button", { type: "submit", id: "submit-job" }, "Create job");
  const form = h("form", { id: "job-form", novalidate: true },
    field("dataset_id", "Dataset", dataset),
    h("fieldset", { "data-field": "attributes" }, h("legend", null, "Columns: role and hierarchy"), columns,
      h("div", { class: "field-error", id: "attributes-error", role: "alert" })),
    field("privacy", "Privacy models (one per line: compact text or a JSON object)", privacy,
      "e.g. k-anonymity(k=5), distinct-l-diversity(attribute=disease,l=2), differential-privacy(epsilon=1,delta=1e-6)"),
    h("div", { class: "grid" },
      field("suppression_limit", "Suppression limit (share of records)", suppression),
      field("quality", "Quality model", quality),
      field("algorithm", "Algorithm", algorithm),
      field("local.method", "Generalization", localMethod,
        "local: records of different groups get different transformations"),
      field("time_limit", "Time limit", timeLimit, "milliseconds or 500ms, 30s, 5m"),
      field("candidates", "Candidates to keep", candidates,
        "other anonymous transformations listed on the job page (0–100, default 20)")),
    formError,
    h("p", null, submit));
  main.append(h("div", { class: "grid" }, form,
    h("div", null, h("h2", null, "The request this form sends"), h("p", { class: "muted" }, "POST /v1/jobs with this body:"), preview)));

  let current = null;
  const rows = [];
  const loadColumns = async () => {
    current = await api(`/v1/datasets/${dataset.value}`, { signal });
    rows.length = 0;
    fill(columns, current.columns.map((c, i) => {
      const role = h("select", { id: `role-${i}`, "data-column": c.name }, ROLES.map((r) => h("option", { value: r }, r)));
      const source = h("select", { id: `hierarchy-${i}` },
        current.hierarchies[c.name] !== undefined ? h("option", { value: "stored" }, "stored hierarchy") : null,
        c.suggested_hierarchy ? h("option", { value: "suggested" }, "suggested builder") : null,
        h("option", { value: "custom" }, "builder (JSON)"));
      const custom = h("textarea", { id: `custom-${i}`, rows: 3, hidden: true, spellcheck: "false" });
      custom.value = JSON.stringify(c.suggested_hierarchy || { type: "suppression" });
      const err = h("div", { class: "field-error", id: `column-${i}-error`, role: "alert" });
      role.setAttribute("aria-describedby", err.id);
      rows.push({ c, role, source, custom });
      return h("div", { class: "field row", "data-field": "attributes." + c.name },
        h("div", null, h("label", { for: role.id }, c.name + " (" + c.detected_type + ")"), role),
        h("div", null, h("label", { for: source.id }, "Hierarchy"), source),
        h("div", { class: "grow" }, h("label", { for: custom.id, class: "muted" }, "Builder specification"), custom), err);
    }));
    for (const r of rows) {
      const sync = () => {
        const qi = r.role.value === "quasi_identifying";
        r.source.disabled = !qi;
        r.custom.hidden = !qi || r.source.value !== "custom";
      };
      r.role.addEventListener("change", sync);
      r.source.addEventListener("change", sync);
      sync();
    }
    render();
  };

  const build = () => {
    const spec = { dataset_id: dataset.value, attributes: {}, privacy: [] };
    for (const r of rows) {
      if (r.role.value === "insensitive") continue;
      const a = { type: r.role.value };
      if (r.role.value === "quasi_identifying") {
        if (r.source.value === "stored") a.hierarchy = { stored: true };
        else if (r.source.value === "suggested") a.hierarchy = r.c.suggested_hierarchy;
        else {
          try {
            a.hierarchy = JSON.parse(r.custom.value);
          } catch (_) {
            a.hierarchy = r.custom.value; // sent as is: the API names the field
          }
        }
      }
      spec.attributes[r.c.name] = a;
    }
    for (const line of privacy.value.split("\n").map((l) => l.trim()).filter(Boolean)) {
      if (line.startsWith("{")) {
        try {
          spec.privacy.push(JSON.parse(line));
          continue;
        } catch (_) { /* sent as text */ }
      }
      spec.privacy.push(line);
    }
    if (suppression.value !== "") spec.suppression_limit = Number(suppression.value);
    spec.quality = quality.value;
    spec.algorithm = algorithm.value;
    if (localMethod.value) spec.local = { method: localMethod.value };
    if (timeLimit.value.trim()) spec.time_limit = /^\d+$/.test(timeLimit.value.trim()) ? Number(timeLimit.value.trim()) : timeLimit.value.trim();
    if (candidates.value.trim() !== "") {
      const n = Number(candidates.value.trim());
      spec.candidates = Number.isFinite(n) ? n : candidates.value.trim(); // the API names a bad value
    }
    return spec;
  };
  const render = () => fill(preview, JSON.stringify(build(), null, 2));
  const clearErrors = () => {
    for (const e of form.querySelectorAll(".field-error")) fill(e);
    for (const e of form.querySelectorAll("[aria-invalid]")) e.removeAttribute("aria-invalid");
    fill(formError);
  };

  form.addEventListener("input", render);
  form.addEventListener("change", render);
  dataset.addEventListener("change", () => loadColumns().catch((e) => fill(formError, notice(e))));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors();
    submit.disabled = true;
    try {
      const job = await api("/v1/jobs", { method: "POST", json: build() });
      location.hash = "#/jobs/" + job.id;
    } catch (err) {
      const slot = err.details && err.details.field ? slotFor(form, err.details.field) : null;
      if (slot) {
        const box = slot.querySelector(":scope > .field-error");
        fill(box, `${err.details.field}: ${err.message}`);
        const control = slot.querySelector("input, select, textarea");
        if (control) {
          control.setAttribute("aria-invalid", "true");
          control.focus();
        }
      } else {
        fill(formError, notice(err));
      }
    }
    submit.disabled = false;
  });
  await loadColumns();
}
