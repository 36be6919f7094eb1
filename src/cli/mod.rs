//! The `deid` command line: `evaluate` (one check of a given transformation) here; `anonymize`,
//! `apply`, `risk`, `bench` and `bench-api` in their own modules.
//!
//! Flags and the `--config` JSON (the job specification of [`crate::job::spec`]) can be combined;
//! flags extend or override the file.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

pub mod anonymize;
pub mod apply;
pub mod bench;
pub mod bench_api;
pub mod bench_apply;
pub mod names;
pub mod risk;
pub mod synth;
pub mod verify;

use crate::job::hierarchy::{Frontend, delimiter_byte};
use crate::job::plan::HashingReader;
use crate::job::report::peak_memory_bytes;
use crate::job::spec::{
    AttributeSpec, AttributeType, HierarchyDuplicates, HierarchySource, JobSpec, PopulationSpec,
    PrivacySpec, QualitySpec, ResearchSubsetSpec, SearchLimits, SuppressedSpec, Task,
};
use crate::job::task::{self, Host, Outcome, Run, Verdict};
use deid_engine::names::alternatives;
use deid_engine::{
    CancelFlag, CsvOptions, NoObserver, Problem, ProgressObserver, QualityModel, Table,
};

/// Command-line interface of deid.
#[derive(Debug, Parser)]
#[command(
    name = "deid",
    version,
    about = "De-identification of tabular personal data"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check one transformation and print a JSON report.
    Evaluate(EvaluateArgs),
    /// Run the HTTP service (what `deid` does without arguments).
    Serve(crate::config::ServeArgs),
    /// Exit 0 if the local service answers `/healthz` (container health checks).
    Healthcheck(crate::app::HealthcheckArgs),
    /// Measure `GET /v1/jobs/{id}` throughput against a running service while two jobs run.
    BenchApi(bench_api::BenchArgs),
    /// Search the best transformation within a time limit; write the CSV and a JSON report.
    Anonymize(anonymize::AnonymizeArgs),
    /// Write the output of a recoding plan for a CSV, row by row (what `anonymize` writes).
    Apply(apply::ApplyArgs),
    /// Run benchmark problems on a directory of datasets and print a table.
    Bench(bench::BenchArgs),
    /// Build a hierarchy from a builder specification (or the suggested one) and print it as CSV.
    Hierarchy(HierarchyArgs),
    /// Detect the type of every column and print it with a suggested hierarchy specification.
    Profile(ProfileArgs),
    /// Print the re-identification risks of a dataset as it is (JSON: the report's `risk`).
    Risk(risk::RiskArgs),
    /// Re-check released data against every privacy model of a job, from scratch (JSON verdict;
    /// exit status 5 when a model fails).
    Verify(verify::VerifyArgs),
}

/// Flags of `deid hierarchy`.
#[derive(Debug, Args)]
pub struct HierarchyArgs {
    /// Input file: CSV, or Parquet by its `.parquet` extension or a directory of Parquet part
    /// files read as one table (docs/definitions.md §8).
    #[arg(long)]
    pub input: PathBuf,
    /// Field delimiter of the input (default `,`).
    #[arg(long)]
    pub delimiter: Option<char>,
    /// The column to build a hierarchy for.
    #[arg(long)]
    pub column: String,
    /// Builder specification JSON (default: the suggestion of the type detection).
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Delimiter of the printed hierarchy (default `;`, ARX's format).
    #[arg(long, default_value_t = ';')]
    pub output_delimiter: char,
}

/// Flags of `deid profile`.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Input file: CSV, or Parquet by its `.parquet` extension or a directory of Parquet part
    /// files read as one table (docs/definitions.md §8).
    #[arg(long)]
    pub input: PathBuf,
    /// Field delimiter of the input (default `,`).
    #[arg(long)]
    pub delimiter: Option<char>,
}

