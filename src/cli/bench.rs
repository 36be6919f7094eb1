//! `deid bench`: benchmark problems on a directory of ARX-layout datasets, printing a table.
//!
//! `deid bench checks` checks every transformation of each dataset's lattice (k-anonymity, Loss)
//! and reports checks per second — the engine's core throughput — and the memory the encoded
//! problem holds next to the CSV's size ([`deid_engine::problem::MemoryUsage`]).
//! `deid bench apply` (module `bench_apply`) times the recoding plan's `apply` and `verify`.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use rayon::prelude::*;

use deid_engine::dataset::ArxDataset;
use deid_engine::privacy::PrivacyModel;
use deid_engine::{Checker, Problem, ProblemConfig};

/// Flags of `deid bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark.
    #[command(subcommand)]
    pub kind: BenchKind,
}

/// Benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchKind {
    /// Check every transformation of the lattice (exhaustive) and report checks per second.
    Checks(ChecksArgs),
    /// Run search algorithms (k-anonymity, Loss) and report time to the optimum and best Loss
    /// after each time limit.
    Search(SearchArgs),
    /// Write a synthetic census-like dataset of any size with its hierarchies.
    Generate(GenerateArgs),
    /// End to end at scale: generate synthetic data (once), run `deid anonymize` on it as a
    /// separate process per algorithm and time limit, report load time, time to the first
    /// solution, checks per second, Loss and peak memory.
    Scale(ScaleArgs),
    /// The recoding plan at scale: plan the synthetic data once (`deid anonymize
    /// --plan-output`), then time `deid apply` of the plan and `deid verify` of the output
    /// (rows per second; `apply`'s bytes compared with the output's).
    Apply(super::bench_apply::ApplyBenchArgs),
}

/// Flags of `deid bench generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Number of records.
    #[arg(long)]
    pub rows: u64,
    /// Directory; the dataset goes to `<dir>/<name>/`.
    #[arg(long, default_value = "target/scale")]
    pub dir: PathBuf,
    /// Dataset name (default `synth-<rows>`).
    #[arg(long)]
    pub name: Option<String>,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Flags of `deid bench scale`.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// Comma-separated numbers of records.
    #[arg(long, default_value = "100000,1000000")]
    pub rows: String,
    /// Where the generated datasets are kept (`<dir>/synth-<rows>/`; generated when missing).
    #[arg(long, default_value = "target/scale")]
    pub dir: PathBuf,
    /// Comma-separated algorithms.
    #[arg(long, default_value = "auto")]
    pub algorithms: String,
    /// Comma-separated time limits.
    #[arg(long, default_value = "5s,60s")]
    pub time_limits: String,
    /// k of k-anonymity.
    #[arg(long, default_value_t = 5)]
    pub k: u32,
    /// Suppression limit.
    #[arg(long, default_value_t = 0.05)]
    pub suppression_limit: f64,
    /// Worker threads of each run (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seeds of the search, comma-separated seeds and inclusive ranges (`0-7`): one run per
    /// seed, algorithm and limit.
    #[arg(long, default_value = "0")]
    pub seeds: String,
}

