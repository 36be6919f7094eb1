//! `deid apply`: write the output of a recoding plan (`deid anonymize --plan-output`) for a CSV,
//! row by row in constant memory — byte for byte what `deid anonymize --output` writes for the
//! same data. Rows the plan does not cover are suppressed and counted (`--strict`: refused).
//! Parquet in or out (by the `.parquet` extension) streams too: the input is read row group by
//! row group as the text of the typed→text rule, the output converted as it is written.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use deid_engine::data::{CsvOptions, CsvScanner};
use deid_engine::plan::{Applied, Applier, ColumnRole, Plan};

use super::LazyFile;
use crate::job::plan::read_plan;

/// Flags of `deid apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The recoding plan (JSON, from `deid anonymize --plan-output` or `GET /v1/jobs/{id}/plan`).
    #[arg(long)]
    pub plan: PathBuf,
    /// The CSV to recode (the plan's columns, its delimiter), or a Parquet file (`.parquet`)
    /// or a directory of Parquet part files read as one table.
    #[arg(long)]
    pub input: PathBuf,
    /// Write the recoded CSV here (Parquet if the name ends in `.parquet`).
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
    let delimiter = plan.delimiter.bytes().next().unwrap_or(b',');
    let count_column = (plan.columns.iter())
        .find(|c| c.role == ColumnRole::Count)
        .map(|c| c.name.clone());
    let mut output = LazyFile::new(&args.output, delimiter, count_column);
    let name = args.input.display().to_string();
    let result = match crate::parquet::is_parquet(&args.input) {
        true => crate::parquet::open(&args.input, delimiter)
            .and_then(|input| Ok(applier.apply(input, &mut output, &name, args.strict)?)),
        false => File::open(&args.input)
            .with_context(|| format!("cannot open {}", args.input.display()))
            .and_then(|input| {
                let input = BufReader::with_capacity(1 << 16, input);
                Ok(applier.apply(input, &mut output, &name, args.strict)?)
            }),
    };
    let applied = match result.and_then(|applied| output.finish().map(|()| applied)) {
        Ok(applied) => applied,
        Err(e) => {
            // Nothing half-written stays behind.
            let _ = std::fs::remove_file(&args.output);
            return Err(e);
        }
    };
    if !args.quiet {
        eprintln!("{}", summary(&applied));
    }
    Ok(())
}

/// The header of the CSV (or Parquet file) at `path`, read with the plan's delimiter.
fn input_header(path: &Path, plan: &Plan) -> anyhow::Result<Vec<String>> {
    if crate::parquet::is_parquet(path) {
        return Ok(crate::parquet::open(path, b',')?.column_names());
    }
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