/// Flags describing the data and the problem (shared by evaluate and anonymize).
#[derive(Debug, Args, Clone, Default)]
pub struct ProblemArgs {
    /// Input file: CSV, or Parquet by its `.parquet` extension or a directory of Parquet part
    /// files read as one table (docs/definitions.md §8).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Field delimiter of the input (default `,`).
    #[arg(long)]
    pub delimiter: Option<char>,
    /// `COLUMN=FILE`: makes COLUMN a quasi-identifier with the ARX-format hierarchy in FILE
    /// (delimiter detected: the one that gives its rows one width). Repeatable.
    #[arg(long = "hierarchy", value_name = "COLUMN=FILE")]
    pub hierarchies: Vec<String>,
    /// A sensitive column. Repeatable.
    #[arg(long = "sensitive", value_name = "COLUMN")]
    pub sensitive: Vec<String>,
    /// `COLUMN=FUNCTION[@DATE_FORMAT]`: makes COLUMN a quasi-identifier whose values are
    /// replaced by an aggregate of their class (`arithmetic_mean`, `geometric_mean`, `median`,
    /// `mode`, `interval`, `set`; dates with a format such as `dd.MM.yyyy`). Repeatable.
    #[arg(long = "microaggregate", value_name = "COLUMN=FUNCTION")]
    pub microaggregate: Vec<String>,
    /// An identifying column (removed from the output). Repeatable.
    #[arg(long = "identifying", value_name = "COLUMN")]
    pub identifying: Vec<String>,
    /// A privacy model, e.g. `k-anonymity(k=5)`. Repeatable.
    #[arg(long = "privacy", value_name = "MODEL")]
    pub privacy: Vec<String>,
    /// Share of records that may be suppressed, in [0, 1].
    #[arg(long, allow_negative_numbers = true)]
    pub suppression_limit: Option<f64>,
    /// Quality model the search minimises (default loss).
    #[arg(long, value_parser = names::quality_parser())]
    pub quality: Option<QualityModel>,
    /// Values listed in several rows of a hierarchy with different generalizations: `reject`
    /// (default) or `last` (ARX: the last row generalizes, every row counts for the domain
    /// shares; the report warns).
    #[arg(long, value_name = "POLICY", value_parser = parse_hierarchy_duplicates)]
    pub hierarchy_duplicates: Option<HierarchyDuplicates>,
    /// What a suppressed record looks like in the output: `mask` (default: quasi-identifiers and
    /// sensitive attributes become the marker), `remove` (left out) or `keep_sensitive` (ARX's
    /// output; unsafe: the suppressed block can disclose sensitive values).
    #[arg(long, value_name = "MODE", value_parser = parse_suppressed)]
    pub suppressed: Option<SuppressedSpec>,
    /// The text of suppressed values (default `*`); refused if a quasi-identifier or sensitive
    /// column contains it.
    #[arg(long, value_name = "TEXT")]
    pub suppression_marker: Option<String>,
    /// Neutralize spreadsheet formulas in the output CSV: cells (and column names) starting
    /// with `=`, `+`, `-`, `@`, tab or CR get a leading `'` (OWASP CSV injection); off by
    /// default, the output is faithful to the data.
    #[arg(long)]
    pub neutralize_formulas: bool,
    /// The population the data were sampled from.
    #[command(flatten)]
    pub population: PopulationArgs,
    /// Research subset: the records to release when the input is the population they were
    /// drawn from (δ-presence, k-map without alpha) — those whose COLUMN holds a yes/no mark
    /// (1/0, true/false, yes/no; empty is no), or `--research-subset-value`.
    #[arg(long, value_name = "COLUMN", conflicts_with = "research_subset_rows")]
    pub research_subset_column: Option<String>,
    /// With `--research-subset-column`: the value that marks a released record.
    #[arg(long, value_name = "VALUE", requires = "research_subset_column")]
    pub research_subset_value: Option<String>,
    /// Research subset as record numbers (1 = the first record after the header): a file of
    /// numbers separated by commas, spaces or new lines.
    #[arg(long, value_name = "FILE")]
    pub research_subset_rows: Option<PathBuf>,
    /// The input is a frequency table: each row stands for as many records as COLUMN says
    /// (decimal digits, 0 to 4294967295; rows counting 0 are left out). The output is a
    /// frequency table with the same count column.
    #[arg(long, value_name = "COLUMN")]
    pub count_column: Option<String>,
    /// With `--count-column`: COLUMN says how many of each row's records are released (the
    /// research subset of a frequency table).
    #[arg(long, value_name = "COLUMN", requires = "count_column")]
    pub subset_count_column: Option<String>,
    /// Job specification JSON with the same settings.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The population the data were sampled from (at most one flag).
#[derive(Debug, Args, Clone, Default)]
#[group(multiple = false)]
pub struct PopulationArgs {
    /// Population size N (at least the number of records).
    #[arg(long, value_name = "N")]
    pub population_size: Option<u64>,
    /// Sampling fraction in (0, 1]: the population is records / F.
    #[arg(long, value_name = "F", allow_negative_numbers = true)]
    pub sampling_fraction: Option<f64>,
    /// One of ARX's population presets: usa, uk, germany, france, canada, australia, …
    #[arg(long, value_name = "REGION")]
    pub population_region: Option<String>,
}

impl PopulationArgs {
    /// The population given by a flag, if any.
    pub fn spec(&self) -> Option<PopulationSpec> {
        if self.population_size.is_none()
            && self.sampling_fraction.is_none()
            && self.population_region.is_none()
        {
            return None;
        }
        Some(PopulationSpec {
            size: self.population_size,
            sampling_fraction: self.sampling_fraction,
            region: self.population_region.clone(),
        })
    }
}

/// Parses `--suppressed` (`mask`, `remove` or `keep_sensitive`).
fn parse_suppressed(text: &str) -> Result<SuppressedSpec, String> {
    SuppressedSpec::parse(text).ok_or_else(|| {
        format!(
            "'{text}' is not a mode for suppressed records; expected {}",
            alternatives(SuppressedSpec::NAMES)
        )
    })
}

/// Parses `--hierarchy-duplicates` (`reject` or `last`).
fn parse_hierarchy_duplicates(text: &str) -> Result<HierarchyDuplicates, String> {
    HierarchyDuplicates::parse(text).ok_or_else(|| {
        let names = HierarchyDuplicates::NAMES.map(|n| format!("'{n}'"));
        format!("expected {}, got '{text}'", alternatives(names))
    })
}

/// Flags of `deid evaluate`.
#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// Data and problem.
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// The transformation: `COLUMN=LEVEL,…` (unnamed quasi-identifiers: level 0).
    #[arg(long)]
    pub levels: Option<String>,
    /// Write the anonymized CSV here (Parquet if the name ends in `.parquet`).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Write the JSON report here instead of stdout.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write the CSV even if the transformation does not satisfy the privacy models (the exit
    /// status still says so).
    #[arg(long)]
    pub force: bool,
    /// Seed of differential privacy's sample (default: the configuration's, else an
    /// unpredictable one; the report gives it).
    #[arg(long, allow_negative_numbers = true)]
    pub seed: Option<u64>,
}

