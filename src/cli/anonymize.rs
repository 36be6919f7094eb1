//! `deid anonymize`: search the best transformation within a time limit, write the anonymized CSV
//! and a JSON report (the `deid evaluate` fields plus the search statistics and trace).

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Outputs, ProblemArgs, job_spec, run_task};
use crate::job::spec::{DurationSpec, GeneticSpec, Task};
use crate::job::task::Verdict;
use deid_engine::local::LocalMethod;
use deid_engine::{Algorithm, CancelFlag, Improvement, NoObserver, Progress, ProgressObserver};

/// Flags of `deid anonymize`.
#[derive(Debug, Args)]
pub struct AnonymizeArgs {
    /// Data and problem.
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Search algorithm (default auto); `igreedy` is short for `improved-greedy`.
    #[arg(long, value_parser = super::names::algorithm_parser())]
    pub algorithm: Option<Algorithm>,
    /// Time limit, e.g. `500ms`, `5s`, `2m` (default 30s).
    #[arg(long)]
    pub time_limit: Option<String>,
    /// Stop after this many checks.
    #[arg(long, allow_negative_numbers = true)]
    pub check_limit: Option<u64>,
    /// Seed of the randomized algorithms (default 0).
    #[arg(long, allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// Worker threads (default: all cores); results do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Local generalization with at most N steps, each publishing ≥ 1/N of the records
    /// (the specification's `local.iterations`; 100 is ARX's default).
    #[arg(long, value_name = "N")]
    pub local_iterations: Option<u32>,
    /// Local generalization: the quality model's gs-factor in every step (default 0).
    #[arg(
        long,
        value_name = "G",
        requires = "local_iterations",
        allow_negative_numbers = true
    )]
    pub local_gs_factor: Option<f64>,
    /// Local generalization without the refinement of its classes (ARX's procedure's output;
    /// the specification's `local.refine: false`).
    #[arg(long, requires = "local_iterations")]
    pub no_local_refine: bool,
    /// Local generalization's method: `auto` (the default: the sweep where every model is
    /// k-anonymity or estimated k-map and the space is small enough, else the steps), `steps`
    /// (ARX's procedure) or `sweep` (every transformation in order of its mean domain share);
    /// the specification's `local.method`. Turns local generalization on by itself.
    #[arg(long, value_name = "METHOD", value_parser = super::names::local_method_parser())]
    pub local_method: Option<LocalMethod>,
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
    #[arg(long, allow_negative_numbers = true)]
    pub elite_fraction: Option<f64>,
    /// Genetic algorithm: crossover fraction.
    #[arg(long, allow_negative_numbers = true)]
    pub crossover_fraction: Option<f64>,
    /// Genetic algorithm: production fraction.
    #[arg(long, allow_negative_numbers = true)]
    pub production_fraction: Option<f64>,
    /// Genetic algorithm: mutation probability.
    #[arg(long, allow_negative_numbers = true)]
    pub mutation_probability: Option<f64>,
    /// Genetic algorithm: generations between migrations.
    #[arg(long)]
    pub immigration_interval: Option<u32>,
    /// Genetic algorithm: migrating fraction.
    #[arg(long, allow_negative_numbers = true)]
    pub immigration_fraction: Option<f64>,
    /// Write the anonymized CSV here (Parquet if the name ends in `.parquet`).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Write the JSON report here instead of stdout.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write the recoding plan (JSON; `deid apply --plan`) here.
    #[arg(long, value_name = "FILE")]
    pub plan_output: Option<PathBuf>,
    /// No progress bar, even on a terminal, and no solver statistics on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// The progress bar on stderr (indicatif, redrawn at most 10 times a second): share of the
/// search done, phase, elapsed time, checks and best score so far.
struct Bar(ProgressBar);