/// Flags of `deid bench search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Directory with one folder per dataset (`<dir>/<name>/<name>.csv`, hierarchies beside it).
    #[arg(long, default_value = "examples")]
    pub data: PathBuf,
    /// Comma-separated dataset names.
    #[arg(long, default_value = "adult")]
    pub datasets: String,
    /// k of k-anonymity.
    #[arg(long, default_value_t = 5)]
    pub k: u32,
    /// Comma-separated suppression limits.
    #[arg(long, default_value = "0,0.05,1")]
    pub suppression_limits: String,
    /// Comma-separated algorithms run with each time limit.
    #[arg(long, default_value = "lightning,genetic,top-down,bfs")]
    pub algorithms: String,
    /// Comma-separated time limits for the heuristics.
    #[arg(long, default_value = "1s,5s")]
    pub time_limits: String,
    /// Comma-separated optimal algorithms timed to completion (skipped where the space is larger
    /// than `--max-optimal-space`).
    #[arg(long, default_value = "flash,bfs")]
    pub optimal: String,
    /// Time limit of the optimal runs.
    #[arg(long, default_value = "120s")]
    pub optimal_time_limit: String,
    /// Largest solution space for the optimal runs.
    #[arg(long, default_value_t = 100_000)]
    pub max_optimal_space: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seeds of the heuristic runs: a comma-separated list (`0,3,5`) and/or ranges (`0-7`).
    /// For every time limit and seed, the algorithms run one after the other (interleaved), so
    /// that every seed's runs see the same conditions.
    #[arg(long, default_value = "0")]
    pub seeds: String,
    /// Busy-looping threads kept running beside the searches (a concurrent CPU load; 0: none).
    #[arg(long, default_value_t = 0)]
    pub background_load: usize,
}

/// Flags of `deid bench checks`.
#[derive(Debug, Args)]
pub struct ChecksArgs {
    /// Directory with one folder per dataset (`<dir>/<name>/<name>.csv`, hierarchies beside it).
    #[arg(long, default_value = "examples")]
    pub data: PathBuf,
    /// Comma-separated dataset names.
    #[arg(long, default_value = "adult")]
    pub datasets: String,
    /// k of k-anonymity.
    #[arg(long, default_value_t = 5)]
    pub k: u32,
    /// Suppression limit.
    #[arg(long, default_value_t = 0.05)]
    pub suppression_limit: f64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Stop after this many transformations per dataset (default: the whole lattice).
    #[arg(long)]
    pub max_checks: Option<u64>,
}

/// Runs `deid bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.kind {
        BenchKind::Checks(a) => checks(a),
        BenchKind::Search(a) => search_bench(a),
        BenchKind::Generate(a) => {
            let name = a.name.unwrap_or_else(|| format!("synth-{}", a.rows));
            let path = super::synth::generate(&a.dir, &name, a.rows, a.seed)?;
            println!("{}", path.display());
            Ok(())
        }
        BenchKind::Scale(a) => scale(a),
        BenchKind::Apply(a) => super::bench_apply::run(a),
    }
}

fn scale(args: ScaleArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let exe = std::env::current_exe()?;
    let seed_list = seeds(&args.seeds)?;
    println!(
        "| rows | CSV (MB) | algorithm | seed | limit | load (s) | first solution (s) | checks | checks/s | Loss | best found (s) | process (s) | peak memory (MB) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for rows in list(&args.rows) {
        let rows: u64 = rows.parse().with_context(|| format!("--rows: '{rows}'"))?;
        let name = format!("synth-{rows}");
        let folder = args.dir.join(&name);
        let csv = folder.join(format!("{name}.csv"));
        if !csv.exists() {
            eprintln!("generating {}", csv.display());
            super::synth::generate(&args.dir, &name, rows, 1)?;
        }
        let csv_mb = std::fs::metadata(&csv)?.len() as f64 / 1e6;
        // Seeds outermost: the algorithms of one seed run back to back, so that a change in the
        // machine's load touches every algorithm alike.
        for (seed, limit) in seed_list
            .iter()
            .flat_map(|s| list(&args.time_limits).map(move |l| (s, l)))
        {
            for algorithm in list(&args.algorithms) {
                let run = ScaleRun {
                    csv: &csv,
                    folder: &folder,
                    name: &name,
                    algorithm,
                    limit,
                    seed: *seed,
                };
                let report = folder.join("report.json");
                let _ = std::fs::remove_file(&report);
                let (status, wall) =
                    super::bench_apply::timed(&mut run.command(&exe, &args, &report))?;
                let _ = std::fs::remove_file(folder.join("output.csv"));
                let cells = match std::fs::read(&report) {
                    Ok(bytes) => scale_cells(&serde_json::from_slice(&bytes)?, status, wall),
                    Err(_) => format!("failed: {status} |"),
                };
                println!("| {rows} | {csv_mb:.0} | {algorithm} | {seed} | {limit} | {cells}");
            }
        }
    }
    Ok(())
}

