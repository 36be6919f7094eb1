//! The recoding plan (`docs/definitions.md` §7): everything needed to write an anonymized
//! output without deid, as data. Per quasi-identifier and step the map from original value to
//! output value, the output classes each step publishes (with their microaggregated values),
//! the suppressed classes, the suppression mode and marker, what each input column becomes and
//! the count columns of a frequency table. Its size follows the domains and the output classes,
//! never the rows.
//!
//! [`Plan::of`] builds it from the same [`CsvOutput`] the output writer uses and then checks it:
//! applied to every distinct tuple of the data it must give the class the output gives, so plan
//! and output cannot disagree. [`Applier`] (module `apply`) streams a CSV through a plan and
//! writes byte for byte what [`CsvOutput::write`] writes for the same data; rows the plan does
//! not cover are suppressed and counted (or refused).
//!
//! A global transformation is a plan of one step; local generalization has one step per search
//! step: a row belongs to the first step whose maps send it to a class that step publishes.
//! The front ends add the `audit` block and the digest of the plan's body (the engine has no
//! JSON and no SHA-256).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::check::Evaluation;
use crate::error::{EngineError, Result};
use crate::local::LocalOutcome;
use crate::output::{Cell, CsvOutput, OutputClasses, OutputOptions, Recoding, SuppressedRecords};
use crate::problem::Problem;

mod apply;

pub use apply::{Applied, Applier};

/// The `format` tag of a plan.
pub const PLAN_FORMAT: &str = "deid-plan";

/// The version of the plan format this engine writes and reads.
pub const PLAN_VERSION: u32 = 1;

/// A recoding with its steps: one transformation per step and the step of every base group.
pub trait Stepped: Recoding {
    /// The levels (one per quasi-identifier) of every step, in order.
    fn step_levels(&self) -> Vec<&[u8]>;
    /// The step that publishes base group `g` (`None`: suppressed).
    fn step_of(&self, g: usize) -> Option<usize>;
}

impl Stepped for Evaluation {
    fn step_levels(&self) -> Vec<&[u8]> {
        vec![&self.result.levels]
    }

    fn step_of(&self, g: usize) -> Option<usize> {
        self.recode(g).map(|_| 0)
    }
}

/// The refined transformations come first (finer before coarser, see `local::refine`), then
/// the search steps.
impl Stepped for LocalOutcome {
    fn step_levels(&self) -> Vec<&[u8]> {
        (self.refined.iter().map(|l| l.as_slice()))
            .chain(self.steps.iter().map(|s| s.levels.as_slice()))
            .collect()
    }

    fn step_of(&self, g: usize) -> Option<usize> {
        let s = LocalOutcome::step_of(self, g)?;
        Some(self.refined_of(g).unwrap_or(self.refined.len() + s))
    }
}

/// A recoding plan (see the module documentation and `docs/definitions.md` §7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Always [`PLAN_FORMAT`].
    pub format: String,
    /// [`PLAN_VERSION`].
    pub version: u32,
    /// The field delimiter of input and output (one character).
    pub delimiter: String,
    /// The input's columns in order, each with what the output makes of it.
    pub columns: Vec<PlanColumn>,
    /// The quasi-identifiers, in the order of the maps and of class values.
    pub quasi_identifiers: Vec<String>,
    /// The microaggregated columns, in the order of class aggregates.
    pub microaggregated: Vec<String>,
    /// How suppressed records are written.
    pub suppression: PlanSuppression,
    /// Whether every written cell has spreadsheet formulas neutralized.
    pub neutralize_formulas: bool,
    /// The steps, in order (one for a global transformation).
    pub steps: Vec<PlanStep>,
    /// The published output classes; a class is referred to by its index.
    pub classes: Vec<PlanClass>,
    /// The output values (one per quasi-identifier, by the last step's maps) of the suppressed
    /// records' tuples.
    pub suppressed: Vec<Vec<String>>,
    /// Where the plan comes from: digests, seed, version (filled by the front end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<PlanAudit>,
    /// SHA-256 (hex) of the plan's canonical JSON without this field (filled by the front end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// One input column of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanColumn {
    /// The column's name in the header.
    pub name: String,
    /// What the output makes of it.
    pub role: ColumnRole,
}