impl Bar {
    fn new() -> Bar {
        let style = ProgressStyle::with_template("[{bar:30}] {percent:>3}% {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("# ");
        let bar = ProgressBar::with_draw_target(Some(100), ProgressDrawTarget::stderr_with_hz(10));
        bar.set_style(style);
        Bar(bar)
    }

    /// Leaves the last state on screen (the report and errors follow on the next line), or
    /// nothing if the search ended before the first snapshot.
    fn finish(&self) {
        if self.0.message().is_empty() {
            self.0.finish_and_clear();
        } else {
            self.0.abandon();
        }
    }
}

impl ProgressObserver for Bar {
    fn progress(&self, p: &Progress) {
        let best = p
            .best_score
            .map_or_else(|| "none yet".to_string(), |s| format!("{s:.6}"));
        self.0
            .set_position((p.progress.clamp(0.0, 1.0) * 100.0).round() as u64);
        self.0.set_message(format!(
            "{} {:.1}s, {} checks, best {}",
            p.phase.name(),
            p.elapsed.as_secs_f64(),
            p.checks,
            best
        ));
    }

    fn improved(&self, _: &Improvement) {}
}

/// The first Ctrl-C (SIGINT) stops the search like a cancel: the best transformation so far
/// is written as the result (`"stop": "cancelled"`); a second one exits at once (status 130).
fn cancel_on_ctrl_c(cancel: &CancelFlag) {
    let cancel = cancel.clone();
    let spawned = std::thread::Builder::new()
        .name("deid-ctrl-c".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                if tokio::signal::ctrl_c().await.is_ok() {
                    eprintln!("\nstopping: the best transformation so far is written (Ctrl-C again to abort)");
                    cancel.cancel();
                }
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            });
        });
    // Without the thread Ctrl-C keeps its default behaviour (the process ends).
    drop(spawned);
}

/// Runs `deid anonymize`. Long because it maps each command-line flag onto the job
/// specification, one assignment per flag, before the shared task runs.
pub fn run(args: AnonymizeArgs) -> anyhow::Result<()> {
    let mut spec = job_spec(&args.problem)?;
    match spec.task() {
        Task::Anonymize => {}
        Task::Evaluate => anyhow::bail!(
            "the configuration's task is 'evaluate': use deid evaluate --config (it reads levels)"
        ),
        Task::Risk => anyhow::bail!("the configuration's task is 'risk': use deid risk"),
    }
    if let Some(a) = args.algorithm {
        spec.algorithm = Some(a.name().to_string());
    }
    if let Some(t) = &args.time_limit {
        spec.time_limit = Some(DurationSpec::Text(t.clone()));
    }
    spec.check_limit = args.check_limit.or(spec.check_limit);
    spec.seed = args.seed.or(spec.seed);
    spec.threads = args.threads.or(spec.threads);
    if args.local_iterations.is_some()
        || args.local_gs_factor.is_some()
        || args.local_method.is_some()
    {
        let mut local = spec.local.unwrap_or_default();
        local.iterations = args.local_iterations.or(local.iterations);
        local.gs_factor = args.local_gs_factor.or(local.gs_factor);
        if args.no_local_refine {
            local.refine = Some(false);
        }
        local.method = args.local_method.or(local.method);
        spec.local = Some(local);
    }
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

    let cancel = CancelFlag::new();
    cancel_on_ctrl_c(&cancel);
    let show = !args.quiet && std::io::stderr().is_terminal();
    let bar = show.then(Bar::new);
    let observer: &(dyn ProgressObserver + Sync) = match &bar {
        Some(bar) => bar,
        None => &NoObserver,
    };
    let outcome = run_task(
        &spec,
        Outputs {
            csv: args.output.as_deref(),
            report: args.report.as_deref(),
            plan: args.plan_output.as_deref(),
        },
        false,
        cancel,
        observer,
    );
    if let Some(bar) = &bar {
        bar.finish();
    }
    let pitman = deid_engine::population::pitman_statistics();
    if !args.quiet && pitman.solved + pitman.reused > 0 {
        eprintln!(
            "Pitman's estimator: {} class-size histograms solved, {} reused; {} closed-form \
             roots tested on the literal sums, {} solved by the sums ({} evaluations)",
            pitman.solved, pitman.reused, pitman.residuals, pitman.by_sums, pitman.sums
        );
    }
    if let Verdict::Failed(f) = outcome?.verdict {
        return Err(super::Exit {
            code: super::exit::NO_SOLUTION,
            message: f.message,
        }
        .into());
    }
    Ok(())
}