/// Exit statuses of the command line (README, "Exit statuses").
pub mod exit {
    /// Bad input (flags, configuration, data, hierarchies) and every other error.
    pub const BAD_INPUT: i32 = 2;
    /// `deid anonymize`: no transformation satisfies the privacy models within the limits.
    pub const NO_SOLUTION: i32 = 3;
    /// `deid evaluate`: the transformation does not satisfy the privacy models.
    pub const NOT_ANONYMOUS: i32 = 4;
    /// `deid verify`: the released data violate a privacy model of the job.
    pub const NOT_VERIFIED: i32 = 5;
}

/// An error that ends the process with a specific [`exit`] status.
#[derive(Debug)]
pub struct Exit {
    /// The exit status.
    pub code: i32,
    /// What to tell the user.
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// Runs a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    crate::tls::install_crypto_provider();
    match cli.command {
        Some(Command::Evaluate(args)) => evaluate(args),
        Some(Command::Serve(args)) => serve(args),
        Some(Command::BenchApi(args)) => bench_api::run(args),
        Some(Command::Healthcheck(args)) => crate::app::healthcheck(&args),
        None => serve(crate::config::ServeArgs::default()),
        Some(Command::Anonymize(args)) => anonymize::run(args),
        Some(Command::Apply(args)) => apply::run(args),
        Some(Command::Bench(args)) => bench::run(args),
        Some(Command::Hierarchy(args)) => hierarchy(args),
        Some(Command::Profile(args)) => profile(args),
        Some(Command::Risk(args)) => risk::run(args),
        Some(Command::Verify(args)) => verify::run(args),
    }
}

