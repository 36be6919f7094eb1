//! `deid anonymize`: search the best transformation within a time limit, write the anonymized CSV
//! and a JSON report (the `deid evaluate` fields plus the search statistics and trace).

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use super::{ProblemArgs, job_spec, load_problem, write_report};
use crate::report::{DEFAULT_RISK_THRESHOLD, search_report};
use crate::spec::delimiter_byte;
use crate::spec::{DurationSpec, GeneticSpec};
use deid_engine::{
    CancelFlag, Checker, Improvement, NoObserver, Progress, ProgressObserver, search,
};

/// Flags of `deid anonymize`.
#[derive(Debug, Args)]
pub struct AnonymizeArgs {
    /// Data and problem.
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// auto, flash, lightning, top-down, genetic, bfs, datafly, improved-greedy (igreedy) or exhaustive.
    #[arg(long)]
    pub algorithm: Option<String>,
    /// Time limit, e.g. `500ms`, `5s`, `2m` (default 30s).
    #[arg(long)]
    pub time_limit: Option<String>,
    /// Stop after this many checks.
    #[arg(long)]
    pub check_limit: Option<u64>,
    /// Seed of the randomized algorithms (default 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker threads (default: all cores); results do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Genetic algorithm: generations (the stop with `--stop-after-iterations`, else the
    /// stagnation window before re-seeding).
    #[arg(long)]
    pub iterations: Option<u32>,
    /// Genetic algorithm: stop after `--iterations` generations instead of using the whole
    /// time limit (ARX's behaviour).
    #[arg(long)]
    pub stop_after_iterations: bool,
    /// Genetic algorithm: individuals per subpopulation.
    #[arg(long)]
    pub subpopulation_size: Option<usize>,
    /// Genetic algorithm: elite fraction.
    #[arg(long)]
    pub elite_fraction: Option<f64>,
    /// Genetic algorithm: crossover fraction.
    #[arg(long)]
    pub crossover_fraction: Option<f64>,
    /// Genetic algorithm: production fraction.
    #[arg(long)]
    pub production_fraction: Option<f64>,
    /// Genetic algorithm: mutation probability.
    #[arg(long)]
    pub mutation_probability: Option<f64>,
    /// Genetic algorithm: generations between migrations.
    #[arg(long)]
    pub immigration_interval: Option<u32>,
    /// Genetic algorithm: migrating fraction.
    #[arg(long)]
    pub immigration_fraction: Option<f64>,
    /// Write the anonymized CSV here.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Write the JSON report here instead of stdout.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// No progress bar, even on a terminal.
    #[arg(long)]
    pub quiet: bool,
}

/// A one-line progress bar on stderr, redrawn at most 10 times a second.
struct Bar {
    last: Mutex<Option<Instant>>,
}

impl ProgressObserver for Bar {
    fn progress(&self, p: &Progress) {
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        if last.is_some_and(|t| t.elapsed() < Duration::from_millis(100)) {
            return;
        }
        *last = Some(Instant::now());
        let width = 30;
        let filled = ((p.progress.clamp(0.0, 1.0)) * width as f64) as usize;
        let best = p
            .best_score
            .map_or_else(|| "none yet".to_string(), |s| format!("{s:.6}"));
        eprint!(
            "\r[{}{}] {:>3.0}% {} {:.1}s, {} checks, best {}   ",
            "#".repeat(filled),
            " ".repeat(width - filled),
            p.progress * 100.0,
            p.phase.name(),
            p.elapsed.as_secs_f64(),
            p.checks,
            best
        );
    }

    fn improved(&self, _: &Improvement) {}
}

/// Runs `deid anonymize`.
pub fn run(args: AnonymizeArgs) -> anyhow::Result<()> {
    let mut spec = job_spec(&args.problem)?;
    if let Some(a) = &args.algorithm {
        spec.algorithm = Some(if a == "igreedy" {
            "improved-greedy".into()
        } else {
            a.clone()
        });
    }
    if let Some(t) = &args.time_limit {
        spec.time_limit = Some(DurationSpec::Text(t.clone()));
    }
    spec.check_limit = args.check_limit.or(spec.check_limit);
    spec.seed = args.seed.or(spec.seed);
    spec.threads = args.threads.or(spec.threads);
    let mut g: GeneticSpec = spec.genetic.unwrap_or_default();
    g.iterations = args.iterations.or(g.iterations);
    if args.stop_after_iterations {
        g.stop_after_iterations = Some(true);
    }
    g.subpopulation_size = args.subpopulation_size.or(g.subpopulation_size);
    g.elite_fraction = args.elite_fraction.or(g.elite_fraction);
    g.crossover_fraction = args.crossover_fraction.or(g.crossover_fraction);
    g.production_fraction = args.production_fraction.or(g.production_fraction);
    g.mutation_probability = args.mutation_probability.or(g.mutation_probability);
    g.immigration_interval = args.immigration_interval.or(g.immigration_interval);
    g.immigration_fraction = args.immigration_fraction.or(g.immigration_fraction);
    spec.genetic = Some(g);

    let config = spec.search_config()?;
    let problem = load_problem(&spec)?;
    let cancel = CancelFlag::new();
    let bar = Bar {
        last: Mutex::new(None),
    };
    let show = !args.quiet && std::io::stderr().is_terminal();
    let observer: &dyn ProgressObserver = if show { &bar } else { &NoObserver };
    let outcome = search(&problem, &config, &cancel, observer)?;
    if show {
        eprintln!();
    }
    let eval = outcome
        .best
        .as_ref()
        .map(|b| Checker::new(&problem).evaluate(&b.levels));
    if let (Some(path), Some(eval)) = (&args.output, &eval) {
        let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        let d = delimiter_byte(spec.delimiter.unwrap_or(','), "delimiter")?;
        let mut w = BufWriter::new(f);
        deid_engine::output::write_csv(&problem, eval, &mut w, d)?;
        w.flush()?;
    }
    let report = search_report(
        &problem,
        &outcome,
        eval.as_ref(),
        spec.risk_threshold.unwrap_or(DEFAULT_RISK_THRESHOLD),
    );
    write_report(args.report.as_deref(), &report)?;
    if eval.is_none() {
        anyhow::bail!(
            "no transformation satisfies the privacy models within the limits ({} checks, stopped: {})",
            outcome.checks,
            outcome.stop.name()
        );
    }
    Ok(())
}
