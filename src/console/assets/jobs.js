// Jobs: the tenant's jobs (refreshed every 2 s) and the job page (progress, utility over time
// from the event stream, best transformation, risks before and after, cancel, downloads).

import { api, download, followEvents, head } from "./api.js";
import { h, fill, table, num, pct, ms, status, notice } from "./ui.js";
import { UtilityChart } from "./chart.js";

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

/** #/jobs */
export async function jobList(main, _params, signal) {
  const box = h("div", { id: "job-list", "aria-live": "polite" });
  main.append(
    h("div", { class: "row" }, h("h1", null, "Jobs"), h("a", { href: "#/new", class: "button" }, "New job")),
    box);
  const names = new Map();
  const refresh = async () => {
    const page = await api("/v1/jobs?limit=100", { signal });
    if (page.items.some((j) => !names.has(j.dataset_id))) {
      const ds = await api("/v1/datasets?limit=100", { signal });
      for (const d of ds.items) names.set(d.id, d.name);
    }
    await Promise.all(page.items.filter((j) => j.status === "succeeded").map((j) => report(j.id, signal).catch(() => null)));
    if (signal.aborted) return;
    if (!page.items.length) {
      fill(box, h("p", null, "No jobs yet. ", h("a", { href: "#/new" }, "Create one"), "."));
      return;
    }
    fill(box, table(["Job", "Status", "Dataset", "Algorithm", "#Elapsed", "#Best utility", "Created"],
      page.items.map((j) => [
        h("a", { href: "#/jobs/" + j.id }, j.id),
        status(j.status),
        h("a", { href: "#/datasets/" + j.dataset_id }, names.get(j.dataset_id) || j.dataset_id),
        j.task && j.task !== "anonymize" ? j.task : reports.get(j.id)?.algorithm || "—",
        ms(elapsed(j)),
        j.best ? num(j.best.utility) : "—",
        new Date(j.created_at).toLocaleString(),
      ]), { id: "jobs-table" }));
  };
  await refresh();
  const timer = setInterval(() => refresh().catch((e) => signal.aborted || fill(box, notice(e))), 2000);
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
    dp: h("p", { id: "dp-summary", hidden: true }),
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
    h("h2", null, "Best transformation"), el.dp, el.transformation,
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
      showRisk(el.risk, { input: r.input });
      fill(el.raw, JSON.stringify(r, null, 2));
      return;
    }
    algorithm = r.algorithm || job.task;
    fill(el.algorithm, algorithm);
    if (r.trace && r.trace.length >= chart.points.length) {
      chart.points = [];
      chart.strategies = [];
      chart.destroyPlot();
      chart.add(r.trace.map((e) => ({ t: e.time_ms, u: e.utility, strategy: strategy(e, algorithm) })));
    }
    showImprovements();
    const sample = await head(job.links.result_csv, 64 * 1024).catch(() => "");
    showTransformation(el.transformation, r.transformation, r.per_attribute, dataset, sample);
    showRisk(el.risk, r.risk);
    showDp(el.dp, r.differential_privacy);
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
  fill(el.risk, h("p", { class: "muted" }, "Shown when the job has succeeded."));
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

function flatten(obj, prefix, out) {
  for (const [k, v] of Object.entries(obj || {})) {
    const key = prefix ? prefix + "." + k : k;
    if (typeof v === "number") out.set(key, v);
    else if (v && typeof v === "object" && !Array.isArray(v)) flatten(v, key, out);
  }
  return out;
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

/** Risk measures before/after as bars and a table; histograms as bars when the report has them. */
function showRisk(box, risk) {
  if (!risk) return;
  const before = flatten(risk.input, "", new Map());
  const after = flatten(risk.output, "", new Map());
  const shares = [...before.keys()].filter((k) => /risk/.test(k) && k !== "risk_threshold" && before.get(k) <= 1);
  const bars = h("div", { class: "bars", id: "risk-bars" });
  for (const k of shares) {
    for (const [label, map, cls] of [["before", before, "bar"], ["after", after, "bar after"]]) {
      if (!map.has(k)) continue;
      const bar = h("div", { class: cls, role: "presentation" });
      bar.style.width = Math.max(0.2, 100 * map.get(k)) + "%";
      bars.append(h("span", null, `${k.replace(/_/g, " ")} (${label})`), h("div", null, bar), h("span", null, pct(map.get(k))));
    }
  }
  const keys = [...new Set([...before.keys(), ...after.keys()])];
  const histograms = [];
  for (const [side, obj] of [["before", risk.input], ["after", risk.output]]) {
    for (const [k, v] of Object.entries(obj || {})) if (Array.isArray(v) && v.length) histograms.push(histogram(`${k} (${side})`, v));
  }
  fill(box,
    h("p", { class: "muted" }, "Prosecutor risk measures of the data before and after anonymization (bars: shares of 100 %)."),
    bars,
    histograms,
    h("h3", null, "All measures"),
    table(["Measure", "#Before", "#After"], keys.map((k) => [k, num(before.get(k)), num(after.get(k))]), { id: "risk-table" }));
}

/** A histogram of the report: entries are numbers or objects with a label/range and a share/count. */
function histogram(title, entries) {
  const items = entries.map((e, i) => {
    if (typeof e === "number") return [String(i), e];
    const label = e.label ?? e.range ?? (e.from !== undefined ? `${e.from}–${e.to}` : String(i));
    const value = e.share ?? e.records ?? e.count ?? e.value ?? 0;
    return [label, value];
  });
  const max = Math.max(...items.map((x) => x[1]), 1e-12);
  const bars = h("div", { class: "bars" });
  for (const [label, value] of items) {
    const bar = h("div", { class: "bar" });
    bar.style.width = Math.max(0.2, (100 * value) / max) + "%";
    bars.append(h("span", null, label), h("div", null, bar), h("span", null, num(value)));
  }
  return h("div", { class: "histogram" }, h("h3", null, title), bars);
}
