// Utility over time: a uPlot line chart (vendored, see uplot.LICENSE) fed with the job's
// improvements. Redraws at most once per animation frame, and draws at most a few points per
// pixel column (decimation: first, last, lowest and highest point of each column), so a trace of
// 10,000 improvements stays responsive.

const COLORS = ["#0b57d0", "#b3261e", "#1a6a33", "#7a4d00", "#6f2da8", "#00696b", "#8c1d5a"];

/** Keeps, of points sorted by t, the first, last, lowest and highest of each of `columns` buckets. */
export function decimate(points, columns) {
  if (points.length <= columns * 4) return points;
  const t0 = points[0].t, span = points[points.length - 1].t - t0 || 1;
  const out = [];
  let bucket = -1, group = [];
  const flush = () => {
    if (!group.length) return;
    let lo = group[0], hi = group[0];
    for (const p of group) {
      if (p.u < lo.u) lo = p;
      if (p.u > hi.u) hi = p;
    }
    const keep = new Set([group[0], lo, hi, group[group.length - 1]]);
    for (const p of group) if (keep.has(p)) out.push(p);
    group = [];
  };
  for (const p of points) {
    const b = Math.min(columns - 1, Math.floor(((p.t - t0) / span) * columns));
    if (b !== bucket) {
      flush();
      bucket = b;
    }
    group.push(p);
  }
  flush();
  return out;
}

/** The chart of one job page. */
export class UtilityChart {
  constructor(el) {
    this.el = el;
    this.points = [];
    this.strategies = [];
    this.plot = null;
    this.queued = false;
    this.end = 0;
    this.el.dataset.points = "0";
    this.resize = () => this.plot && this.plot.setSize(this.size());
    window.addEventListener("resize", this.resize);
  }

  size() {
    return { width: Math.max(300, this.el.clientWidth || 800), height: 300 };
  }

  /** Adds improvements: {t (ms), u (utility), strategy}. */
  add(points) {
    for (const p of points) {
      if (!this.strategies.includes(p.strategy)) {
        this.strategies.push(p.strategy);
        this.destroyPlot();
      }
      this.points.push(p);
    }
    this.el.dataset.points = String(this.points.length);
    if (!this.queued) {
      this.queued = true;
      requestAnimationFrame(() => {
        this.queued = false;
        this.draw();
      });
    }
  }

  /** Makes the time axis run to `t` ms (the search's elapsed time), not to the last improvement. */
  setEnd(t) {
    if (!(t > this.end)) return;
    this.end = t;
    this.el.dataset.end = String(t);
    this.add([]);
  }

  destroyPlot() {
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }

  data() {
    const shown = decimate(this.points, Math.max(100, this.size().width));
    const xs = shown.map((p) => p.t / 1000);
    const best = shown.map((p) => p.u);
    const series = this.strategies.map((s) => shown.map((p) => (p.strategy === s ? p.u : null)));
    // The best so far holds until the end of the search: one more x without a point.
    const last = shown.length ? shown[shown.length - 1].t : 0;
    if (shown.length && this.end > last) {
      xs.push(this.end / 1000);
      best.push(best[best.length - 1]);
      for (const s of series) s.push(null);
    }
    this.el.dataset.drawn = String(shown.length);
    return [xs, best, ...series];
  }

  draw() {
    if (!window.uPlot || !this.el.isConnected) return;
    const data = this.data();
    if (this.plot) {
      this.plot.setData(data);
      return;
    }
    const stepped = window.uPlot.paths.stepped({ align: 1 });
    const opts = {
      ...this.size(),
      title: "Utility over time",
      scales: { x: { time: false, range: (u, lo, hi) => [0, Math.max(hi, this.end / 1000, 0.001)] }, y: { range: (u, lo, hi) => [Math.max(0, Math.min(lo, hi - 0.05) - 0.02), Math.min(1, hi + 0.02)] } },
      axes: [{ label: "seconds since the search started" }, { label: "utility" }],
      series: [
        { label: "seconds", value: (u, v) => (v === null || v === undefined ? "–" : v.toFixed(3)) },
        { label: "best utility", stroke: "#5f6b7a", width: 1.5, paths: stepped, points: { show: false } },
        ...this.strategies.map((s, i) => ({
          label: "found by " + s,
          stroke: COLORS[i % COLORS.length],
          fill: COLORS[i % COLORS.length],
          paths: () => null,
          points: { show: true, size: 7, fill: COLORS[i % COLORS.length] },
        })),
      ],
    };
    this.plot = new window.uPlot(opts, data, this.el);
  }

  /** Stops listening (the page is left). */
  dispose() {
    window.removeEventListener("resize", this.resize);
    this.destroyPlot();
  }
}

/** A grouped bar chart (uPlot): `labels` on the x axis, `series` of [name, values, colour]. */
export class BarChart {
  constructor(el, labels, series, title) {
    this.el = el;
    el.dataset.bars = String(labels.length);
    if (!window.uPlot || !el.isConnected) return;
    const n = series.length;
    const width = Math.max(300, el.clientWidth || 800);
    const xs = labels.map((_, i) => i);
    const opts = {
      width, height: 240, title,
      scales: { x: { time: false, range: [-0.5, labels.length - 0.5] }, y: { range: (u, lo, hi) => [0, Math.max(hi, 1e-9) * 1.1] } },
      axes: [
        { values: (u, ticks) => ticks.map((t) => (Number.isInteger(t) ? labels[t] ?? "" : "")), splits: () => xs, label: "risk up to" },
        { values: (u, ticks) => ticks.map((t) => (100 * t).toFixed(0) + " %"), label: "share of records" },
      ],
      series: [
        { label: "risk up to", value: (u, v) => (v === null || v === undefined ? "–" : labels[v] ?? "") },
        ...series.map(([name, , colour], i) => ({
          label: name,
          stroke: colour,
          fill: colour,
          value: (u, v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(1) + " %"),
          // Two series side by side: the first left of its tick, the second right of it.
          paths: window.uPlot.paths.bars({ size: [n > 1 ? 0.4 : 0.6, 60], align: n > 1 ? (i === 0 ? -1 : 1) : 0 }),
          points: { show: false },
        })),
      ],
    };
    this.plot = new window.uPlot(opts, [xs, ...series.map(([, values]) => values)], el);
  }
}