/// Runs the service until Ctrl-C or SIGTERM.
fn serve(args: crate::config::ServeArgs) -> anyhow::Result<()> {
    crate::telemetry::init_logging(args.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("deid-io")
        .build()?;
    runtime.block_on(async move {
        let app = crate::app::App::build(args).await?;
        app.run(crate::app::shutdown_signal()).await
    })
}

/// Reads the job specification from `--config` and applies the flags on top.
pub fn job_spec(args: &ProblemArgs) -> anyhow::Result<JobSpec> {
    let mut spec = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the configuration {}", path.display()))?;
            JobSpec::from_json(&text)
                .with_context(|| format!("in the configuration {}", path.display()))?
        }
        None => JobSpec::default(),
    };
    if let Some(input) = &args.input {
        spec.input = Some(input.clone());
    }
    if let Some(d) = args.delimiter {
        spec.delimiter = Some(d);
    }
    apply_generalization_flags(&mut spec, args)?;
    refuse_role_conflicts(args)?;
    for (cols, kind) in [
        (&args.sensitive, AttributeType::Sensitive),
        (&args.identifying, AttributeType::Identifying),
    ] {
        for col in cols {
            let entry = spec
                .attributes
                .entry(col.clone())
                .or_insert_with(|| AttributeSpec::new(kind));
            entry.kind = kind;
        }
    }
    spec.privacy
        .extend(args.privacy.iter().cloned().map(PrivacySpec::Text));
    if let Some(s) = args.suppression_limit {
        spec.suppression_limit = Some(s);
    }
    if let Some(q) = args.quality {
        spec.quality = Some(QualitySpec::Name(q.name().to_string()));
    }
    if let Some(m) = args.suppressed {
        spec.suppressed = Some(m);
    }
    if let Some(m) = &args.suppression_marker {
        spec.suppression_marker = Some(m.clone());
    }
    if args.neutralize_formulas {
        spec.neutralize_formulas = Some(true);
    }
    if let Some(d) = args.hierarchy_duplicates {
        spec.hierarchy_duplicates = Some(d);
    }
    if let Some(p) = args.population.spec() {
        spec.population = Some(p);
    }
    if let Some(column) = &args.research_subset_column {
        spec.research_subset = Some(ResearchSubsetSpec {
            column: Some(column.clone()),
            value: args.research_subset_value.clone(),
            rows: None,
        });
    }
    if let Some(path) = &args.research_subset_rows {
        spec.research_subset = Some(ResearchSubsetSpec {
            rows: Some(read_record_numbers(path)?),
            ..Default::default()
        });
    }
    if let Some(c) = &args.count_column {
        spec.count_column = Some(c.clone());
    }
    if let Some(c) = &args.subset_count_column {
        spec.subset_count_column = Some(c.clone());
    }
    Ok(spec)
}

