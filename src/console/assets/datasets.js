// Datasets: the list, an upload with a progress bar, the column profile and the preview of a
// hierarchy built from a builder specification (which can then be stored for the column).

import { api, upload } from "./api.js";
import { h, fill, table, num, bytes, notice, Pager, listPath } from "./ui.js";

/** #/datasets */
export async function datasetList(main, _params, signal) {
  const list = h("div", { id: "dataset-list" });
  const file = h("input", { type: "file", id: "upload-file", accept: ".csv,text/csv,text/plain", required: true });
  const name = h("input", { type: "text", id: "upload-name", placeholder: "the file's name" });
  const bar = h("progress", { id: "upload-progress", max: 1, value: 0, hidden: true, "aria-label": "upload progress" });
  const state = h("p", { id: "upload-state", "aria-live": "polite" });
  const form = h("form", { id: "upload-form", class: "panel" },
    h("h2", null, "Upload a CSV"),
    h("div", { class: "row" },
      h("div", null, h("label", { for: "upload-file" }, "CSV file"), file),
      h("div", null, h("label", { for: "upload-name" }, "Name (optional)"), name),
      h("button", { type: "submit", id: "upload-button" }, "Upload")),
    h("p", { class: "muted" }, "The delimiter is detected from the first line; the first record is the header."),
    bar, state);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = file.files[0];
    if (!f) return;
    bar.hidden = false;
    bar.value = 0;
    fill(state, "Uploading…");
    const q = new URLSearchParams({ name: name.value.trim() || f.name });
    try {
      const d = await upload("/v1/datasets?" + q, f, (sent, total) => {
        bar.value = total ? sent / total : 0;
        fill(state, `Uploading… ${bytes(sent)} of ${bytes(total)}`);
      });
      bar.value = 1;
      fill(state, `Stored: ${d.rows} rows, ${d.columns.length} columns.`);
      location.hash = "#/datasets/" + d.id;
    } catch (err) {
      fill(state, notice(err));
    }
  });
  const pager = new Pager("datasets-pager", async (cursor) => {
    const page = await api(listPath("/v1/datasets", cursor), { signal });
    fill(list, page.items.length
      ? table(["Name", "#Rows", "#Columns", "#Size", "Created", ""], page.items.map((d) => [
        h("a", { href: "#/datasets/" + d.id }, d.name), num(d.rows, 0), d.columns.length, bytes(d.size_bytes),
        new Date(d.created_at).toLocaleString(), h("a", { href: "#/new?dataset=" + d.id }, "New job")]), { id: "datasets-table" })
      : h("p", null, "No datasets yet."));
    return page;
  });
  main.append(h("h1", null, "Datasets"), form, h("h2", null, "Stored datasets"), list, pager.el);
  await pager.refresh();
}

/** #/datasets/{id} */
export async function datasetPage(main, [id], signal) {
  const d = await api(`/v1/datasets/${id}`, { signal });
  const kinds = d.hierarchy_kinds || {};
  main.append(
    h("h1", null, "Dataset ", h("span", { id: "dataset-name" }, d.name)),
    h("p", null, `${num(d.rows, 0)} rows · ${d.columns.length} columns · ${bytes(d.size_bytes)} · delimiter `,
      h("code", null, d.delimiter), " · ", h("a", { href: "#/new?dataset=" + d.id, class: "button" }, "New job with this dataset")),
    h("h2", null, "Column profile"),
    table(["Column", "Detected type", "#Distinct", "Missing markers", "Stored hierarchy", "Suggested hierarchy"],
      d.columns.map((c) => [
        c.name,
        c.detected_type + (c.date_format ? ` (${c.date_format})` : "") + (c.code_length ? ` (${c.code_length} digits)` : ""),
        num(c.distinct_count, 0),
        (c.missing || []).map((m) => JSON.stringify(m)).join(", ") || "—",
        d.hierarchies[c.name] !== undefined ? `${d.hierarchies[c.name]} levels (${kinds[c.name] || "csv"})` : "—",
        c.suggested_hierarchy ? h("code", null, JSON.stringify(c.suggested_hierarchy)) : "—",
      ]), { id: "profile-table" }));

  // Hierarchy preview from a builder specification.
  const column = h("select", { id: "preview-column" }, d.columns.map((c) => h("option", { value: c.name }, c.name)));
  const spec = h("textarea", { id: "preview-spec", rows: 5, spellcheck: "false" });
  const out = h("div", { id: "preview-result", "aria-live": "polite" });
  const suggest = () => {
    const c = d.columns.find((x) => x.name === column.value);
    spec.value = JSON.stringify((c && c.suggested_hierarchy) || { type: "suppression" }, null, 2);
  };
  column.addEventListener("change", suggest);
  suggest();
  const parse = () => {
    try {
      return JSON.parse(spec.value);
    } catch (e) {
      fill(out, notice(new Error("the specification is not JSON: " + e.message)));
      return null;
    }
  };
  const preview = h("button", { type: "submit", id: "preview-button" }, "Preview");
  const store = h("button", { type: "button", id: "store-button", class: "secondary" }, "Store for this column");
  const form = h("form", { class: "panel", id: "preview-form" },
    h("div", { class: "row" }, h("div", null, h("label", { for: "preview-column" }, "Column"), column)),
    h("label", { for: "preview-spec" }, "Builder specification (JSON; prefilled with the suggestion)"), spec,
    h("div", { class: "row" }, preview, store), out);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = parse();
    if (!body) return;
    try {
      const t = await api(`/v1/datasets/${id}/hierarchies/${encodeURIComponent(column.value)}/preview?limit=50`, { method: "POST", json: body });
      const levels = Array.from({ length: t.levels }, (_, i) => (i === 0 ? "Value" : "Level " + i));
      fill(out, h("p", null, `${t.levels} levels, ${t.total_rows ?? t.rows.length} values` + (t.total_rows > t.rows.length ? ` (first ${t.rows.length} shown)` : "") + "."),
        table(levels, t.rows, { id: "preview-table" }));
    } catch (err) {
      fill(out, notice(err));
    }
  });
  store.addEventListener("click", async () => {
    const body = parse();
    if (!body) return;
    try {
      await api(`/v1/datasets/${id}/hierarchies/${encodeURIComponent(column.value)}`, { method: "PUT", json: body });
      fill(out, h("p", { role: "status" }, `Stored the hierarchy of '${column.value}'.`));
    } catch (err) {
      fill(out, notice(err));
    }
  });
  main.append(h("h2", null, "Hierarchy preview"), form);
}
