// Choosing and comparing on the job page: the candidates of a search (the best anonymous
// transformations it checked, each one a click away from an evaluate job that releases it) and
// the utility analysis (per attribute, the most frequent values before and after, and the
// post-hoc quality).

import { api } from "./api.js";
import { h, fill, table, num, notice } from "./ui.js";

/** Why a report lists no candidates (null: it has some). */
function noCandidates(job, r) {
  if (job.task !== "anonymize") return "An evaluation checks one given transformation; candidates come from a search.";
  if (r.differential_privacy) {
    return "With differential privacy the search chooses its transformation privately: listing the other " +
      "transformations it checked would disclose choices that are not private, so there are none.";
  }
  if (!r.candidates) return "Local generalization releases several transformations at once; it lists no candidates.";
  if (!r.candidates.length) return "The search found no anonymous transformation.";
  return null;
}

/** The candidates table with per-attribute levels; a button starts an evaluate job on one. */
export function showCandidates(box, job, r, signal) {
  const why = noCandidates(job, r);
  if (why) {
    fill(box, h("p", { class: "muted", id: "candidates-none" }, why));
    return;
  }
  const qis = r.quasi_identifiers || Object.keys(r.candidates[0].transformation);
  const best = r.candidates[0].levels;
  const error = h("div", { id: "candidates-error" });
  const start = async (c, button) => {
    button.disabled = true;
    fill(error);
    try {
      const spec = await api(`/v1/jobs/${job.id}/spec`, { signal });
      delete spec.candidates;
      spec.task = "evaluate";
      spec.levels = c.transformation;
      const created = await api("/v1/jobs", { method: "POST", json: spec });
      location.hash = "#/jobs/" + created.id;
    } catch (e) {
      if (!signal.aborted) fill(error, notice(e));
      button.disabled = false;
    }
  };
  const rows = r.candidates.map((c, i) => {
    const button = h("button", { type: "button", class: "secondary candidate-evaluate", "data-index": i },
      i === 0 ? "Evaluate again" : "Evaluate and release");
    button.addEventListener("click", () => start(c, button));
    const levels = qis.map((q, k) => {
      const level = c.levels[k] ?? c.transformation[q];
      const diff = level - best[k];
      return h("span", { class: diff ? (diff > 0 ? "coarser" : "finer") : null, title: diff ? `${diff > 0 ? "+" : ""}${diff} vs the result` : null }, String(level));
    });
    return [i === 0 ? "1 (result)" : String(i + 1), ...levels, num(c.utility), num(c.suppressed_rows, 0), button];
  });
  fill(box,
    h("p", { class: "muted" }, `The ${r.candidates.length} best anonymous transformations the search checked (level per attribute; `,
      h("span", { class: "coarser" }, "coarser"), " or ", h("span", { class: "finer" }, "finer"),
      " than the result). Evaluate one to release it: a new job writes its CSV and report."),
    table(["#", ...qis.map((q) => "#" + q), "#Utility", "#Suppressed", ""], rows, { id: "candidates-table" }),
    error);
}

const MEASURES = [
  ["granularity", "Granularity"],
  ["generalization_intensity", "Generalization intensity"],
  ["non_uniform_entropy", "Non-uniform entropy"],
  ["microaggregation", "Microaggregation"],
];

/** Bars of a value distribution: the top values, the other values and the suppressed records. */
function valueBars(side, d, total) {
  const rows = d.top.map((v) => [v.value === "" ? "(empty)" : v.value, v.records, "bar" + (side === "after" ? " after" : "")]);
  if (d.other_records) rows.push([`(${d.distinct - d.top.length} other values)`, d.other_records, "bar other"]);
  if (d.suppressed_records) rows.push(["(suppressed)", d.suppressed_records, "bar suppressed"]);
  // Scaled to the largest single value (the other values together may exceed it: their bar is cut).
  const max = Math.max(1, ...rows.filter((x) => !x[2].includes("other")).map((x) => x[1]));
  const bars = h("div", { class: "bars", "data-side": side });
  for (const [label, records, cls] of rows) {
    const bar = h("div", { class: cls, title: `${records} records (${((100 * records) / total).toFixed(1)} %)` });
    bar.style.width = Math.min(100, Math.max(0.3, (100 * records) / max)) + "%";
    bars.append(h("span", { class: "value" }, label), h("div", null, bar), h("span", null, num(records, 0)));
  }
  return h("div", null, h("h4", null, `${side === "before" ? "Before" : "After"}: ${num(d.distinct, 0)} distinct values`), bars);
}

/** Per attribute: the most frequent values before and after, and the post-hoc loss. */
export function showValues(box, r) {
  const values = r.values;
  if (!values || !Object.keys(values).length) {
    fill(box, h("p", { class: "muted" }, "No output to compare."));
    return;
  }
  const qis = r.quasi_identifiers || Object.keys(values);
  const oq = r.output_quality || {};
  const total = r.rows || 1;
  const panels = qis.filter((q) => values[q]).map((q, i) => {
    const losses = MEASURES
      .filter(([key]) => oq[key] && Array.isArray(oq[key].attributes) && oq[key].attributes[i] !== undefined)
      .map(([key, label]) => [label, num(oq[key].attributes[i])]);
    return h("section", { class: "panel attribute", "data-column": q },
      h("h3", null, q),
      losses.length
        ? table(["Post-hoc measure", "#Loss (0 = unchanged)"], losses, { class: "posthoc" })
        : h("p", { class: "muted" }, "No per-attribute post-hoc measure."),
      h("div", { class: "grid two" }, valueBars("before", values[q].before, total), valueBars("after", values[q].after, total)));
  });
  fill(box,
    h("p", { class: "muted" }, "Per quasi-identifier: the 10 most frequent values before and after, the records of the other " +
      "values and of suppressed records, and the post-hoc quality measured on the output."),
    panels);
}