/// Applies `--hierarchy` and `--microaggregate` (each column at most once over both): the
/// column becomes quasi-identifying with that hierarchy file or aggregation function.
fn apply_generalization_flags(spec: &mut JobSpec, args: &ProblemArgs) -> anyhow::Result<()> {
    let mut generalized = std::collections::BTreeMap::new();
    for h in &args.hierarchies {
        let (col, file) = h
            .split_once('=')
            .with_context(|| format!("--hierarchy expects COLUMN=FILE, got '{h}'"))?;
        declare_once(&mut generalized, col, "--hierarchy")?;
        let entry = spec
            .attributes
            .entry(col.to_string())
            .or_insert_with(|| AttributeSpec::new(AttributeType::QuasiIdentifying));
        entry.kind = AttributeType::QuasiIdentifying;
        entry.hierarchy = Some(HierarchySource::File {
            file: file.into(),
            delimiter: None,
        });
    }
    for m in &args.microaggregate {
        let (col, rest) = m.split_once('=').with_context(|| {
            format!("--microaggregate expects COLUMN=FUNCTION[@DATE_FORMAT], got '{m}'")
        })?;
        declare_once(&mut generalized, col, "--microaggregate")?;
        let (function, date_format) = match rest.split_once('@') {
            Some((f, d)) => (f, Some(d.to_string())),
            None => (rest, None),
        };
        let entry = spec
            .attributes
            .entry(col.to_string())
            .or_insert_with(|| AttributeSpec::new(AttributeType::QuasiIdentifying));
        entry.kind = AttributeType::QuasiIdentifying;
        entry.hierarchy = None;
        entry.microaggregation = Some(crate::job::spec::MicroaggregationSpec {
            function: function.to_string(),
            missing: entry
                .microaggregation
                .as_ref()
                .and_then(|m| m.missing.clone()),
            date_format,
        });
    }
    Ok(())
}

/// A column given two roles on the command line is refused: `--identifying` (the column is
/// removed) with `--sensitive`, `--hierarchy` or `--microaggregate`. `--sensitive` with
/// `--hierarchy` is one role: a sensitive attribute with the hierarchy that t-closeness with
/// the hierarchical distance reads.
fn refuse_role_conflicts(args: &ProblemArgs) -> anyhow::Result<()> {
    let columns = |flags: &[String]| -> Vec<String> {
        flags
            .iter()
            .map(|f| f.split_once('=').map_or(f.as_str(), |(c, _)| c).to_string())
            .collect()
    };
    let microaggregated = columns(&args.microaggregate);
    let others = [
        ("--sensitive", args.sensitive.clone()),
        ("--hierarchy", columns(&args.hierarchies)),
        ("--microaggregate", microaggregated.clone()),
    ];
    for col in &args.identifying {
        if let Some((flag, _)) = others.iter().find(|(_, cols)| cols.contains(col)) {
            anyhow::bail!(
                "column '{col}' is given --identifying and {flag}: an identifying column is \
                 removed from the output, so it can have no other role"
            );
        }
    }
    if let Some(col) = args.sensitive.iter().find(|c| microaggregated.contains(c)) {
        anyhow::bail!(
            "column '{col}' is given --sensitive and --microaggregate: a microaggregated column \
             is a quasi-identifier"
        );
    }
    Ok(())
}

/// Reads record numbers separated by commas, white space or new lines.
fn read_record_numbers(path: &Path) -> anyhow::Result<Vec<u64>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--research-subset-rows: cannot read {}", path.display()))?;
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<u64>().map_err(|_| {
                anyhow::anyhow!(
                    "--research-subset-rows: {} holds '{t}': expected record numbers \
                     (1 = the first record after the header) separated by commas or new lines",
                    path.display()
                )
            })
        })
        .collect()
}

