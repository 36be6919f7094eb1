//! The privacy models checked on the classes of [`Released`]: each model's rule (built from
//! its definition and, where the definition needs them, the input's facts), its verdict per
//! class, and the report.

use std::collections::HashMap;

use super::{Class, MAX_LISTED, ModelVerdict, Released, VerifyReport, Violation, size_histogram};
use crate::error::{EngineError, Result};
use crate::hierarchy::EncodedHierarchy;
use crate::output::SuppressedRecords;
use crate::population::{ClassSizes, SolverConfig, estimators, k_prime};
use crate::privacy::ldiversity::{EntropyL, recursive_holds};
use crate::privacy::likeness::{BetaLikeness, DeltaDisclosure};
use crate::privacy::risk::PreparedSampleModel;
use crate::privacy::tcloseness::{EqualDistance, HierarchicalDistance, OrderedDistance};
use crate::privacy::{PresenceModel, PrivacyModel, SensitiveDomain, TClosenessDistance};
use crate::problem::Problem;

/// A per-class rule on one sensitive column.
enum ClassRule {
    Distinct(u32),
    Entropy(EntropyL),
    Recursive(f64, u32),
    Equal(EqualDistance, f64),
    Ordered(OrderedDistance, f64),
    Hierarchical(HierarchicalDistance, f64),
    Delta(DeltaDisclosure),
    Beta(BetaLikeness),
}

/// How one model is checked.
enum Rule {
    /// Every class has at least this many records (k-anonymity, estimated k-map's k′).
    MinSize(u64),
    /// A rule per class on sensitive column `slot`, with the model's minimal class size.
    Class {
        slot: usize,
        rule: ClassRule,
        min: u64,
    },
    /// A condition on the sizes of the published classes.
    Sample(PreparedSampleModel),
    /// A condition per class on its released records and its records in the whole table.
    Presence(PresenceModel),
    /// The model cannot hold on these data (the reason).
    Fails(String),
}

/// What the input tells: the released records, the population and, per sensitive column, its
/// table-wide distribution and hierarchy, and per released value its code in the input.
struct Facts<'p> {
    problem: &'p Problem,
    domains: Vec<Option<SensitiveDomain>>,
    hierarchies: Vec<Option<&'p EncodedHierarchy>>,
    codes: Vec<Vec<Option<u32>>>,
}