/// One `deid anonymize` run of `deid bench scale`.
struct ScaleRun<'a> {
    csv: &'a std::path::Path,
    folder: &'a std::path::Path,
    name: &'a str,
    algorithm: &'a str,
    limit: &'a str,
    seed: u64,
}

impl ScaleRun<'_> {
    /// The command of the run, writing its report to `report`.
    fn command(
        &self,
        exe: &std::path::Path,
        args: &ScaleArgs,
        report: &std::path::Path,
    ) -> std::process::Command {
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("anonymize")
            .arg("--input")
            .arg(self.csv)
            .args(["--delimiter", ";", "--quiet"])
            .args(["--privacy", &format!("k-anonymity(k={})", args.k)])
            .args(["--suppression-limit", &args.suppression_limit.to_string()])
            .args(["--algorithm", self.algorithm, "--time-limit", self.limit])
            .args(["--seed", &self.seed.to_string()])
            .arg("--sensitive")
            .arg(super::synth::SENSITIVE)
            .arg("--output")
            .arg(self.folder.join("output.csv"))
            .arg("--report")
            .arg(report);
        if let Some(t) = args.threads {
            cmd.args(["--threads", &t.to_string()]);
        }
        for q in super::synth::QUASI_IDENTIFIERS {
            let hierarchy = self.folder.join(format!("{}_hierarchy_{q}.csv", self.name));
            cmd.arg("--hierarchy")
                .arg(format!("{q}={}", hierarchy.display()));
        }
        cmd
    }
}

/// The columns of a `deid bench scale` row that come from the run's report (from load time to
/// peak memory), the process having ended with `status` after `wall` seconds.
fn scale_cells(r: &serde_json::Value, status: std::process::ExitStatus, wall: f64) -> String {
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let t = &r["timings"];
    let load = num(&t["load_ms"]) / 1e3;
    let search = num(&t["search_ms"]) / 1e3;
    let first = r["trace"].get(0).map_or("-".to_string(), |e| {
        format!("{:.2}", load + num(&e["time_ms"]) / 1e3)
    });
    let checks = num(&r["checks"]);
    let loss = if status.success() {
        format!("{:.4}", num(&r["score"]))
    } else {
        "none".to_string()
    };
    let best = r["best_found_ms"]
        .as_f64()
        .map_or("-".to_string(), |b| format!("{:.2}", b / 1e3));
    format!(
        "{load:.2} | {first} | {checks} | {:.0} | {loss} | {best} | {wall:.1} | {:.0} |",
        checks / search,
        num(&t["peak_memory_bytes"]) / 1048576.0,
    )
}

fn checks(args: ChecksArgs) -> anyhow::Result<()> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads.unwrap_or(0))
        .build()?;
    println!(
        "| dataset | rows | QIs | transformations | threads | load (s) | CSV (MB) | table (MB) | hierarchies (MB) | value tables (MB) | encoded (MB) | encoded / CSV | index (MB) | checks | time (s) | checks/s | anonymous |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for name in args
        .datasets
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let start = Instant::now();
        let ds = ArxDataset::load(&args.data.join(name), name)?;
        let config = ProblemConfig {
            quasi_identifiers: ds.quasi_identifiers,
            privacy: vec![PrivacyModel::KAnonymity { k: args.k }],
            suppression_limit: args.suppression_limit,
            ..Default::default()
        };
        let problem = Problem::new(ds.table, config)?;
        let load = start.elapsed().as_secs_f64();
        let csv_bytes =
            std::fs::metadata(args.data.join(name).join(format!("{name}.csv")))?.len() as f64;
        let memory = problem.memory();
        let mb = |bytes: usize| format!("{:.2}", bytes as f64 / 1e6);
        let sizes = [
            format!("{:.2}", csv_bytes / 1e6),
            mb(memory.table),
            mb(memory.hierarchies),
            mb(memory.value_tables),
            mb(memory.encoded()),
            format!("{:.2}", memory.encoded() as f64 / csv_bytes),
            mb(memory.index),
        ]
        .join(" | ");
        let lattice = problem.lattice();
        let size = lattice.size().unwrap_or(u128::MAX);
        let n = args.max_checks.map_or(size, |m| size.min(m as u128)) as u64;
        let checker = Checker::new(&problem);
        let start = Instant::now();
        let anonymous: u64 = pool.install(|| {
            (0..n as usize)
                .into_par_iter()
                .with_min_len(64)
                .map(|id| {
                    let levels = lattice
                        .levels_of(id as u128)
                        .expect("id within the lattice");
                    checker.check(&levels).anonymous as u64
                })
                .sum()
        });
        let secs = start.elapsed().as_secs_f64();
        println!(
            "| {name} | {} | {} | {} | {} | {load:.2} | {sizes} | {n} | {secs:.3} | {:.0} | {anonymous} |",
            problem.rows(),
            lattice.dimensions(),
            lattice.size_string(),
            pool.current_num_threads(),
            n as f64 / secs
        );
    }
    Ok(())
}