/// Reads the input `spec` names (CSV, or Parquet: a `.parquet` file or a directory of parts),
/// with the SHA-256 of its bytes (the file as it is) if `hash`.
fn load_table(spec: &JobSpec, hash: bool) -> anyhow::Result<(Table, Option<String>)> {
    let Some(input) = &spec.input else {
        bail!("no input: give --input FILE or \"input\" in the configuration");
    };
    if crate::parquet::is_parquet(input) {
        let digest = match hash {
            true => file_digest(input)?,
            false => None,
        };
        return Ok((read_table(input, spec.delimiter)?, digest));
    }
    let file = File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
    let mut reader = HashingReader::new(file, hash);
    let table = read_csv(
        BufReader::with_capacity(1 << 16, &mut reader),
        &input.display().to_string(),
        spec.delimiter,
    )?;
    Ok((table, reader.digest()))
}

/// The SHA-256 of the file at `path` (of a directory of Parquet part files: of their bytes one
/// after the other, in name order).
fn file_digest(path: &Path) -> anyhow::Result<Option<String>> {
    use std::io::Read;
    let mut bytes: Box<dyn Read> = Box::new(std::io::empty());
    for part in crate::parquet::parts(path)? {
        let file = File::open(&part).with_context(|| format!("cannot open {}", part.display()))?;
        bytes = Box::new(bytes.chain(file));
    }
    let mut reader = HashingReader::new(BufReader::with_capacity(1 << 16, bytes), true);
    std::io::copy(&mut reader, &mut std::io::sink())
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(reader.digest())
}

/// The command line's side of a running task: Ctrl-C cancels, an optional progress bar
/// observes, the process's peak memory is the task's.
pub(crate) struct CliHost<'a> {
    cancel: CancelFlag,
    observer: &'a (dyn ProgressObserver + Sync),
}

impl Host for CliHost<'_> {
    fn cancel(&self) -> &CancelFlag {
        &self.cancel
    }

    fn observer<'b>(&'b self, _: &'b Problem) -> Box<dyn ProgressObserver + 'b> {
        Box::new(Forward(self.observer))
    }

    fn peak_memory(&self) -> Option<u64> {
        peak_memory_bytes()
    }
}

/// Passes a borrowed observer's reports on.
struct Forward<'a>(&'a (dyn ProgressObserver + Sync));

impl ProgressObserver for Forward<'_> {
    fn progress(&self, p: &deid_engine::Progress) {
        self.0.progress(p);
    }

    fn improved(&self, i: &deid_engine::Improvement) {
        self.0.improved(i);
    }
}

/// The output file, created at the first write: a task that writes no CSV leaves no file. A
/// `.parquet` path gets the CSV converted to Parquet as it is written (`crate::parquet::write`).
pub(crate) struct LazyFile<'a> {
    path: &'a Path,
    /// The CSV's delimiter (to read it back for Parquet).
    delimiter: u8,
    /// A frequency table's count column (INT64 in Parquet).
    count_column: Option<String>,
    file: Option<Sink>,
}

/// Where a [`LazyFile`] writes.
enum Sink {
    Csv(BufWriter<File>),
    Parquet(crate::parquet::ParquetSink),
}

impl<'a> LazyFile<'a> {
    /// An output at `path` for a CSV with `delimiter` (and `count_column`, if a frequency table).
    pub(crate) fn new(path: &'a Path, delimiter: u8, count_column: Option<String>) -> Self {
        LazyFile {
            path,
            delimiter,
            count_column,
            file: None,
        }
    }

    /// Flushes the file (and, for Parquet, waits until it is complete).
    pub(crate) fn finish(self) -> anyhow::Result<()> {
        match self.file {
            Some(Sink::Csv(mut f)) => f.flush()?,
            Some(Sink::Parquet(p)) => p
                .finish()
                .with_context(|| format!("cannot write {}", self.path.display()))?,
            None => {}
        }
        Ok(())
    }

