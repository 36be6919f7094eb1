//! Differential privacy's part of building a problem: the combinations it refuses, the
//! derivation of k and β and the sample, which becomes the problem's released records (a
//! frequency table's released counts, else a research subset; `docs/definitions.md` §3.9).

use crate::config::ProblemConfig;
use crate::data::Table;
use crate::data::frequency::Frequencies;
use crate::data::subset::Subset;
use crate::error::{EngineError, Result};
use crate::privacy::{DpModel, DpParameters, PrivacyModel};
use crate::quality::QualityModel;

/// Differential privacy as configured and derived for one problem.
#[derive(Debug, Clone, PartialEq)]
pub struct DpSetup {
    /// The user's parameters (with the seed and whether the search chooses the levels).
    pub model: DpModel,
    /// k, β and the split of ε.
    pub params: DpParameters,
    /// Records of the input table (the sum of the counts of a frequency table).
    pub rows: usize,
    /// Records drawn into the sample.
    pub sampled: usize,
}

/// Refuses a quality model without a score function of bounded sensitivity for SafePub's
/// search (`search::safepub`); errors name `quality.model`.
pub fn search_quality(model: QualityModel) -> Result<()> {
    match model {
        QualityModel::Loss
        | QualityModel::Precision
        | QualityModel::Discernibility
        | QualityModel::Aecs
        | QualityModel::Entropy => Ok(()),
        other => Err(EngineError::config(
            "quality.model",
            format!(
                "differential-privacy's search has no score function of bounded sensitivity \
                 for {}; expected loss, precision, discernibility, aecs or entropy (or give the levels)",
                other.name()
            ),
        )),
    }
}

/// The differential-privacy model of `config` and its position, if any; refuses a second one.
pub fn dp_model(config: &ProblemConfig) -> Result<Option<(usize, &DpModel)>> {
    let mut found = None;
    for (i, m) in config.privacy.iter().enumerate() {
        if let PrivacyModel::DifferentialPrivacy(dp) = m {
            if found.is_some() {
                return Err(EngineError::config(
                    format!("privacy[{i}]"),
                    "differential-privacy may be given once",
                ));
            }
            found = Some((i, dp));
        }
    }
    Ok(found)
}

/// Refuses what differential privacy cannot be combined with (without the data): every other
/// privacy model but k-anonymity, a research subset (the sample takes its place), a quality
/// model without a score function when the search chooses the levels, microaggregated and
/// sensitive columns.
pub fn check_combinations(config: &ProblemConfig) -> Result<()> {
    let Some((position, model)) = dp_model(config)? else {
        return Ok(());
    };
    for (i, m) in config.privacy.iter().enumerate() {
        if i != position && !matches!(m, PrivacyModel::KAnonymity { .. }) {
            return Err(EngineError::config(
                format!("privacy[{i}]"),
                format!(
                    "{} cannot be combined with differential-privacy: its guarantee covers \
                     sampling and the suppression of classes smaller than k only (k-anonymity \
                     may be added)",
                    m.name()
                ),
            ));
        }
    }
    for (field, given) in [
        ("research_subset", config.research_subset.is_some()),
        ("subset_count_column", config.subset_count_column.is_some()),
    ] {
        if given {
            return Err(EngineError::config(
                field,
                "differential-privacy draws its own sample of the records; a research subset \
                 cannot be given",
            ));
        }
    }
    if model.data_dependent {
        search_quality(config.quality.model)?;
    }
    if let Some(m) = config.microaggregated.first() {
        return Err(EngineError::config(
            format!("attributes.{}", m.column),
            "differential-privacy cannot be combined with microaggregation: the aggregates \
             would depend on the data",
        ));
    }
    if let Some(s) = config.sensitive.first() {
        return Err(EngineError::config(
            format!("attributes.{}", s.column),
            "with differential-privacy every released column must be a quasi-identifier \
             (generalized) or identifying (removed); sensitive values would be released as \
             they are",
        ));
    }
    Ok(())
}

/// Checks the combinations, derives k and β for the table's records, draws the sample and
/// makes it the released records: of a frequency table, its released counts (a row of count c
/// releases a Binomial(c, β) number of records); of a plain table, a research subset of the
/// sampled rows. Every class smaller than k is then suppressed, whatever the suppression limit
/// (set to 1). Without differential privacy, `frequencies` and `subset` are returned as given.
pub(super) fn prepare(
    table: &Table,
    config: &mut ProblemConfig,
    frequencies: Option<Frequencies>,
    subset: Option<Subset>,
) -> Result<(Option<Frequencies>, Option<Subset>, Option<DpSetup>)> {
    let Some((position, model)) = dp_model(config)? else {
        return Ok((frequencies, subset, None));
    };
    let model = model.clone();
    let field = format!("privacy[{position}]");
    model.validate().map_err(|e| e.within(&field))?;
    check_combinations(config)?;
    check_released_columns(table.columns().iter().map(|c| c.name.as_str()), config)?;
    let records = frequencies
        .as_ref()
        .map_or(table.rows(), Frequencies::records);
    let params = model.derive(records).map_err(|e| e.within(&field))?;
    let counts = |row: usize| frequencies.as_ref().map_or(1, |f| f.count(row));
    let drawn = params.sample(table.rows(), counts, model.seed);
    let sampled: usize = drawn.iter().map(|&c| c as usize).sum();
    if sampled == 0 {
        return Err(EngineError::config(
            format!("{field}.epsilon"),
            format!(
                "no record of {records} was drawn into the sample (β = {:.4}); raise epsilon",
                params.beta
            ),
        ));
    }
    config.suppression_limit = 1.0;
    let setup = DpSetup {
        model,
        params,
        rows: records,
        sampled,
    };
    Ok(match frequencies {
        Some(f) => (Some(f.with_released(drawn)), None, Some(setup)),
        None => {
            let rows = drawn.iter().map(|&c| c > 0);
            (None, Some(Subset::from_rows(rows)), Some(setup))
        }
    })
}

/// Refuses columns that would be released as they are: with differential privacy every column
/// of the table (`columns`, by name) is a quasi-identifier (generalized), identifying (removed)
/// or the count column of a frequency table. Errors name `attributes.<column>`.
pub fn check_released_columns<'c>(
    columns: impl IntoIterator<Item = &'c str>,
    config: &ProblemConfig,
) -> Result<()> {
    if dp_model(config)?.is_none() {
        return Ok(());
    }
    for name in columns {
        let known = config.quasi_identifiers.iter().any(|q| q.column == name)
            || config.identifying.iter().any(|c| c == name)
            || config.count_column.as_deref() == Some(name);
        if !known {
            return Err(EngineError::config(
                format!("attributes.{name}"),
                format!(
                    "with differential-privacy every released column must be a \
                     quasi-identifier (generalized) or identifying (removed); '{name}' would be \
                     copied as it is"
                ),
            ));
        }
    }
    Ok(())
}
