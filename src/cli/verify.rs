//! `deid verify`: re-checks released data (a CSV as deid writes it, or its frequency table)
//! against every privacy model of a job, from scratch ([`crate::job::verify`]); prints the
//! verdict as JSON and exits with [`super::exit::NOT_VERIFIED`] when a model fails.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use super::{Exit, ProblemArgs, job_spec, read_table, write_report};
use crate::job::hierarchy::{Frontend, delimiter_byte};
use crate::job::verify::{VerifyError, VerifyRequest, verify};
use deid_engine::CancelFlag;

/// Flags of `deid verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The job (`--config job.json` and the flags of `deid anonymize`); its input is read when
    /// a model needs it (t-closeness, δ-disclosure, β-likeness, population models, research
    /// subsets).
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// The released data: a CSV as deid writes it (delimiter: the job's), or its frequency table;
    /// Parquet by the `.parquet` extension or a directory of Parquet part files.
    #[arg(long, value_name = "FILE")]
    pub released: PathBuf,
    /// The released data are a frequency table with this count column (default: the job's
    /// count column).
    #[arg(long, value_name = "COLUMN")]
    pub released_count_column: Option<String>,
    /// List the quasi-identifier values of violating classes (off by default: counts only).
    #[arg(long)]
    pub show_values: bool,
    /// Write the JSON verdict here instead of stdout.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs `deid verify`.
pub fn run(args: VerifyArgs) -> anyhow::Result<()> {
    let spec = job_spec(&args.problem)?;
    let request = VerifyRequest {
        count_column: args.released_count_column.clone(),
        show_values: args.show_values,
    };
    let delimiter = delimiter_byte(spec.delimiter.unwrap_or(','), "delimiter")?;
    let released: Box<dyn std::io::Read> = match crate::parquet::is_parquet(&args.released) {
        true => Box::new(crate::parquet::open(&args.released, delimiter)?),
        false => Box::new(BufReader::with_capacity(
            1 << 16,
            File::open(&args.released)
                .with_context(|| format!("cannot open {}", args.released.display()))?,
        )),
    };
    let input = || match &spec.input {
        Some(path) => {
            read_table(path, spec.delimiter).map_err(|e| VerifyError::Input(e.to_string()))
        }
        None => Err(VerifyError::NoInput(
            "these privacy models need the job's input: give --input FILE or \"input\" in the \
             configuration"
                .into(),
        )),
    };
    let report = verify(
        &spec,
        &request,
        released,
        delimiter,
        input,
        Frontend::Cli {
            base: Path::new("."),
        },
        &CancelFlag::new(),
    )
    .map_err(|e| match e {
        VerifyError::Released(e) => anyhow::anyhow!("{}: {e}", args.released.display()),
        e => anyhow::anyhow!("{e}"),
    })?;
    write_report(args.report.as_deref(), &serde_json::to_value(&report)?)?;
    if report.passed {
        return Ok(());
    }
    let failed: Vec<&str> = (report.models.iter())
        .filter(|m| !m.passed)
        .map(|m| m.model.as_str())
        .collect();
    Err(Exit {
        code: super::exit::NOT_VERIFIED,
        message: format!(
            "the released data violate {} of the job's privacy models: {}",
            failed.len(),
            failed.join(", ")
        ),
    }
    .into())
}