    fn open(&mut self) -> std::io::Result<&mut Sink> {
        if self.file.is_none() {
            let f = File::create(self.path).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot create {}: {e}", self.path.display()),
                )
            })?;
            let sink = match crate::parquet::is_parquet(self.path) {
                true => Sink::Parquet(crate::parquet::ParquetSink::new(
                    f,
                    self.delimiter,
                    self.count_column.clone(),
                    self.path.display().to_string(),
                )?),
                false => Sink::Csv(BufWriter::new(f)),
            };
            self.file = Some(sink);
        }
        Ok(self.file.as_mut().expect("just created"))
    }
}

impl Write for LazyFile<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        match self.open()? {
            Sink::Csv(f) => f.write(data),
            Sink::Parquet(p) => p.write(data),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.file {
            Some(Sink::Csv(f)) => f.flush(),
            _ => Ok(()),
        }
    }
}

/// Where `run_task` writes what a task produces.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Outputs<'a> {
    /// The anonymized CSV.
    pub csv: Option<&'a Path>,
    /// The JSON report (stdout if `None`).
    pub report: Option<&'a Path>,
    /// The recoding plan (`deid anonymize --plan-output`).
    pub plan: Option<&'a Path>,
}

/// Loads the input of `spec` and runs its task, writing the CSV, the report (stdout by
/// default) and the plan where `outputs` says. `cancel` stops a search; `observer` follows it.
pub(crate) fn run_task(
    spec: &JobSpec,
    outputs: Outputs<'_>,
    force_output: bool,
    cancel: CancelFlag,
    observer: &(dyn ProgressObserver + Sync),
) -> anyhow::Result<Outcome> {
    let search = spec.search_config(&SearchLimits::CLI)?;
    let started = std::time::Instant::now();
    let (table, input_sha256) = load_table(spec, outputs.plan.is_some())?;
    let host = CliHost { cancel, observer };
    let delimiter = delimiter_byte(spec.delimiter.unwrap_or(','), "delimiter")?;
    let run = Run {
        spec,
        frontend: Frontend::Cli {
            base: Path::new("."),
        },
        search: &search,
        host: &host,
        job: None,
        delimiter,
        started,
        force_output,
        max_output_bytes: None,
        plan: outputs.plan.is_some(),
        input_sha256: input_sha256.as_deref(),
    };
    let mut file =
        (outputs.csv).map(|path| LazyFile::new(path, delimiter, spec.count_column.clone()));
    let outcome = task::run(
        &run,
        table,
        file.as_mut().map(|f| f as &mut (dyn Write + Send)),
    )?;
    if let Some(f) = file {
        f.finish()?;
    }
    if let Some(r) = &outcome.report {
        write_report(outputs.report, r)?;
    }
    if let (Some(path), Some(plan)) = (outputs.plan, &outcome.plan) {
        let plan = plan
            .as_ref()
            .map_err(|e| anyhow::anyhow!("no recoding plan: {e}"))?;
        std::fs::write(path, plan)
            .with_context(|| format!("cannot write the plan {}", path.display()))?;
    }
    Ok(outcome)
}

/// Reads a CSV file with a header, or a Parquet file (by its `.parquet` extension) as the CSV
/// text of the typed→text rule.
pub(crate) fn read_table(path: &Path, delimiter: Option<char>) -> anyhow::Result<Table> {
    if crate::parquet::is_parquet(path) {
        let d = delimiter_byte(delimiter.unwrap_or(','), "delimiter")?;
        let input = crate::parquet::open(path, d)?;
        return read_csv(input, &path.display().to_string(), delimiter);
    }
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    read_csv(BufReader::new(file), &path.display().to_string(), delimiter)
}

/// Reads a CSV with a header from `input` (named `name` in errors).
fn read_csv(
    input: impl std::io::Read + Send,
    name: &str,
    delimiter: Option<char>,
) -> anyhow::Result<Table> {
    let delimiter = delimiter_byte(delimiter.unwrap_or(','), "delimiter")?;
    let options = CsvOptions {
        delimiter,
        has_header: true,
    };
    Ok(Table::read_csv(input, options, name)?)
}

