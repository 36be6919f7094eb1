//! `deid risk`: the re-identification risks of a dataset as it is, for chosen quasi-identifiers
//! and an optional population model, without anonymizing — the report's `risk` shape
//! (`{"input": RiskReport}`) as JSON on stdout ([`crate::job::task::risk`]).

use std::path::PathBuf;

use clap::Args;

use super::{PopulationArgs, read_table, write_report};
use crate::job::task::risk::RiskRequest;
use deid_engine::risk::QiCombinations;

/// Flags of `deid risk`.
#[derive(Debug, Args)]
pub struct RiskArgs {
    /// Input file: CSV, or Parquet by its `.parquet` extension or a directory of Parquet part
    /// files read as one table (docs/definitions.md §8).
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
    /// Which combinations of the quasi-identifiers get distinction and separation: `auto` (every
    /// one while that is cheap, else the single attributes and the whole set), `all`, or `singles`
    /// (each attribute alone and all together).
    #[arg(long, value_name = "auto|all|singles", value_parser = ["auto", "all", "singles"])]
    pub qi_combinations: Option<String>,
    /// The input is a frequency table: each row stands for as many records as COLUMN says.
    #[arg(long, value_name = "COLUMN")]
    pub count_column: Option<String>,
    /// Write the JSON here instead of stdout.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs `deid risk`.
pub fn run(args: RiskArgs) -> anyhow::Result<()> {
    let table = read_table(&args.input, args.delimiter)?;
    let request = RiskRequest {
        quasi_identifiers: args
            .quasi_identifiers
            .iter()
            .filter(|n| !n.trim().is_empty())
            .cloned()
            .collect(),
        population: args.population.spec(),
        risk_threshold: args.risk_threshold,
        qi_combinations: args.qi_combinations.as_deref().map(|c| match c {
            "all" => QiCombinations::All,
            "singles" => QiCombinations::Singles,
            _ => QiCombinations::Auto,
        }),
        count_column: args.count_column.clone(),
    };
    let analysis = request.analyse(table).map_err(|e| {
        // Name the flag the field comes from.
        let flag = match e.field.as_str() {
            "population.size" => "--population-size".to_string(),
            "population.sampling_fraction" => "--sampling-fraction".to_string(),
            "population.region" => "--population-region".to_string(),
            "risk_threshold" => "--risk-threshold".to_string(),
            "count_column" => "--count-column".to_string(),
            f if f.starts_with("quasi_identifiers") => "--quasi-identifiers".to_string(),
            f => f.to_string(),
        };
        anyhow::anyhow!("{flag}: {}", e.message)
    })?;
    write_report(args.report.as_deref(), &serde_json::to_value(analysis)?)
}
