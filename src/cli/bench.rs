//! `deid bench`: benchmark problems on a directory of ARX-layout datasets, printing a table.
//!
//! `deid bench checks` checks every transformation of each dataset's lattice (k-anonymity, Loss)
//! and reports checks per second — the engine's core throughput.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use rayon::prelude::*;

use crate::dataset::ArxDataset;
use crate::engine::privacy::PrivacyModel;
use crate::engine::{Checker, Problem, ProblemConfig};

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
    }
}

fn checks(args: ChecksArgs) -> anyhow::Result<()> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads.unwrap_or(0))
        .build()?;
    println!(
        "| dataset | rows | QIs | transformations | threads | load (s) | CSV (MB) | encoded (MB) | index (MB) | checks | time (s) | checks/s | anonymous |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
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
        let csv_mb =
            std::fs::metadata(args.data.join(name).join(format!("{name}.csv")))?.len() as f64 / 1e6;
        let encoded_mb = problem.encoded_bytes() as f64 / 1e6;
        let index_mb = problem.index_bytes() as f64 / 1e6;
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
            "| {name} | {} | {} | {} | {} | {load:.2} | {csv_mb:.1} | {encoded_mb:.1} | {index_mb:.1} | {n} | {secs:.3} | {:.0} | {anonymous} |",
            problem.rows(),
            lattice.dimensions(),
            lattice.size_string(),
            pool.current_num_threads(),
            n as f64 / secs
        );
    }
    Ok(())
}
