// Jobs: the tenant's jobs (refreshed every 2 s, paged) and the job page (progress, utility over
// time from the event stream, best transformation, candidates, utility analysis, risks before
// and after, cancel, downloads).

import { api, download, followEvents, head } from "./api.js";
import { h, fill, table, num, pct, ms, status, notice, Pager, listPath } from "./ui.js";
import { UtilityChart, BarChart } from "./chart.js";
import { showCandidates, showValues } from "./compare.js";

const TERMINAL = ["succeeded", "failed", "cancelled"];
/** Reports of finished jobs never change: kept for the session of the page. */
const reports = new Map();

async function report(id, signal) {
  if (!reports.has(id)) reports.set(id, await api(`/v1/jobs/${id}/result`, { signal }));
  return reports.get(id);
}

function elapsed(job) {
  if (job.started_at && job.finished_at) return Date.parse(job.finished_at) - Date.parse(job.started_at);
  return job.progress.elapsed_ms || null;
}

/** #/jobs (`?limit=` sets the page size; pages follow next_cursor) */
export async function jobList(main, _params, signal) {
  const box = h("div", { id: "job-list", "aria-live": "polite" });
  const names = new Map();
  const name = async (id) => {
    if (!names.has(id)) names.set(id, await api(`/v1/datasets/${id}`, { signal }).then((d) => d.name, () => null));
    return names.get(id);
  };
  const pager = new Pager("jobs-pager", async (cursor) => {
    const page = await api(listPath("/v1/jobs", cursor), { signal });
    await Promise.all([...new Set(page.items.map((j) => j.dataset_id))].map(name));
    if (signal.aborted) return page;
    if (!page.items.length) {
      fill(box, h("p", null, "No jobs yet. ", h("a", { href: "#/new" }, "Create one"), "."));
      return page;
    }
    fill(box, table(["Job", "Status", "Dataset", "Algorithm", "#Elapsed", "#Best utility", "Created"],
      page.items.map((j) => [
        h("a", { href: "#/jobs/" + j.id }, j.id),
        status(j.status),
        h("a", { href: "#/datasets/" + j.dataset_id }, names.get(j.dataset_id) || j.dataset_id),
        j.algorithm || j.task,
        ms(elapsed(j)),
        j.best ? num(j.best.utility) : "—",
        new Date(j.created_at).toLocaleString(),
      ]), { id: "jobs-table" }));
    return page;
  });
  main.append(
    h("div", { class: "row" }, h("h1", null, "Jobs"), h("a", { href: "#/new", class: "button" }, "New job")),
    box, pager.el);
  await pager.refresh();
  const timer = setInterval(() => pager.refresh().catch((e) => signal.aborted || fill(box, notice(e))), 2000);
  signal.addEventListener("abort", () => clearInterval(timer));
}

/** The strategy that found an improvement: its own field when the engine says, else the job's algorithm. */
function strategy(entry, algorithm) {
  return entry.algorithm || entry.strategy || algorithm || "search";
}

