//! `deid apply`: write the output of a recoding plan (`deid anonymize --plan-output`) for a CSV,
//! row by row in constant memory — byte for byte what `deid anonymize --output` writes for the
//! same data. Rows the plan does not cover are suppressed and counted (`--strict`: refused).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use deid_engine::data::{CsvOptions, CsvScanner};
use deid_engine::plan::{Applied, Applier, Plan};

use crate::job::plan::read_plan;

/// Flags of `deid apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The recoding plan (JSON, from `deid anonymize --plan-output` or `GET /v1/jobs/{id}/plan`).
    #[arg(long)]
    pub plan: PathBuf,
    /// The CSV to recode (the plan's columns, its delimiter).
    #[arg(long)]
    pub input: PathBuf,
    /// Write the recoded CSV here.
    #[arg(long)]
    pub output: PathBuf,
    /// Fail (exit status 2, no output kept) on the first row the plan does not cover instead
    /// of suppressing it.
    #[arg(long)]
    pub strict: bool,
    /// The input is a frequency table with this count column (the plan's own count column, or
    /// an extra column when the plan was made on records).
    #[arg(long, value_name = "COLUMN")]
    pub count_column: Option<String>,
    /// No summary on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `deid apply`.
pub fn run(args: ApplyArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.plan)
        .with_context(|| format!("cannot read the plan {}", args.plan.display()))?;
    let mut plan =
        read_plan(&text).with_context(|| format!("in the plan {}", args.plan.display()))?;
    if let Some(name) = &args.count_column {
        let header = input_header(&args.input, &plan)?;
        plan.with_count_column(&header, name)?;
    }
    let applier =
        Applier::new(&plan).with_context(|| format!("in the plan {}", args.plan.display()))?;
    let input =
        File::open(&args.input).with_context(|| format!("cannot open {}", args.input.display()))?;
    let output = File::create(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let result = applier.apply(
        BufReader::with_capacity(1 << 16, input),
        BufWriter::with_capacity(1 << 16, output),
        &args.input.display().to_string(),
        args.strict,
    );
    let applied = match result {
        Ok(applied) => applied,
        Err(e) => {
            // Nothing half-written stays behind.
            let _ = std::fs::remove_file(&args.output);
            return Err(e.into());
        }
    };
    if !args.quiet {
        eprintln!("{}", summary(&applied));
    }
    Ok(())
}

/// The header of the CSV at `path`, read with the plan's delimiter.
fn input_header(path: &Path, plan: &Plan) -> anyhow::Result<Vec<String>> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let options = CsvOptions {
        delimiter: plan.delimiter.bytes().next().unwrap_or(b','),
        has_header: true,
    };
    let scanner = CsvScanner::table(BufReader::new(file), options, &path.display().to_string())?;
    Ok(scanner.columns().to_vec())
}

/// The line `deid apply` prints on stderr: rows read and written, records removed, and the rows
/// the plan did not cover.
pub fn summary(a: &Applied) -> String {
    let mut line = format!(
        "deid apply: {} rows read, {} rows written ({} records)",
        a.rows_read, a.rows, a.records
    );
    if a.removed > 0 {
        line += &format!(", {} suppressed records removed", a.removed);
    }
    line += &format!(
        "; {} rows ({} records) not covered by the plan, suppressed",
        a.uncovered_rows, a.uncovered_records
    );
    line
}
