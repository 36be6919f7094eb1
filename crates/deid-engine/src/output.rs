//! Writes the anonymized table: header kept (minus identifying columns), row order kept,
//! quasi-identifiers generalized, every quasi-identifier of a suppressed record `*`, everything
//! else unchanged. Streams row by row.

use std::io::Write;

use crate::check::Evaluation;
use crate::error::{EngineError, Result};
use crate::problem::Problem;

/// The text written for a suppressed quasi-identifier.
pub const SUPPRESSED: &str = "*";

/// Streams the anonymized table as CSV with the given delimiter.
pub fn write_csv<W: Write>(
    problem: &Problem,
    evaluation: &Evaluation,
    out: W,
    delimiter: u8,
) -> Result<()> {
    let table = problem.table();
    let levels = &evaluation.result.levels;
    // For every output column: None = copy the value, Some(i) = quasi-identifier i.
    let plan: Vec<(usize, Option<usize>)> = (0..table.columns().len())
        .filter(|c| !problem.identifying_columns().contains(c))
        .map(|c| (c, problem.qi_columns().iter().position(|&q| q == c)))
        .collect();
    let q = levels.len();
    let mut w = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .from_writer(out);
    let io = |e: csv::Error| EngineError::Output(e.to_string());
    w.write_record(plan.iter().map(|(c, _)| table.column(*c).name.as_str()))
        .map_err(io)?;
    let mut record: Vec<&str> = Vec::with_capacity(plan.len());
    for (row, &base) in problem.row_groups().iter().enumerate() {
        let class = evaluation.class_of_base[base as usize] as usize;
        let suppressed = evaluation.suppressed[class];
        record.clear();
        for &(c, qi) in &plan {
            let value = match qi {
                None => {
                    let col = table.column(c);
                    col.dict.value(col.codes.get(row))
                }
                Some(_) if suppressed => SUPPRESSED,
                Some(i) => {
                    let code = evaluation.groups.codes[class * q + i];
                    problem.hierarchies()[i].label(levels[i] as usize, code, table.column(c))
                }
            };
            record.push(value);
        }
        w.write_record(&record).map_err(io)?;
    }
    w.flush().map_err(|e| EngineError::Output(e.to_string()))?;
    Ok(())
}