/** #/jobs/{id} */
export async function jobPage(main, [id], signal) {
  let job = await api(`/v1/jobs/${id}`, { signal });
  const dataset = await api(`/v1/datasets/${job.dataset_id}`, { signal }).catch(() => null);
  const el = {
    status: h("span", { id: "job-status" }),
    algorithm: h("span", { id: "job-algorithm" }, "—"),
    phase: h("dd", { id: "phase" }),
    checks: h("dd", { id: "checks" }),
    explored: h("progress", { id: "explored", max: 1, value: 0, "aria-label": "explored share of the solution space" }),
    exploredText: h("span", { id: "explored-text" }),
    elapsed: h("dd", { id: "elapsed" }),
    utility: h("dd", { id: "best-utility" }),
    cancel: h("button", { type: "button", id: "cancel", class: "danger" }, "Cancel job"),
    csv: h("button", { type: "button", id: "download-csv" }, "Download result.csv"),
    safeCsv: h("button", { type: "button", id: "download-csv-safe", class: "secondary", title: "cells starting with = + - @ get a leading ' so that spreadsheets do not run them as formulas" }, "Download for spreadsheets"),
    report: h("button", { type: "button", id: "download-report", class: "secondary" }, "Download report (JSON)"),
    actionError: h("div", { id: "action-error" }),
    chart: h("div", { id: "chart", class: "chart", role: "img", "aria-label": "utility of the best transformation over time" }),
    improvements: h("div", { id: "improvements" }),
    transformation: h("div", { id: "transformation" }),
    risk: h("div", { id: "risk" }),
    candidates: h("div", { id: "candidates" }),
    values: h("div", { id: "utility-analysis" }),
    dp: h("p", { id: "dp-summary", hidden: true }),
    local: h("p", { id: "local-summary", hidden: true }),
    raw: h("pre", { id: "report-json" }),
  };
  main.append(
    h("h1", null, "Job ", h("code", null, id)),
    h("p", null, el.status, " · dataset ", h("a", { href: "#/datasets/" + job.dataset_id }, dataset ? dataset.name : job.dataset_id),
      " · algorithm ", el.algorithm),
    h("div", { class: "row" }, el.cancel, el.csv, el.safeCsv, el.report), el.actionError,
    h("h2", null, "Progress"),
    h("div", { class: "grid" },
      h("div", { class: "panel" }, h("dl", { class: "kv" },
        h("dt", null, "Phase"), el.phase, h("dt", null, "Checks"), el.checks,
        h("dt", null, "Elapsed"), el.elapsed, h("dt", null, "Best utility"), el.utility)),
      h("div", { class: "panel" }, h("label", { for: "explored" }, "Explored share of the solution space"), el.explored, el.exploredText)),
    h("h2", null, "Utility over time"), el.chart, el.improvements,
    h("h2", null, "Best transformation"), el.dp, el.local, el.transformation,
    h("h2", null, "Candidates"), el.candidates,
    h("h2", null, "Utility analysis"), el.values,
    h("h2", null, "Risk before and after"), el.risk,
    h("details", null, h("summary", null, "Report (JSON)"), el.raw));

  const chart = new UtilityChart(el.chart);
  signal.addEventListener("abort", () => chart.dispose());
  let algorithm = null;
  let loaded = false;

  const showImprovements = () => {
    const last = chart.points.slice(-8).reverse();
    fill(el.improvements, h("p", { class: "muted" }, `${chart.points.length} improvement(s); the latest:`),
      table(["#Time", "#Utility", "Found by"], last.map((p) => [ms(p.t), num(p.u), p.strategy]), { id: "improvements-table" }));
  };

  const update = () => {
    fill(el.status, status(job.status), job.cancel_requested && !TERMINAL.includes(job.status) ? " (cancel requested)" : "");
    fill(el.phase, job.progress.phase);
    fill(el.checks, num(job.progress.checks, 0));
    fill(el.elapsed, ms(elapsed(job)));
    if (!loaded && job.progress.elapsed_ms) chart.setEnd(job.progress.elapsed_ms);
    fill(el.utility, job.best ? num(job.best.utility) : "—");
    el.explored.value = job.progress.explored_share || 0;
    fill(el.exploredText, pct(job.progress.explored_share));
    el.cancel.hidden = TERMINAL.includes(job.status);
    el.csv.hidden = el.safeCsv.hidden = el.report.hidden = job.status !== "succeeded";
    // A risk analysis has no CSV; a failed evaluation keeps its report.
    if (job.task === "risk") el.csv.hidden = el.safeCsv.hidden = true;
    if (job.task === "evaluate" && job.error && job.error.code === "not_anonymous") el.report.hidden = false;
    if (!loaded) showTransformation(el.transformation, job.best && job.best.transformation, null, dataset, null);
    if (job.status === "failed" && job.error) fill(el.actionError, notice(job.error));
  };

  const finish = async () => {
    if (loaded || job.status !== "succeeded") return;
    loaded = true;
    const r = await report(id, signal);
    if (job.task === "risk") {
      fill(el.algorithm, "risk analysis");
      fill(el.candidates, h("p", { class: "muted" }, "A risk analysis has no candidates."));
      fill(el.values, h("p", { class: "muted" }, "A risk analysis changes no value."));
      showRisk(el.risk, { input: r.input });
      fill(el.raw, JSON.stringify(r, null, 2));
      return;
    }
    algorithm = r.algorithm || job.task;
    fill(el.algorithm, algorithm);
    if (r.elapsed_ms) chart.setEnd(r.elapsed_ms);
    if (r.trace && r.trace.length >= chart.points.length) {
      chart.points = [];
      chart.strategies = [];
      chart.destroyPlot();
      chart.add(r.trace.map((e) => ({ t: e.time_ms, u: e.utility, strategy: strategy(e, algorithm) })));
    }
    showImprovements();
    const sample = await head(job.links.result_csv, 64 * 1024).catch(() => "");
    showTransformation(el.transformation, r.transformation, r.per_attribute, dataset, sample);
    showCandidates(el.candidates, job, r, signal);
    showValues(el.values, r);
    showRisk(el.risk, r.risk);
    showDp(el.dp, r.differential_privacy);
    showLocal(el.local, r.local);
    fill(el.raw, JSON.stringify(r, null, 2));
  };

  el.cancel.addEventListener("click", async () => {
    el.cancel.disabled = true;
    try {
      const answer = await api(`/v1/jobs/${id}/cancel`, { method: "POST" });
      // The event stream may have delivered the job's end before this answer.
      if (!TERMINAL.includes(job.status)) {
        job = answer;
        update();
      }
    } catch (e) {
      fill(el.actionError, notice(e));
    }
    el.cancel.disabled = false;
  });
  el.csv.addEventListener("click", () => download(job.links.result_csv, `${id}.csv`).catch((e) => fill(el.actionError, notice(e))));
  el.safeCsv.addEventListener("click", () => download(`${job.links.result_csv}?neutralize_formulas=true`, `${id}-spreadsheet.csv`).catch((e) => fill(el.actionError, notice(e))));
  el.report.addEventListener("click", () => download(job.links.result, `${id}-report.json`).catch((e) => fill(el.actionError, notice(e))));

  update();
  for (const box of [el.risk, el.candidates, el.values]) fill(box, h("p", { class: "muted" }, "Shown when the job has succeeded."));
  if (TERMINAL.includes(job.status)) await finish();
  followEvents(job.links.events, (name, data) => {
    if (name === "improvement") {
      if (loaded) return; // the report's trace is shown already
      chart.add([{ t: data.elapsed_ms, u: data.utility, strategy: strategy(data, algorithm) }]);
      showImprovements();
    } else if (data && data.id === id) {
      job = data;
      update();
      if (TERMINAL.includes(job.status)) finish().catch((e) => signal.aborted || main.append(notice(e)));
    }
  }, signal).catch((e) => signal.aborted || fill(el.actionError, notice(e)));
}