/// What the output makes of an input column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnRole {
    /// Not written (identifying attributes, a frequency table's subset count column).
    Drop,
    /// Written as it is.
    Copy,
    /// Written as it is; the marker in suppressed records (sensitive attributes unless the
    /// mode is `keep_sensitive`).
    Sensitive,
    /// Generalized by the steps' maps; the marker in suppressed records.
    QuasiIdentifying,
    /// The aggregate of the row's class; the marker in suppressed records.
    Microaggregated,
    /// A frequency table's count column: the row's released records (in decimal).
    Count,
    /// A frequency table's subset count column: the row's released records (not written).
    SubsetCount,
}

/// How suppressed records are written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSuppression {
    /// `mask`, `remove` or `keep_sensitive` ([`SuppressedRecords`]).
    pub mode: String,
    /// The text of a suppressed value.
    pub marker: String,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// The step's level of every quasi-identifier (informative).
    pub levels: Vec<u8>,
    /// Per quasi-identifier, original value → output value.
    pub maps: Vec<BTreeMap<String, String>>,
    /// The classes (indices into [`Plan::classes`]) this step publishes.
    pub publishes: Vec<u32>,
}

/// A published output class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanClass {
    /// Its output value of every quasi-identifier.
    pub values: Vec<String>,
    /// Its value of every microaggregated column.
    pub aggregates: Vec<String>,
}

/// Where a plan comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanAudit {
    /// SHA-256 (hex) of the input as deid read it.
    pub input_sha256: Option<String>,
    /// SHA-256 (hex) of every quasi-identifier's hierarchy table (CSV, `,`-separated) by column.
    pub hierarchies_sha256: BTreeMap<String, String>,
    /// SHA-256 (hex) of the normalized specification (JSON).
    pub specification_sha256: String,
    /// The seed of the search.
    pub seed: u64,
    /// deid's version.
    pub deid_version: String,
}

impl Plan {
    /// The plan of `output` — the [`CsvOutput`] of `recoding` on `problem` (the whole problem)
    /// with its options — for input and output with `delimiter`, checked against the output's
    /// classes (`Plan::check_reproduces`). Refuses a research subset given by records and
    /// differential privacy's sample (which records are released is not a function of their
    /// values).
    pub fn of<R: Stepped + ?Sized>(
        problem: &Problem,
        recoding: &R,
        options: &OutputOptions,
        delimiter: u8,
    ) -> Result<Plan> {
        if problem.dp().is_some() {
            return Err(EngineError::config(
                "privacy",
                "a plan cannot express differential privacy: which records are released is \
                 drawn at random, not a function of their values",
            ));
        }
        if problem.subset().is_some() {
            return Err(EngineError::config(
                "research_subset",
                "a plan cannot express a research subset of records: which records are \
                 released is not a function of their values (use a frequency table's \
                 subset_count_column)",
            ));
        }
        let output = CsvOutput::new(problem, recoding, options);
        let (class_of_base, aggregates) = match &output.micro {
            Some((classes, values)) => (classes.clone(), values.clone()),
            None => (
                OutputClasses::of(problem, recoding).class_of_base,
                Vec::new(),
            ),
        };
        let steps = recoding.step_levels();
        let plan = Plan {
            format: PLAN_FORMAT.to_string(),
            version: PLAN_VERSION,
            delimiter: char::from(delimiter).to_string(),
            columns: columns(problem, &output.plan),
            quasi_identifiers: names(problem, problem.qi_columns()),
            microaggregated: names(
                problem,
                &(problem.microaggregated().iter())
                    .map(|m| m.column)
                    .collect::<Vec<_>>(),
            ),
            suppression: PlanSuppression {
                mode: options.suppressed.name().to_string(),
                marker: options.marker.clone(),
            },
            neutralize_formulas: options.neutralize_formulas,
            steps: (steps.iter().enumerate())
                .map(|(s, levels)| step(problem, recoding, &class_of_base, s, levels))
                .collect(),
            classes: classes(problem, recoding, &class_of_base, &aggregates),
            suppressed: suppressed(problem, &class_of_base, steps.last().copied()),
            audit: None,
            digest: None,
        };
        plan.check_reproduces(problem, &class_of_base)?;
        Ok(plan)
    }