impl<'p> Facts<'p> {
    /// The facts of `problem` for the sensitive columns of `released`.
    fn new(problem: &'p Problem, released: &Released) -> Facts<'p> {
        let table = problem.table();
        let mut facts = Facts {
            problem,
            domains: Vec::new(),
            hierarchies: Vec::new(),
            codes: Vec::new(),
        };
        for (name, values) in released.config.sensitive.iter().zip(&released.values) {
            let Some(c) = table.column_index(name) else {
                facts.domains.push(None);
                facts.hierarchies.push(None);
                facts.codes.push(vec![None; values.texts.len()]);
                continue;
            };
            let col = table.column(c);
            let mut global_counts = vec![0u32; col.dict.len()];
            for row in 0..table.rows() {
                global_counts[col.codes.get(row) as usize] += problem.released_records(row);
            }
            facts.domains.push(Some(SensitiveDomain {
                column: name.clone(),
                global_counts,
                values: col.dict.values().map(str::to_string).collect(),
                n: problem.rows(),
            }));
            let slot = problem.slot_columns().iter().position(|&s| s == c);
            facts
                .hierarchies
                .push(slot.and_then(|s| problem.sensitive_hierarchies()[s].as_ref()));
            facts
                .codes
                .push(values.texts.iter().map(|t| col.dict.code(t)).collect());
        }
        facts
    }
}

/// Checks every model of `released`'s configuration on its classes; `input` is the job's input
/// as a problem, needed when [`super::VerifyConfig::needs_input`] says so (an error otherwise).
pub fn verify(released: &Released, input: Option<&Problem>) -> Result<VerifyReport> {
    if released.config.needs_input() && input.is_none() {
        return Err(EngineError::config(
            "privacy",
            "these privacy models need the job's input data",
        ));
    }
    if released.records() > u64::from(u32::MAX) {
        return Err(EngineError::config(
            "count_column",
            format!("the released data hold more than {} records", u32::MAX),
        ));
    }
    let facts = input.map(|p| Facts::new(p, released));
    let mut presence: Option<Presence> = None;
    let mut models = Vec::new();
    for model in &released.config.models {
        let rule = rule(model, released, facts.as_ref());
        if matches!(rule, Rule::Presence(_)) && presence.is_none() {
            presence = Some(Presence::of(
                released,
                facts.as_ref().expect("input checked"),
            ));
        }
        models.push(judge(
            model,
            &rule,
            released,
            facts.as_ref(),
            presence.as_ref(),
        ));
    }
    let removed_records = match (released.config.suppressed, input) {
        (SuppressedRecords::Remove, Some(p)) => {
            Some((p.rows() as u64).saturating_sub(released.records()))
        }
        _ => None,
    };
    Ok(VerifyReport {
        passed: models.iter().all(|m| m.passed),
        released_rows: released.rows,
        released_records: released.records(),
        suppressed_records: released.block.records,
        removed_records,
        classes: released.classes.len() as u64,
        models,
        class_sizes: size_histogram(released.classes.iter().map(|c| c.records)),
    })
}

/// The rule of `model`: one match arm per privacy model.
fn rule(model: &PrivacyModel, released: &Released, facts: Option<&Facts<'_>>) -> Rule {
    let slot = model
        .attribute()
        .and_then(|a| released.config.sensitive.iter().position(|s| s == a));
    let domain = |slot: usize| facts.and_then(|f| f.domains[slot].as_ref());
    let min = u64::from(model.min_class_size().unwrap_or(1));
    let class = |rule: ClassRule| match slot {
        Some(slot) => Rule::Class { slot, rule, min },
        None => Rule::Fails(format!(
            "the attribute of {} is no sensitive attribute of the job",
            model.name()
        )),
    };
    let with_domain = |make: &dyn Fn(&SensitiveDomain) -> ClassRule| match slot.and_then(domain) {
        Some(d) => class(make(d)),
        None => Rule::Fails("the sensitive attribute is not a column of the input".into()),
    };
    match model {
        PrivacyModel::KAnonymity { k } => Rule::MinSize(u64::from(*k)),
        PrivacyModel::DistinctLDiversity { l, .. } => class(ClassRule::Distinct(*l)),
        PrivacyModel::EntropyLDiversity { l, estimator, .. } => {
            class(ClassRule::Entropy(EntropyL::new(*l, *estimator)))
        }
        PrivacyModel::RecursiveCLDiversity { c, l, .. } => class(ClassRule::Recursive(*c, *l)),
        PrivacyModel::TCloseness { t, distance, .. } => match distance {
            TClosenessDistance::Equal => {
                with_domain(&|d| ClassRule::Equal(EqualDistance::new(d), *t))
            }
            TClosenessDistance::Ordered => {
                with_domain(&|d| ClassRule::Ordered(OrderedDistance::new(d), *t))
            }
            TClosenessDistance::Hierarchical => hierarchical(slot, facts, *t, min),
        },
        PrivacyModel::DeltaDisclosure { delta, .. } => {
            with_domain(&|d| ClassRule::Delta(DeltaDisclosure::new(d, *delta)))
        }
        PrivacyModel::BasicBetaLikeness { beta, .. } => {
            with_domain(&|d| ClassRule::Beta(BetaLikeness::new(d, *beta, false)))
        }
        PrivacyModel::EnhancedBetaLikeness { beta, .. } => {
            with_domain(&|d| ClassRule::Beta(BetaLikeness::new(d, *beta, true)))
        }
        PrivacyModel::AverageRisk {
            threshold,
            highest,
            records_at_risk,
        } => Rule::Sample(PreparedSampleModel::average_risk(
            *threshold,
            highest.zip(*records_at_risk),
        )),
        PrivacyModel::SampleUniqueness { threshold } => {
            Rule::Sample(PreparedSampleModel::sample_uniqueness(*threshold))
        }
        PrivacyModel::PopulationUniqueness { .. } | PrivacyModel::KMap { .. } => {
            population_rule(model, facts)
        }
        PrivacyModel::DifferentialPrivacy(_) => dp_rule(facts),
        PrivacyModel::KMapSubset { k } => Rule::Presence(PresenceModel::KMap { k: *k }),
        PrivacyModel::DeltaPresence {
            delta_min,
            delta_max,
        } => Rule::Presence(PresenceModel::DeltaPresence {
            min: *delta_min,
            max: *delta_max,
        }),
    }
}

/// Population uniqueness and estimated k-map: they need the job's population model (and the
/// input's released records for k′).
fn population_rule(model: &PrivacyModel, facts: Option<&Facts<'_>>) -> Rule {
    let Some((f, population)) = facts.and_then(|f| f.problem.population().map(|p| (f, p))) else {
        return Rule::Fails("the job has no population model".into());
    };
    match model {
        PrivacyModel::PopulationUniqueness {
            threshold,
            estimator,
        } => Rule::Sample(PreparedSampleModel::population_uniqueness(
            *threshold, *estimator, population,
        )),
        PrivacyModel::KMap {
            k,
            alpha,
            estimator,
        } => {
            let n = f.problem.rows() as u64;
            Rule::MinSize(u64::from(k_prime(*k, *alpha, *estimator, n, population).k))
        }
        other => Rule::Fails(format!("{} needs no population", other.name())),
    }
}

/// Differential privacy: every published class holds at least the k derived from ε, δ and
/// the input's records (the sampling itself cannot be seen in released data).
fn dp_rule(facts: Option<&Facts<'_>>) -> Rule {
    match facts.and_then(|f| f.problem.dp()) {
        Some(setup) => Rule::MinSize(u64::from(setup.params.k)),
        None => Rule::Fails("the job's differential privacy could not be derived".into()),
    }
}

/// Hierarchical t-closeness: needs the sensitive attribute's hierarchy from the input.
fn hierarchical(slot: Option<usize>, facts: Option<&Facts<'_>>, t: f64, min: u64) -> Rule {
    let found = slot.and_then(|s| {
        let f = facts?;
        Some((s, f.domains[s].as_ref()?, f.hierarchies[s]?))
    });
    let Some((slot, domain, hierarchy)) = found else {
        return Rule::Fails("hierarchical t-closeness needs the attribute's hierarchy".into());
    };
    match HierarchicalDistance::new(domain, hierarchy) {
        Ok(d) => Rule::Class {
            slot,
            rule: ClassRule::Hierarchical(d, t),
            min,
        },
        Err(e) => Rule::Fails(e.to_string()),
    }
}

/// The histogram of class `class` on sensitive column `slot`: (value ids or input codes,
/// sorted; their records). With `codes`, `None` if a value does not occur in the input.
fn histogram(
    class: &Class,
    slot: usize,
    codes: Option<&[Option<u32>]>,
) -> Option<(Vec<u32>, Vec<u32>)> {
    let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(class.values[slot].len());
    for &(v, f) in &class.values[slot] {
        let v = match codes {
            Some(codes) => codes[v as usize]?,
            None => v,
        };
        pairs.push((v, f as u32));
    }
    pairs.sort_unstable();
    Some(pairs.into_iter().unzip())
}

/// Whether `class` satisfies a class rule.
fn class_holds(
    rule: &ClassRule,
    min: u64,
    class: &Class,
    slot: usize,
    facts: Option<&Facts<'_>>,
) -> bool {
    if class.records < min {
        return false;
    }
    let count = class.records as u32;
    let by_id = || histogram(class, slot, None).expect("ids are known");
    let by_code = || histogram(class, slot, Some(&facts?.codes[slot]));
    match rule {
        ClassRule::Distinct(l) => class.values[slot].len() >= *l as usize,
        ClassRule::Entropy(model) => {
            let (values, freqs) = by_id();
            model.holds(count, values.len(), &freqs)
        }
        ClassRule::Recursive(c, l) => recursive_holds(*c, *l, count, &by_id().1),
        ClassRule::Equal(d, t) => by_code().is_some_and(|(v, f)| d.emd(count, &v, &f) <= *t),
        ClassRule::Ordered(d, t) => by_code().is_some_and(|(v, f)| d.emd(count, &v, &f) <= *t),
        ClassRule::Hierarchical(d, t) => by_code().is_some_and(|(v, f)| d.emd(count, &v, &f) <= *t),
        ClassRule::Delta(d) => by_code().is_some_and(|(v, f)| d.holds(count, &v, &f)),
        ClassRule::Beta(b) => by_code().is_some_and(|(v, f)| b.holds(count, &v, &f)),
    }
}

/// The verdict on one model.
fn judge(
    model: &PrivacyModel,
    rule: &Rule,
    released: &Released,
    facts: Option<&Facts<'_>>,
    presence: Option<&Presence>,
) -> ModelVerdict {
    let mut verdict = ModelVerdict {
        model: model.to_string(),
        passed: true,
        violating_classes: 0,
        violating_records: 0,
        measured: None,
        reason: None,
        violations: Vec::new(),
    };
    let mut bad: Vec<usize> = Vec::new();
    let mut block_bad = false;
    let block = &released.block;
    let keep_sensitive = released.config.suppressed == SuppressedRecords::KeepSensitive;
    let block_shown = keep_sensitive && block.records > 0;
    match rule {
        Rule::MinSize(k) => {
            bad = (0..released.classes.len())
                .filter(|&c| released.classes[c].records < *k)
                .collect();
            block_bad = block_shown && block.records < *k;
            if matches!(
                model,
                PrivacyModel::KMap { .. } | PrivacyModel::DifferentialPrivacy(_)
            ) {
                verdict.measured = Some(*k as f64);
            }
        }
        Rule::Class { slot, rule, min } => {
            let holds = |c: &Class| class_holds(rule, *min, c, *slot, facts);
            bad = (0..released.classes.len())
                .filter(|&c| !holds(&released.classes[c]))
                .collect();
            block_bad = block_shown && !holds(block);
        }
        Rule::Sample(m) => sample(m, released, &mut verdict),
        Rule::Presence(m) => {
            let p = presence.expect("computed for presence models");
            match &p.pcounts {
                Ok(pcounts) => {
                    bad = (0..released.classes.len())
                        .filter(|&c| !m.holds(released.classes[c].records as u32, pcounts[c]))
                        .collect();
                    if m.rejects_unreleased() && p.unreleased > 0 {
                        verdict.passed = false;
                        verdict.violating_classes += p.unreleased;
                        verdict.reason = Some(format!(
                            "{} class(es) of the population have no released record (δ = 0)",
                            p.unreleased
                        ));
                    }
                }
                Err(reason) => fail(&mut verdict, reason.clone()),
            }
        }
        Rule::Fails(reason) => fail(&mut verdict, reason.clone()),
    }
    list(&mut verdict, &bad, block_bad, released);
    verdict
}

/// Marks the model failed as a whole.
fn fail(verdict: &mut ModelVerdict, reason: String) {
    verdict.passed = false;
    verdict.reason = Some(reason);
}

/// Counts and lists the violating classes (smallest first, at most [`MAX_LISTED`]).
fn list(verdict: &mut ModelVerdict, bad: &[usize], block_bad: bool, released: &Released) {
    let mut listed: Vec<Violation> = bad
        .iter()
        .map(|&c| Violation {
            size: released.classes[c].records,
            suppressed_block: false,
            values: released.config.show_values.then(|| {
                (released.keys[c].iter().zip(&released.labels))
                    .map(|(&id, interner)| interner.texts[id as usize].clone())
                    .collect()
            }),
        })
        .collect();
    if block_bad {
        listed.push(Violation {
            size: released.block.records,
            suppressed_block: true,
            values: None,
        });
    }
    if listed.is_empty() {
        return;
    }
    verdict.passed = false;
    verdict.violating_classes += listed.len() as u64;
    verdict.violating_records += listed.iter().map(|v| v.size).sum::<u64>();
    listed.sort_by_key(|v| v.size);
    listed.truncate(MAX_LISTED);
    verdict.violations = listed;
}

/// A sample-based model on the published class sizes, with its measured value.
fn sample(model: &PreparedSampleModel, released: &Released, verdict: &mut ModelVerdict) {
    let sizes = ClassSizes::from_sizes(released.classes.iter().map(|c| c.records));
    let records = sizes.records().max(1) as f64;
    verdict.measured = Some(match model {
        PreparedSampleModel::AverageRisk { .. } => sizes.classes() as f64 / records,
        PreparedSampleModel::SampleUniqueness { .. } => sizes.uniques() as f64 / records,
        PreparedSampleModel::PopulationUniqueness {
            estimator,
            population,
            ..
        } => estimators::model_estimate(&sizes, *population, *estimator, &SolverConfig::default())
            .map_or(f64::NAN, |u| u / *population as f64),
    });
    if !model.holds_on(&sizes) {
        fail(
            verdict,
            format!("the published class sizes violate {}", verdict.model),
        );
    }
    if verdict.measured.is_some_and(f64::is_nan) {
        verdict.measured = None;
    }
}

/// The records of the whole table in each published class (research subset models).
struct Presence {
    /// pcount per published class, or why the classes cannot be traced to the input.
    pcounts: std::result::Result<Vec<u32>, String>,
    /// Classes of the population without a released record.
    unreleased: u64,
}

impl Presence {
    /// Maps every input row to the output labels of its quasi-identifiers — per
    /// quasi-identifier the lowest hierarchy level whose labels include every published one —
    /// and sums the records of the whole table per published class.
    fn of(released: &Released, facts: &Facts<'_>) -> Presence {
        let problem = facts.problem;
        let table = problem.table();
        let mut labels: Vec<Vec<u32>> = Vec::new();
        for (i, name) in released.config.quasi_identifiers.iter().enumerate() {
            match level_labels(released, problem, i, name) {
                Ok(Some(l)) => labels.push(l),
                Ok(None) => {}
                Err(reason) => {
                    return Presence {
                        pcounts: Err(reason),
                        unreleased: 0,
                    };
                }
            }
        }
        let qis: Vec<usize> = (released.config.quasi_identifiers.iter())
            .filter_map(|n| table.column_index(n))
            .filter(|c| problem.qi_columns().contains(c))
            .collect();
        let mut tuples: HashMap<Vec<u32>, (u64, u64)> = HashMap::new();
        for row in 0..table.rows() {
            let key: Vec<u32> = (qis.iter().zip(&labels))
                .map(|(&c, l)| l[table.column(c).codes.get(row) as usize])
                .collect();
            let whole = problem.frequencies().map_or(1, |f| f.count(row));
            let e = tuples.entry(key).or_default();
            e.0 += u64::from(whole);
            e.1 += u64::from(problem.released_records(row));
        }
        let positions: Vec<usize> = (released.config.quasi_identifiers.iter().enumerate())
            .filter(|(_, n)| {
                table
                    .column_index(n)
                    .is_some_and(|c| problem.qi_columns().contains(&c))
            })
            .map(|(i, _)| i)
            .collect();
        let pcounts = (released.keys.iter())
            .map(|k| {
                let key: Vec<u32> = positions.iter().map(|&i| k[i]).collect();
                tuples
                    .get(&key)
                    .map_or(0, |t| t.0.min(u64::from(u32::MAX)) as u32)
            })
            .collect();
        let unreleased = tuples.values().filter(|t| t.0 > 0 && t.1 == 0).count() as u64;
        Presence {
            pcounts: Ok(pcounts),
            unreleased,
        }
    }
}

/// Per input code of quasi-identifier `i` (column `name`), the id of its output label at the
/// lowest level whose labels include every published label of the column (labels never
/// published get ids of their own); `None` for a column without hierarchy (microaggregated).
fn level_labels(
    released: &Released,
    problem: &Problem,
    i: usize,
    name: &str,
) -> std::result::Result<Option<Vec<u32>>, String> {
    let table = problem.table();
    let Some(c) = table.column_index(name) else {
        return Err(format!("the input has no column '{name}'"));
    };
    let Some(q) = problem.qi_columns().iter().position(|&x| x == c) else {
        return Ok(None);
    };
    let hierarchy = &problem.hierarchies()[q];
    let column = table.column(c);
    let interner = &released.labels[i];
    for level in 0..hierarchy.height() {
        let texts: Vec<&str> = (0..column.dict.len() as u32)
            .map(|v| hierarchy.label(level, hierarchy.code(level, v), column))
            .collect();
        let present: std::collections::HashSet<&str> = texts.iter().copied().collect();
        if !interner.texts.iter().all(|t| present.contains(t.as_str())) {
            continue;
        }
        let mut extra: HashMap<&str, u32> = HashMap::new();
        let ids = texts
            .iter()
            .map(|t| match interner.get(t) {
                Some(id) => id,
                None => {
                    let next = interner.texts.len() as u32 + extra.len() as u32;
                    *extra.entry(t).or_insert(next)
                }
            })
            .collect();
        return Ok(Some(ids));
    }
    Err(format!(
        "the values of column '{name}' are not the labels of one level of its hierarchy: the \
         records of the whole table cannot be traced to the published classes"
    ))
}