/** Parses a small CSV sample (RFC 4180 quotes) into rows; the last, possibly cut, line is dropped. */
function parseCsv(text, delimiter) {
  const rows = [];
  let row = [], cell = "", quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i++; }
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === delimiter) { row.push(cell); cell = ""; }
    else if (c === "\n") { row.push(cell.replace(/\r$/, "")); rows.push(row); row = []; cell = ""; }
    else cell += c;
  }
  return rows;
}

/** Level, height, example generalized values (from the result's first rows) and loss per attribute. */
function showTransformation(box, transformation, perAttribute, dataset, sample) {
  if (!transformation) {
    fill(box, h("p", { class: "muted" }, "No transformation yet."));
    return;
  }
  const examples = new Map();
  if (sample) {
    const delimiter = sample.split("\n", 1)[0].includes(";") && !sample.split("\n", 1)[0].includes(",") ? ";" : ",";
    const rows = parseCsv(sample, delimiter);
    const header = rows.shift() || [];
    header.forEach((name, i) => {
      const seen = [];
      for (const r of rows) if (r[i] !== undefined && !seen.includes(r[i]) && seen.length < 4) seen.push(r[i]);
      examples.set(name, seen);
    });
  }
  const heights = (dataset && dataset.hierarchies) || {};
  fill(box, table(["Attribute", "#Level", "#Height", "Generalized values (examples)", "#Loss"],
    Object.entries(transformation).map(([col, level]) => [
      col, level,
      heights[col] !== undefined ? heights[col] - 1 : "—",
      (examples.get(col) || []).join(" · ") || "—",
      perAttribute && perAttribute[col] !== undefined ? num(perAttribute[col]) : "—",
    ]), { id: "transformation-table" }));
}