    /// Declares column `name` of an input with columns `header` its count column (a frequency
    /// table): the plan's own count column must be `name`; a plan without one (made on the
    /// records themselves) takes `name` at its place in `header` and writes the released
    /// records there, so the output of a frequency table is a frequency table. Errors name
    /// `count_column`.
    pub fn with_count_column(&mut self, header: &[String], name: &str) -> Result<()> {
        let role = |r: ColumnRole| self.columns.iter().find(|c| c.role == r);
        if let Some(own) = role(ColumnRole::Count) {
            return match own.name == name {
                true => Ok(()),
                false => Err(EngineError::config(
                    "count_column",
                    format!("the plan's count column is '{}', not '{name}'", own.name),
                )),
            };
        }
        if self.columns.iter().any(|c| c.name == name) {
            return Err(EngineError::config(
                "count_column",
                format!("'{name}' is a column of the plan's data, not a count of records"),
            ));
        }
        let at = header.iter().position(|h| h == name).ok_or_else(|| {
            EngineError::config(
                "count_column",
                format!(
                    "the input has no column '{name}'; its columns are: {}",
                    header.join(", ")
                ),
            )
        })?;
        let column = PlanColumn {
            name: name.to_string(),
            role: ColumnRole::Count,
        };
        self.columns.insert(at.min(self.columns.len()), column);
        Ok(())
    }

    /// Checks that the plan, applied to the original values of every base group of `problem`,
    /// gives the group's output class (`class_of_base`, `u32::MAX`: suppressed). A failure is
    /// an internal error: the plan would not reproduce the output.
    fn check_reproduces(&self, problem: &Problem, class_of_base: &[u32]) -> Result<()> {
        let applier = Applier::new(self)?;
        let base = problem.base_groups();
        let q = problem.qi_columns().len();
        let columns: Vec<_> = (problem.qi_columns().iter())
            .map(|&c| problem.table().column(c))
            .collect();
        // Base groups in parallel; a failure names one failing group.
        let checked = (class_of_base.par_iter().enumerate())
            .with_min_len(1 << 14)
            .try_for_each_init(
                || Vec::with_capacity(q),
                |key, (g, &expected)| {
                    let codes = &base.codes[g * q..(g + 1) * q];
                    let got = applier.classify(|i| columns[i].dict.value(codes[i]), key);
                    let same = match got {
                        apply::Classified::Class(c) => c == expected,
                        apply::Classified::Suppressed => expected == u32::MAX,
                        apply::Classified::Uncovered(_) => false,
                    };
                    if same { Ok(()) } else { Err(g) }
                },
            );
        checked.map_err(|g| {
            EngineError::Internal(format!(
                "the recoding plan does not reproduce the output of base group {g}"
            ))
        })
    }
}

/// The names of table columns `columns`.
fn names(problem: &Problem, columns: &[usize]) -> Vec<String> {
    (columns.iter())
        .map(|&c| problem.table().column(c).name.clone())
        .collect()
}

/// Every input column with its role, from the output writer's columns.
fn columns(problem: &Problem, written: &[(usize, Cell)]) -> Vec<PlanColumn> {
    let table = problem.table();
    let subset =
        (problem.config().subset_count_column.as_deref()).and_then(|n| table.column_index(n));
    (0..table.columns().len())
        .map(|c| {
            let role = match written.iter().find(|(w, _)| *w == c) {
                None if Some(c) == subset => ColumnRole::SubsetCount,
                None => ColumnRole::Drop,
                Some((_, Cell::Copy)) => ColumnRole::Copy,
                Some((_, Cell::Sensitive)) => ColumnRole::Sensitive,
                Some((_, Cell::Qi(_))) => ColumnRole::QuasiIdentifying,
                Some((_, Cell::Aggregated(_))) => ColumnRole::Microaggregated,
                Some((_, Cell::Count)) => ColumnRole::Count,
            };
            PlanColumn {
                name: table.column(c).name.clone(),
                role,
            }
        })
        .collect()
}

