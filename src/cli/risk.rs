//! `deid risk`: the re-identification risks of a dataset as it is, for chosen quasi-identifiers
//! and an optional population model, without anonymizing — the report's `risk` shape
//! (`{"input": RiskReport}`) as JSON on stdout.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;

use deid_engine::{Hierarchy, PrivacyModel, Problem, ProblemConfig, QuasiIdentifier};

use super::{PopulationArgs, read_table, write_report};
use crate::job::report::DEFAULT_RISK_THRESHOLD;

/// Flags of `deid risk`.
#[derive(Debug, Args)]
pub struct RiskArgs {
    /// Input CSV file.
    #[arg(long)]
    pub input: PathBuf,
    /// Field delimiter of the input (default `,`).
    #[arg(long)]
    pub delimiter: Option<char>,
    /// The quasi-identifiers, comma-separated: `age,zip,sex`.
    #[arg(long, value_name = "A,B,C", value_delimiter = ',', required = true)]
    pub quasi_identifiers: Vec<String>,
    /// The population the data were sampled from (adds population uniqueness).
    #[command(flatten)]
    pub population: PopulationArgs,
    /// Threshold of the "records at risk" statistics (default 0.2).
    #[arg(long, value_name = "T")]
    pub risk_threshold: Option<f64>,
    /// Write the JSON here instead of stdout.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs `deid risk`.
pub fn run(args: RiskArgs) -> anyhow::Result<()> {
    let threshold = args.risk_threshold.unwrap_or(DEFAULT_RISK_THRESHOLD);
    if !(threshold > 0.0 && threshold <= 1.0) {
        bail!("--risk-threshold must lie in (0, 1], got {threshold}");
    }
    let table = read_table(&args.input, args.delimiter)?;
    let mut quasi_identifiers = Vec::new();
    for name in args
        .quasi_identifiers
        .iter()
        .filter(|n| !n.trim().is_empty())
    {
        if quasi_identifiers
            .iter()
            .any(|q: &QuasiIdentifier| &q.column == name)
        {
            bail!("--quasi-identifiers names '{name}' twice");
        }
        let column = table.column(table.require_column(name, "--quasi-identifiers")?);
        // Risks only group the original values: a one-level hierarchy (value → *) per column.
        let rows = column
            .dict
            .values()
            .map(|v| vec![v.to_string(), "*".to_string()])
            .collect();
        quasi_identifiers.push(QuasiIdentifier::new(
            name.clone(),
            Hierarchy::from_rows(rows, name)?,
        ));
    }
    if quasi_identifiers.is_empty() {
        bail!("--quasi-identifiers: name at least one column");
    }
    let population = args
        .population
        .spec()
        .map(|p| p.parse())
        .transpose()
        .context("invalid population")?;
    let config = ProblemConfig {
        quasi_identifiers,
        privacy: vec![PrivacyModel::KAnonymity { k: 1 }],
        population,
        ..ProblemConfig::default()
    };
    let mut config = config;
    config
        .quasi_identifiers
        .sort_by_key(|q| table.column_index(&q.column));
    let problem = Problem::new(table, config).map_err(|e| match e.config_error() {
        Some((field, message)) if field.starts_with("population") => anyhow::anyhow!(
            "{}: {message}",
            match field {
                "population.size" => "--population-size",
                "population.sampling_fraction" => "--sampling-fraction",
                _ => "--population-region",
            }
        ),
        _ => e.into(),
    })?;
    let report = deid_engine::risk::RiskReport::input(&problem, threshold);
    write_report(
        args.report.as_deref(),
        &serde_json::json!({ "input": report }),
    )
}