/** Differential privacy of a report: its parameters, k, β and the sample it measures. */
function showDp(target, dp) {
  if (!dp) return;
  target.hidden = false;
  fill(target, `Differential privacy: ε = ${dp.epsilon} (search ${dp.epsilon_search}), δ = ${dp.delta}, ` +
    `k = ${dp.k}, β = ${dp.beta.toFixed(4)}, seed ${dp.seed}: ${dp.sampled_records} of ` +
    `${dp.input_records} records sampled, ${dp.released_records} released. ` +
    "Quality and risks below measure the released sample.");
}

/** What local generalization did: its method, transformations, published and suppressed records. */
function showLocal(target, local) {
  if (!local) return;
  target.hidden = false;
  const published = local.steps.reduce((n, s) => n + s.published_rows, 0);
  fill(target, `Local generalization (${local.method}): ${local.steps.length} transformations published ` +
    `${published.toLocaleString("en-US")} records, ${local.suppressed_rows.toLocaleString("en-US")} suppressed` +
    (local.refined_rows ? `, ${local.refined_rows.toLocaleString("en-US")} refined` : "") +
    ". The table below shows the first one; quality and risks measure the whole output.");
}

/** The measures of the risk table: label, value of a RiskReport, and whether it is a share. */
const RISK_MEASURES = [
  ["Highest prosecutor risk", (r) => r.highest_risk, true],
  ["Average prosecutor risk", (r) => r.average_risk, true],
  ["Records at risk", (r) => r.records_at_risk, true],
  ["Sample uniqueness", (r) => r.sample_uniqueness, true],
  ["Highest journalist risk", (r) => r.attacker_models?.journalist?.highest_risk, true],
  ["Journalist success rate", (r) => r.attacker_models?.journalist?.success_rate, true],
  ["Marketer risk", (r) => r.attacker_models?.marketer_risk, true],
  ["Population uniqueness (Dankar)", (r) => r.population_uniqueness?.dankar?.share, true],
  ["Equivalence classes", (r) => r.classes, false],
  ["Smallest class", (r) => r.min_class_size, false],
  ["Average class size", (r) => r.avg_class_size, false],
  ["Suppressed records", (r) => r.suppressed, false],
];

/** A pair of bars (before, after) for shares of 100 %. */
function shareBars(before, after) {
  const bar = (v, cls) => {
    if (v === undefined || v === null) return null;
    const b = h("div", { class: cls, title: pct(v) });
    b.style.width = Math.max(0.3, 100 * Math.min(1, v)) + "%";
    return b;
  };
  return h("div", { class: "pair" }, bar(before, "bar"), bar(after, "bar after"));
}

/** Risk measures before/after as one table (measure | before | after | bar) and the risk distribution as a chart. */
function showRisk(box, risk) {
  if (!risk) return;
  const rows = RISK_MEASURES
    .map(([label, get, share]) => [label, get(risk.input || {}), risk.output ? get(risk.output) : undefined, share])
    .filter(([, b, a]) => b !== undefined || a !== undefined);
  const value = (v, share) => (share ? pct(v, 2) : num(v));
  const chart = h("div", { id: "risk-chart", class: "chart small", role: "img",
    "aria-label": "share of the records per re-identification risk, before and after" });
  fill(box,
    h("p", { class: "muted" }, "Re-identification risks of the data before and after anonymization; the bars show shares of 100 % (",
      h("span", { class: "legend-swatch bar" }), "before, ", h("span", { class: "legend-swatch bar after" }), "after)."),
    table(["Measure", "#Before", "#After", "Bar"], rows.map(([label, b, a, share]) =>
      [label, value(b, share), risk.output ? value(a, share) : "—", share ? shareBars(b, a) : ""]), { id: "risk-table" }),
    h("h3", null, "Risk distribution"),
    chart);
  const buckets = (r) => (r && r.distribution) || [];
  const before = buckets(risk.input), after = buckets(risk.output);
  const n = Math.max(before.length, after.length);
  if (!n) return;
  const labels = [];
  for (let i = 0; i < n; i++) labels.push("≤ " + pct((before[i] || after[i]).upper, 0));
  const series = [["before", before.map((b) => b.records), "#0b57d0"]];
  if (risk.output) series.push(["after", after.map((b) => b.records), "#1a6a33"]);
  requestAnimationFrame(() => new BarChart(chart, labels, series, "share of the records whose risk is in the bucket"));
}