fn hierarchy(args: HierarchyArgs) -> anyhow::Result<()> {
    let table = read_table(&args.input, args.delimiter)?;
    let idx = table.require_column(&args.column, "--column")?;
    let field = format!("hierarchies.{}", args.column);
    let value: serde_json::Value = match &args.spec {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{} is not valid JSON", path.display()))?
        }
        None => {
            let profile = deid_engine::profile::detect(table.column(idx));
            let suggestion = serde_json::to_value(&profile.suggested_hierarchy)?;
            eprintln!("suggested specification: {suggestion}");
            suggestion
        }
    };
    let h = crate::job::hierarchy::from_builder(&value, Some(&table), &args.column, &field)?;
    let d = delimiter_byte(args.output_delimiter, "--output-delimiter")?;
    print!("{}", h.to_csv(d));
    Ok(())
}

fn profile(args: ProfileArgs) -> anyhow::Result<()> {
    let table = read_table(&args.input, args.delimiter)?;
    let profiles: Vec<_> = table
        .columns()
        .iter()
        .map(deid_engine::profile::detect)
        .collect();
    write_report(None, &serde_json::to_value(profiles)?)
}

/// Parses `--levels COLUMN=LEVEL,…` into the specification's `levels`.
fn parse_levels(text: &str) -> anyhow::Result<std::collections::BTreeMap<String, u8>> {
    let mut levels = std::collections::BTreeMap::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (col, level) = part
            .split_once('=')
            .with_context(|| format!("--levels expects COLUMN=LEVEL, got '{part}'"))?;
        let l: u8 = level
            .trim()
            .parse()
            .with_context(|| format!("--levels: '{level}' is not a level number"))?;
        levels.insert(col.trim().to_string(), l);
    }
    Ok(levels)
}

fn evaluate(args: EvaluateArgs) -> anyhow::Result<()> {
    let mut spec = job_spec(&args.problem)?;
    if let Some(text) = &args.levels {
        spec.levels = Some(parse_levels(text)?);
    }
    if spec.task() == Task::Risk {
        bail!("the configuration's task is 'risk': use deid risk");
    }
    // The levels make it an evaluation, whatever the configuration's task says.
    spec.task = Some(Task::Evaluate);
    spec.seed = args.seed.or(spec.seed);
    let outcome = run_task(
        &spec,
        Outputs {
            csv: args.output.as_deref(),
            report: args.report.as_deref(),
            plan: None,
        },
        args.force,
        CancelFlag::new(),
        &NoObserver,
    )?;
    if let Verdict::Failed(f) = outcome.verdict {
        let csv = match (&args.output, outcome.wrote_csv) {
            (Some(_), true) => "the CSV was written anyway (--force)",
            (Some(_), false) => "no CSV written (--force writes it anyway)",
            (None, _) => "no CSV requested",
        };
        return Err(Exit {
            code: exit::NOT_ANONYMOUS,
            message: format!("{}; {csv}", f.message),
        }
        .into());
    }
    Ok(())
}

/// Writes a JSON report to a file or stdout.
pub fn write_report(path: Option<&Path>, report: &serde_json::Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    match path {
        Some(p) => std::fs::write(p, text + "\n")
            .with_context(|| format!("cannot write {}", p.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}")?;
        }
    }
    Ok(())
}

/// Records that `column` gets its generalization from `flag`; a column given a hierarchy and an
/// aggregate, or two of either, is refused (the last would silently win).
fn declare_once(
    seen: &mut std::collections::BTreeMap<String, &'static str>,
    column: &str,
    flag: &'static str,
) -> anyhow::Result<()> {
    if let Some(first) = seen.insert(column.to_string(), flag) {
        anyhow::bail!(
            "column '{column}' is given {first} and {flag}: a quasi-identifier has either one \
             hierarchy or one microaggregation"
        );
    }
    Ok(())
}