fn list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Parses `--seeds`: comma-separated seeds and inclusive ranges (`0-7`).
fn seeds(text: &str) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::new();
    for part in list(text) {
        let bad = || anyhow::anyhow!("--seeds: expected a seed or a range like 0-7, got '{part}'");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                anyhow::ensure!(a <= b && b - a < 10_000, bad());
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    anyhow::ensure!(!out.is_empty(), "--seeds: expected at least one seed");
    Ok(out)
}

/// Busy-looping threads that load the CPU until dropped.
struct BackgroundLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BackgroundLoad {
    fn start(n: usize) -> BackgroundLoad {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1024 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(1),
                            );
                        }
                    }
                })
            })
            .collect();
        BackgroundLoad { stop, threads }
    }
}

impl Drop for BackgroundLoad {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One seed's runs: the seed and each algorithm's Loss (`None`: no solution).
type SeedRuns = (u64, Vec<(deid_engine::Algorithm, Option<f64>)>);

/// `auto`'s Loss relative to the best other algorithm with the same seed: the median and the
/// worst over the seeds, in percent (+ = worse), with the seed of the worst. `None` if no seed
/// had results of both.
fn auto_vs_best(runs: &[SeedRuns]) -> Option<(f64, f64, u64)> {
    use deid_engine::Algorithm;
    let mut diffs: Vec<(f64, u64)> = Vec::new();
    for (seed, results) in runs {
        let auto = results
            .iter()
            .find(|(a, _)| *a == Algorithm::Auto)
            .map(|r| r.1);
        let best = results
            .iter()
            .filter(|(a, _)| *a != Algorithm::Auto)
            .filter_map(|r| r.1)
            .min_by(f64::total_cmp);
        let diff = match (auto, best) {
            (Some(Some(a)), Some(b)) if b > 0.0 => (a / b - 1.0) * 100.0,
            (Some(Some(a)), Some(b)) => {
                if a <= b {
                    0.0
                } else {
                    f64::INFINITY
                }
            }
            (Some(None), Some(_)) => f64::INFINITY,
            _ => continue,
        };
        diffs.push((diff, *seed));
    }
    if diffs.is_empty() {
        return None;
    }
    let worst = diffs.iter().copied().max_by(|a, b| a.0.total_cmp(&b.0))?;
    let mut sorted: Vec<f64> = diffs.iter().map(|d| d.0).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    Some((median, worst.0, worst.1))
}

/// Runs `deid bench search`. Long because it is one nested loop — datasets, suppression limits,
/// time limits, seeds, algorithms — with each run's row written where it runs.
fn search_bench(args: SearchArgs) -> anyhow::Result<()> {
    use deid_engine::{Algorithm, CancelFlag, NoObserver, SearchConfig, search};
    let parse_alg = |name: &str| {
        Algorithm::parse(name).ok_or_else(|| anyhow::anyhow!("unknown algorithm '{name}'"))
    };
    let parse_time = |t: &str| crate::job::spec::parse_duration(t).map_err(|e| anyhow::anyhow!(e));
    let seed_list = seeds(&args.seeds)?;
    let algorithms = list(&args.algorithms)
        .map(parse_alg)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let limits = list(&args.time_limits)
        .map(parse_time)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let optimal = list(&args.optimal)
        .map(parse_alg)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let optimal_limit = parse_time(&args.optimal_time_limit)?;
    let _load = BackgroundLoad::start(args.background_load);
    println!(
        "Seeds {}; background load: {} busy-looping thread(s); threads: {}.\n",
        args.seeds,
        args.background_load,
        args.threads
            .map_or("all cores".to_string(), |t| t.to_string())
    );
    println!(
        "| dataset | suppression | algorithm | limit | seed | Loss | utility | best found (s) | elapsed (s) | checks | optimal |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut summary = Vec::new();
    for name in list(&args.datasets) {
        let ds = ArxDataset::load(&args.data.join(name), name)?;
        for limit in list(&args.suppression_limits) {
            let limit: f64 = limit.parse()?;
            let config = ProblemConfig {
                quasi_identifiers: ds.quasi_identifiers.clone(),
                privacy: vec![PrivacyModel::KAnonymity { k: args.k }],
                suppression_limit: limit,
                ..Default::default()
            };
            let problem = Problem::new(ds.table.clone(), config)?;
            let run = |algorithm: Algorithm,
                       time_limit: std::time::Duration,
                       seed: u64|
             -> anyhow::Result<Option<f64>> {
                let config = SearchConfig {
                    algorithm,
                    time_limit,
                    seed,
                    threads: args.threads,
                    flash_max_space: args.max_optimal_space as u128,
                    ..Default::default()
                };
                let outcome = search(&problem, &config, &CancelFlag::new(), &NoObserver)?;
                let (loss, utility) = outcome.best.as_ref().map_or(("-".into(), "-".into()), |b| {
                    (format!("{:.4}", b.score), format!("{:.4}", b.utility))
                });
                println!(
                    "| {name} | {limit} | {algorithm} | {time_limit:?} | {seed} | {loss} | {utility} | {} | {:.2} | {} | {} |",
                    outcome
                        .best_found_at
                        .map_or("-".into(), |d| format!("{:.2}", d.as_secs_f64())),
                    outcome.elapsed.as_secs_f64(),
                    outcome.checks,
                    if outcome.optimal_proven { "yes" } else { "" },
                );
                Ok(outcome.best.map(|b| b.score))
            };
            let space = problem.lattice().size();
            if space.is_some_and(|s| s <= args.max_optimal_space as u128) {
                for &a in &optimal {
                    run(a, optimal_limit, seed_list[0])?;
                }
            }
            for &time_limit in &limits {
                let mut runs = Vec::new();
                for &seed in &seed_list {
                    let mut results = Vec::new();
                    for &a in &algorithms {
                        results.push((a, run(a, time_limit, seed)?));
                    }
                    runs.push((seed, results));
                }
                if let Some((median, worst, seed)) = auto_vs_best(&runs) {
                    summary.push(format!(
                        "| {name} | {limit} | {time_limit:?} | {} | {median:+.2} % | {worst:+.2} % (seed {seed}) |",
                        runs.len()
                    ));
                }
            }
        }
    }
    print_summary(&summary);
    Ok(())
}

/// Prints the summary rows of `search_bench` (`auto` against the best other algorithm).
fn print_summary(summary: &[String]) {
    if summary.is_empty() {
        return;
    }
    println!("\n`auto`'s Loss against the best other algorithm with the same seed (+ = worse):\n");
    println!("| dataset | suppression | limit | seeds | median | worst |");
    println!("|---|---|---|---|---|---|");
    for line in summary {
        println!("{line}");
    }
}