/// Step `s` with `levels`: the maps of every value of the data and the classes it publishes.
fn step<R: Stepped + ?Sized>(
    problem: &Problem,
    recoding: &R,
    class_of_base: &[u32],
    s: usize,
    levels: &[u8],
) -> PlanStep {
    let table = problem.table();
    let maps = (problem.qi_columns().iter().enumerate())
        .map(|(i, &c)| {
            let column = table.column(c);
            let h = &problem.hierarchies()[i];
            let level = levels[i] as usize;
            (0..column.dict.len() as u32)
                .map(|v| {
                    let label = h.label(level, h.code(level, v), column);
                    (column.dict.value(v).to_string(), label.to_string())
                })
                .collect()
        })
        .collect();
    // Marks per class (a class's groups are all published by one step), read in class order.
    let mut published: Vec<bool> = Vec::new();
    for (g, &c) in class_of_base.iter().enumerate() {
        if c != u32::MAX && recoding.step_of(g) == Some(s) {
            let c = c as usize;
            if c >= published.len() {
                published.resize(c + 1, false);
            }
            published[c] = true;
        }
    }
    PlanStep {
        levels: levels.to_vec(),
        maps,
        publishes: (published.iter().enumerate())
            .filter(|(_, p)| **p)
            .map(|(c, _)| c as u32)
            .collect(),
    }
}

/// The published classes: their output values (from a base group of each) and aggregates.
fn classes<R: Stepped + ?Sized>(
    problem: &Problem,
    recoding: &R,
    class_of_base: &[u32],
    aggregates: &[Vec<String>],
) -> Vec<PlanClass> {
    let count = class_of_base
        .iter()
        .filter(|&&c| c != u32::MAX)
        .map(|&c| c as usize + 1)
        .max()
        .unwrap_or(0);
    let mut values: Vec<Option<Vec<String>>> = vec![None; count];
    for (g, &c) in class_of_base.iter().enumerate() {
        if c == u32::MAX || values[c as usize].is_some() {
            continue;
        }
        let (levels, codes) = recoding.recode(g).expect("a published group is recoded");
        values[c as usize] = Some(labels(problem, levels, codes));
    }
    (values.into_iter().enumerate())
        .map(|(c, v)| PlanClass {
            values: v.unwrap_or_default(),
            aggregates: aggregates.iter().map(|a| a[c].clone()).collect(),
        })
        .collect()
}

/// The output values of generalized `codes` at `levels`.
fn labels(problem: &Problem, levels: &[u8], codes: &[u32]) -> Vec<String> {
    let table = problem.table();
    (problem.qi_columns().iter().enumerate())
        .map(|(i, &c)| {
            let h = &problem.hierarchies()[i];
            h.label(levels[i] as usize, codes[i], table.column(c))
                .to_string()
        })
        .collect()
}

/// The distinct tuples of the suppressed base groups by the last step's levels.
fn suppressed(problem: &Problem, class_of_base: &[u32], last: Option<&[u8]>) -> Vec<Vec<String>> {
    let Some(levels) = last else {
        return Vec::new();
    };
    let q = problem.qi_columns().len();
    let base = problem.base_groups();
    // The distinct generalized code tuples first, their labels once each.
    let mut codes: HashSet<Vec<u32>> = HashSet::new();
    for (g, &c) in class_of_base.iter().enumerate() {
        if c != u32::MAX {
            continue;
        }
        let tuple: Vec<u32> = (0..q)
            .map(|i| problem.hierarchies()[i].code(levels[i] as usize, base.codes[g * q + i]))
            .collect();
        codes.insert(tuple);
    }
    let tuples: BTreeSet<Vec<String>> = (codes.iter())
        .map(|codes| labels(problem, levels, codes))
        .collect();
    tuples.into_iter().collect()
}

/// The suppression mode named in a plan (errors name `suppression.mode`).
pub(crate) fn parse_mode(name: &str) -> Result<SuppressedRecords> {
    SuppressedRecords::parse(name).ok_or_else(|| {
        EngineError::config(
            "suppression.mode",
            format!("expected mask, remove or keep_sensitive, got '{name}'"),
        )
    })
}
