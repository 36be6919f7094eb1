//! The reports shared by the command line and the service, as types: [`EvaluationReport`] (the
//! verdict, transformation, quality and risk of one transformation: `deid evaluate`) and
//! [`SearchReport`] (that of the best transformation found, plus the search statistics and the
//! utility-over-time trace: `deid anonymize` and a job's result). They are written as JSON
//! objects with their keys in alphabetical order ([`SearchReport::to_json`]).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use deid_engine::Problem;
use deid_engine::SearchOutcome;
use deid_engine::check::Evaluation;
use deid_engine::hierarchy::list_duplicates;
use deid_engine::local::LocalOutcome;
use deid_engine::output::OutputClasses;
use deid_engine::output::Recoding;
use deid_engine::posthoc::{OutputQuality, output_quality, output_quality_of};
use deid_engine::quality::QualityModel;
use deid_engine::risk::{QiCombinations, RiskReport};

use super::id::{DatasetId, JobId};
use super::values::{AttributeValues, attribute_values};

/// Default threshold for the "records at risk" statistic (prosecutor risk above 20 %).
pub const DEFAULT_RISK_THRESHOLD: f64 = 0.2;

/// Column name → level of a transformation.
pub fn transformation_json(problem: &Problem, levels: &[u8]) -> Value {
    let map: serde_json::Map<String, Value> = problem
        .quasi_identifiers()
        .iter()
        .zip(levels)
        .map(|(q, l)| (q.column.clone(), Value::from(*l)))
        .collect();
    Value::Object(map)
}

/// The input risks of a report: the quasi-identifiers' distinction and separation each alone and
/// all together (every combination is a risk analysis's, `"task": "risk"` or `deid risk`).
fn input_risk(problem: &Problem, risk_threshold: f64) -> RiskReport {
    RiskReport::input_with(
        problem,
        risk_threshold,
        QiCombinations::Singles,
        &deid_engine::CancelFlag::new(),
    )
    .expect("a flag nobody raises")
}

/// The names of the quasi-identifiers, in their order.
fn qi_names(problem: &Problem) -> Vec<String> {
    (problem.quasi_identifiers().iter())
        .map(|q| q.column.clone())
        .collect()
}

/// Warnings about the problem: hierarchies whose duplicated values were resolved with
/// `hierarchy_duplicates: "last"` (one message per hierarchy, listing every value and its rows).
pub fn problem_warnings(problem: &Problem) -> Vec<String> {
    let mut out = kmap_notes(problem);
    out.extend(hierarchy_warnings(problem));
    out.extend(floor_notes(problem));
    out
}

/// What is measured on the data as given when quasi-identifiers are given at a floor
/// (`data_level`, docs/definitions.md §1.2).
fn floor_notes(problem: &Problem) -> Vec<String> {
    (problem.config().quasi_identifiers.iter())
        .filter(|q| q.data_level > 0)
        .map(|q| {
            format!(
                "column '{}' is given at level {} (data_level): the risks before, the utilities \
                 and the output quality's non-uniform entropy, discernibility and aecs are \
                 measured on the data as given; \
                 entropy, normalized-entropy and kl-divergence are left out (docs/definitions.md \
                 §1.2)",
                q.column, q.data_level
            )
        })
        .collect()
}

/// What an estimated k-map model is enforced as (k′ and its type-I error).
fn kmap_notes(problem: &Problem) -> Vec<String> {
    let Some(population) = problem.population() else {
        return Vec::new();
    };
    let rows = problem.rows() as u64;
    problem
        .config()
        .privacy
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let deid_engine::PrivacyModel::KMap {
                k,
                alpha,
                estimator,
            } = m
            else {
                return None;
            };
            let kp = deid_engine::population::k_prime(*k, *alpha, *estimator, rows, population);
            Some(format!(
                "{m} (privacy[{i}]) holds as {}-anonymity: k′ = {} for the sampling fraction \
                 {:.3e} ({rows} of {population}; type-I error {:.4})",
                kp.k,
                kp.k,
                rows as f64 / population as f64,
                kp.type_one_error
            ))
        })
        .collect()
}

/// Values listed in several rows of a hierarchy (`hierarchy_duplicates: last`).
fn hierarchy_warnings(problem: &Problem) -> Vec<String> {
    let qis = problem
        .quasi_identifiers()
        .iter()
        .map(|q| (&q.column, Some(&q.hierarchy)));
    let sensitive = problem
        .config()
        .sensitive
        .iter()
        .map(|s| (&s.column, s.hierarchy.as_ref()));
    qis.chain(sensitive)
        .filter_map(|(column, h)| {
            let duplicates = h?.duplicates();
            (!duplicates.is_empty()).then(|| {
                format!(
                    "hierarchy of column '{column}': {} value(s) appear in several rows with \
                     different generalizations; the last row of each defines its generalization \
                     and every row counts for the domain shares (hierarchy_duplicates: last): {}",
                    duplicates.len(),
                    list_duplicates(duplicates)
                )
            })
        })
        .collect()
}

/// Score and utility of one quality model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelQuality {
    /// Score (lower is better).
    pub score: f64,
    /// Utility in [0, 1].
    pub utility: f64,
}

/// Risks of the input and (for an evaluated transformation) of the output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Risks {
    /// Of the data as it is.
    pub input: RiskReport,
    /// Of the anonymized data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<RiskReport>,
}

/// The report of one evaluated transformation (`deid evaluate`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvaluationReport {
    /// Whether the transformation satisfies every privacy model within the suppression limit.
    pub anonymous: bool,
    /// Column → level.
    pub transformation: Value,
    /// The quasi-identifiers in the order of `levels`, of the candidates' levels and of
    /// `output_quality`'s per-attribute arrays.
    pub quasi_identifiers: Vec<String>,
    /// Records suppressed.
    pub suppressed_rows: usize,
    /// Records of the data.
    pub rows: usize,
    /// Equivalence classes of the output.
    pub classes: usize,
    /// Name of the configured quality model.
    pub quality_model: &'static str,
    /// Its score.
    pub score: f64,
    /// Its lower bound for the transformation's specializations.
    pub lower_bound: f64,
    /// Every quality model, by name.
    pub quality: BTreeMap<&'static str, ModelQuality>,
    /// The configured model's contribution per quasi-identifier.
    pub per_attribute: BTreeMap<String, f64>,
    /// The configured model's utility.
    pub utility: f64,
    /// Risks before and after.
    pub risk: Risks,
    /// Warnings about the problem ([`problem_warnings`]); absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// How the suppressed records were written, once the output is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppression: Option<SuppressionReport>,
    /// The research subset, when the dataset is the population of the released records
    /// (`rows` counts the released ones); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub research_subset: Option<SubsetReport>,
    /// (ε, δ)-differential privacy: its parameters, what they imply and the sample; absent
    /// without it. Quality and risk then measure the released sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub differential_privacy: Option<DpReport>,
    /// Quality measured on the output's records (post-hoc measures, comparable between global
    /// and local outputs; `docs/definitions.md` §4.7).
    pub output_quality: OutputQuality,
    /// Per quasi-identifier, the most frequent values before and after ([`attribute_values`]).
    pub values: BTreeMap<String, AttributeValues>,
    /// The job (service results of `"task": "evaluate"`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobInfo>,
    /// Where the time went, when the caller measured it (service results).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

/// The research subset of a problem whose table is the population.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubsetReport {
    /// Records of the subset: the records released (suppressed ones included).
    pub records: usize,
    /// Records of the whole dataset (the population table); the others are never written.
    pub population_records: usize,
}

impl SubsetReport {
    /// The subset of `problem`, if it has one.
    pub fn of(problem: &Problem) -> Option<SubsetReport> {
        problem
            .subset_records()
            .map(|(records, population_records)| SubsetReport {
                records,
                population_records,
            })
    }
}

/// (ε, δ)-differential privacy as configured and derived for one output: everything needed to
/// reproduce it (`docs/definitions.md` §3.9).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DpReport {
    /// The whole privacy budget ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// ε spent by the search over the transformations (0 when the levels were given): all on
    /// one exponential mechanism over every transformation of a lattice of at most 100,000;
    /// else ¼ over the steps of a walk, ¾ on the final choice among its pivots.
    pub epsilon_search: f64,
    /// ε spent by sampling and suppression.
    pub epsilon_anonymization: f64,
    /// Steps of the search (absent when the levels were given; used only by a walk).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// The seed of the sample and of the search.
    pub seed: u64,
    /// The derived least class size: classes of fewer sampled records are suppressed.
    pub k: u32,
    /// The sampling probability of every record.
    pub beta: f64,
    /// Records of the input.
    pub input_records: usize,
    /// Records drawn into the sample.
    pub sampled_records: usize,
    /// Sampled records released (in classes of at least k).
    pub released_records: usize,
    /// What the report's quality and risks measure.
    pub measured_on: &'static str,
}

impl DpReport {
    /// The report of `problem`'s differential privacy, `suppressed` of its sampled records
    /// suppressed; `None` without it.
    pub fn of(problem: &Problem, suppressed: usize) -> Option<DpReport> {
        let dp = problem.dp()?;
        Some(DpReport {
            epsilon: dp.model.epsilon,
            delta: dp.model.delta,
            epsilon_search: dp.params.epsilon_search,
            epsilon_anonymization: dp.params.epsilon_anon,
            steps: dp.model.data_dependent.then_some(dp.model.steps),
            seed: dp.model.seed,
            k: dp.params.k,
            beta: dp.params.beta,
            input_records: dp.rows,
            sampled_records: dp.sampled,
            released_records: dp.sampled.saturating_sub(suppressed),
            measured_on: "the released sample: rows, quality and risks count the sampled \
                          records only (suppressed ones are not written)",
        })
    }
}

/// What the output shows of the suppressed records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuppressionReport {
    /// `mask`, `remove` or `keep_sensitive`.
    pub mode: &'static str,
    /// The text of suppressed values.
    pub marker: String,
    /// Suppressed records left out of the output (`remove`).
    pub removed_rows: usize,
    /// Whether the block of suppressed records, read as one more class, satisfies the privacy
    /// models ([`deid_engine::output::suppressed_block_holds`]).
    pub block_satisfies_models: bool,
}

impl SuppressionReport {
    /// The report of an output (`recoding`, suppressing `suppressed` records) written with
    /// `options` (`written`: what was written, if it was).
    pub fn new<R: Recoding + ?Sized>(
        problem: &Problem,
        recoding: &R,
        suppressed: usize,
        options: &deid_engine::output::OutputOptions,
        written: Option<deid_engine::output::Written>,
    ) -> SuppressionReport {
        let removed = match (options.suppressed, written) {
            (_, Some(w)) => w.removed,
            (deid_engine::output::SuppressedRecords::Remove, None) => suppressed,
            _ => 0,
        };
        SuppressionReport {
            mode: options.suppressed.name(),
            marker: options.marker.clone(),
            removed_rows: removed,
            block_satisfies_models: deid_engine::output::suppressed_block_holds(
                problem, recoding, options,
            ),
        }
    }
}

impl EvaluationReport {
    /// The report of `eval` (a transformation of `problem`).
    pub fn new(problem: &Problem, eval: &Evaluation, risk_threshold: f64) -> EvaluationReport {
        EvaluationReport {
            anonymous: eval.result.anonymous,
            transformation: transformation_json(problem, &eval.result.levels),
            quasi_identifiers: qi_names(problem),
            suppressed_rows: eval.result.suppressed,
            rows: problem.rows(),
            classes: eval.result.classes,
            quality_model: problem.quality_config().model.name(),
            score: eval.quality.score,
            lower_bound: eval.quality.lower_bound,
            quality: deid_engine::check::evaluate_all(problem, eval)
                .into_iter()
                .map(|(m, q)| {
                    let q = ModelQuality {
                        score: q.score,
                        utility: q.utility,
                    };
                    (m.name(), q)
                })
                .collect(),
            per_attribute: problem
                .quasi_identifiers()
                .iter()
                .zip(&eval.quality.per_attribute)
                .map(|(q, v)| (q.column.clone(), *v))
                .collect(),
            utility: eval.quality.utility,
            risk: Risks {
                input: input_risk(problem, risk_threshold),
                output: Some(RiskReport::output(problem, eval, risk_threshold)),
            },
            warnings: problem_warnings(problem),
            suppression: None,
            research_subset: SubsetReport::of(problem).filter(|_| problem.dp().is_none()),
            differential_privacy: DpReport::of(problem, eval.result.suppressed),
            output_quality: output_quality(problem, eval),
            values: attribute_values(problem, eval),
            job: None,
            timings: None,
        }
    }

    /// The report of the mixed output of local generalization (at least one step). Its
    /// `transformation` is the first step's (every step is in [`SearchReport::local`]); `score`,
    /// `utility`, `quality` and `per_attribute` are the post-hoc measures (for the configured
    /// model: the post-hoc measure of the same kind, granularity where there is none; the score
    /// is its loss); the output's risks are those of its classes as a reader sees them.
    pub fn local(
        problem: &Problem,
        outcome: &LocalOutcome,
        risk_threshold: f64,
    ) -> EvaluationReport {
        let classes = OutputClasses::of(problem, outcome);
        let measured = output_quality_of(problem, outcome, &classes);
        let configured = match problem.quality_config().model {
            QualityModel::Precision => &measured.generalization_intensity,
            QualityModel::Entropy | QualityModel::NormalizedEntropy => {
                &measured.non_uniform_entropy
            }
            QualityModel::Discernibility | QualityModel::DiscernibilityStar => {
                &measured.discernibility
            }
            QualityModel::Aecs => &measured.aecs,
            QualityModel::Ambiguity => &measured.ambiguity,
            _ => &measured.granularity,
        };
        let posthoc = |m: &deid_engine::posthoc::Measure| ModelQuality {
            score: m.loss,
            utility: m.quality,
        };
        let first = &outcome.steps[0];
        EvaluationReport {
            anonymous: outcome.anonymous,
            transformation: transformation_json(problem, &first.levels),
            quasi_identifiers: qi_names(problem),
            suppressed_rows: outcome.suppressed,
            rows: problem.rows(),
            classes: measured.classes,
            quality_model: problem.quality_config().model.name(),
            score: configured.loss,
            lower_bound: configured.loss,
            quality: [
                ("granularity", posthoc(&measured.granularity)),
                (
                    "generalization-intensity",
                    posthoc(&measured.generalization_intensity),
                ),
                (
                    "non-uniform-entropy",
                    posthoc(&measured.non_uniform_entropy),
                ),
                ("discernibility", posthoc(&measured.discernibility)),
                ("aecs", posthoc(&measured.aecs)),
                ("ambiguity", posthoc(&measured.ambiguity)),
            ]
            .into_iter()
            .collect(),
            per_attribute: problem
                .quasi_identifiers()
                .iter()
                .zip(measured.granularity.attributes.iter().flatten())
                .map(|(q, v)| (q.column.clone(), *v))
                .collect(),
            utility: configured.quality,
            risk: Risks {
                input: input_risk(problem, risk_threshold),
                output: Some(local_output_risk(
                    problem,
                    &classes,
                    outcome.suppressed,
                    risk_threshold,
                )),
            },
            warnings: problem_warnings(problem),
            suppression: None,
            research_subset: SubsetReport::of(problem),
            differential_privacy: None,
            output_quality: measured,
            values: attribute_values(problem, outcome),
            job: None,
            timings: None,
        }
    }

    /// The report as a JSON value (keys in alphabetical order).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The risks of a local generalization's output, from its `classes` as a reader sees them
/// (`suppressed` records), with the population measures when the problem has a population.
fn local_output_risk(
    problem: &Problem,
    classes: &OutputClasses,
    suppressed: usize,
    risk_threshold: f64,
) -> RiskReport {
    let report =
        RiskReport::from_class_sizes(classes.counts.iter().copied(), suppressed, risk_threshold);
    match problem.population() {
        Some(n) => {
            let sizes = deid_engine::population::ClassSizes::from_sizes(
                classes.counts.iter().map(|&c| c as u64),
            );
            report.with_population(&sizes, n)
        }
        None => report,
    }
}

/// One improvement of the best transformation during a search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceEntry {
    /// Milliseconds after the search started.
    pub time_ms: f64,
    /// Score.
    pub score: f64,
    /// Utility.
    pub utility: f64,
    /// Records suppressed.
    pub suppressed_rows: usize,
    /// Checks done by then.
    pub checks: u64,
    /// The transformation (levels in the order of the quasi-identifiers).
    pub levels: Vec<u8>,
    /// The algorithm that found it (for `auto`: the portfolio member).
    pub strategy: &'static str,
    /// The step of local generalization it belongs to (absent for a global search).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
}

impl TraceEntry {
    /// The entry of an improvement.
    pub fn from_improvement(i: &deid_engine::Improvement) -> TraceEntry {
        TraceEntry {
            time_ms: i.found_at.as_secs_f64() * 1e3,
            score: i.score,
            utility: i.utility,
            suppressed_rows: i.suppressed,
            checks: i.checks,
            levels: i.levels.clone(),
            strategy: i.strategy.name(),
            step: i.step,
        }
    }
}

/// One of the best anonymous transformations a search checked (a report's `candidates`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateEntry {
    /// Column → level (the `levels` of an evaluate job).
    pub transformation: Value,
    /// The levels in the order of the quasi-identifiers.
    pub levels: Vec<u8>,
    /// Score (lower is better).
    pub score: f64,
    /// Utility.
    pub utility: f64,
    /// Records suppressed.
    pub suppressed_rows: usize,
}

impl CandidateEntry {
    /// The entry of a candidate of `problem`'s search.
    pub fn of(problem: &Problem, c: &deid_engine::search::Candidate) -> CandidateEntry {
        CandidateEntry {
            transformation: transformation_json(problem, &c.levels),
            levels: c.levels.clone(),
            score: c.score,
            utility: c.utility,
            suppressed_rows: c.suppressed,
        }
    }
}

/// What a report says when the search found no anonymous transformation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoSolution {
    /// Always false.
    pub anonymous: bool,
    /// Always null.
    pub transformation: Option<Value>,
    /// Records of the data.
    pub rows: usize,
    /// The input's risks.
    pub risk: Risks,
}

/// The evaluation part of a search report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Verdict {
    /// The best transformation, evaluated.
    Best(Box<EvaluationReport>),
    /// Nothing found.
    None(Box<NoSolution>),
}

impl Verdict {
    /// What a report says without a solution: the rows and the input's risks.
    fn none(problem: &Problem, risk_threshold: f64) -> Verdict {
        Verdict::None(Box::new(NoSolution {
            anonymous: false,
            transformation: None,
            rows: problem.rows(),
            risk: Risks {
                input: input_risk(problem, risk_threshold),
                output: None,
            },
        }))
    }
}

/// The job a report belongs to (service results only).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobInfo {
    /// The job.
    pub job_id: JobId,
    /// Its dataset.
    pub dataset_id: DatasetId,
    /// Its time limit.
    pub time_limit_ms: u64,
}

/// The report of a search (`deid anonymize`, a job's result).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchReport {
    /// The best transformation's evaluation (or what is known without one).
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The algorithm that ran (`auto` resolved).
    pub algorithm: &'static str,
    /// The best transformation's levels, if any.
    pub levels: Option<Vec<u8>>,
    /// Transformations checked.
    pub checks: u64,
    /// Transformations expanded.
    pub expansions: u64,
    /// Duration of the search.
    pub elapsed_ms: f64,
    /// When the best was found.
    pub best_found_ms: Option<f64>,
    /// Whether the best is proven optimal.
    pub optimal_proven: bool,
    /// Why the search stopped.
    pub stop: &'static str,
    /// Number of transformations in the solution space.
    pub solution_space: String,
    /// Every improvement of the best, in order.
    pub trace: Vec<TraceEntry>,
    /// The best anonymous transformations the search checked, best first (absent for local
    /// generalization; empty with differential privacy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<CandidateEntry>>,
    /// The job (service results).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobInfo>,
    /// Warnings about the problem ([`problem_warnings`]); absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Where the time went (and the memory peak), when the caller measured it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
    /// The steps of local generalization (absent for a global search).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalReport>,
}

/// What local generalization did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocalReport {
    /// The method that made the output: `steps` (ARX's procedure) or `sweep` (`auto` picks
    /// one of them).
    pub method: &'static str,
    /// The setting N (at most N steps, each publishing ≥ 1/N of the records).
    pub iterations: u32,
    /// The gs-factor of the steps that made the output.
    pub gs_factor: f64,
    /// True if the output starts from the global search with the job's suppression limit (the
    /// steps from 1 − 1/N left more records suppressed than it does).
    pub starts_global: bool,
    /// Attempts: the steps with gs-factor 0; with 0.5 when those left more records suppressed
    /// than the suppression limit allows; the global start when records were left suppressed.
    pub attempts: u32,
    /// Records no step published (suppressed in the output).
    pub suppressed_rows: usize,
    /// Records published in a class split off a step's class by the refinement.
    pub refined_rows: usize,
    /// Distinct transformations of the refined classes.
    pub refined_transformations: usize,
    /// The steps that published records, in order.
    pub steps: Vec<LocalStepReport>,
}

/// One step of local generalization.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocalStepReport {
    /// Step number (0: the search on all records).
    pub step: usize,
    /// Column → level of the records it published.
    pub transformation: Value,
    /// The same levels in the order of the quasi-identifiers.
    pub levels: Vec<u8>,
    /// Records it worked on (those still suppressed before it).
    pub candidate_rows: usize,
    /// Records it published.
    pub published_rows: usize,
    /// Its suppression limit (share of its candidates).
    pub suppression_limit: f64,
    /// The algorithm that ran.
    pub algorithm: &'static str,
    /// Its checks.
    pub checks: u64,
    /// Its duration.
    pub elapsed_ms: f64,
    /// Why its search ended.
    pub stop: &'static str,
    /// Whether its transformation is proven optimal for its records.
    pub optimal_proven: bool,
}

/// Time spent per stage of a run and the process's memory peak (`deid anonymize`; jobs report
/// the stages a worker sees).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Timings {
    /// Reading and encoding the data and building the problem.
    pub load_ms: f64,
    /// The search.
    pub search_ms: f64,
    /// Evaluating the best transformation and writing the anonymized CSV.
    pub output_ms: f64,
    /// The process's peak resident memory so far (Linux `VmHWM`), if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
}

/// The process's peak resident set size (`VmHWM` of `/proc/self/status`), if the platform
/// tells.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

impl SearchReport {
    /// Records how the best transformation's suppressed records were written.
    pub fn set_suppression(&mut self, suppression: SuppressionReport) {
        if let Verdict::Best(report) = &mut self.verdict {
            report.suppression = Some(suppression);
        }
    }

    /// The report of `outcome`; `best` is the evaluation of its best transformation.
    pub fn new(
        problem: &Problem,
        outcome: &SearchOutcome,
        best: Option<&Evaluation>,
        risk_threshold: f64,
    ) -> SearchReport {
        let verdict = match best {
            Some(eval) => {
                let mut report = EvaluationReport::new(problem, eval, risk_threshold);
                // Listed once, by the search report.
                report.warnings.clear();
                Verdict::Best(Box::new(report))
            }
            None => Verdict::none(problem, risk_threshold),
        };
        SearchReport {
            verdict,
            algorithm: outcome.algorithm.name(),
            levels: outcome.best.as_ref().map(|b| b.levels.clone()),
            checks: outcome.checks,
            expansions: outcome.expansions,
            elapsed_ms: outcome.elapsed.as_secs_f64() * 1e3,
            best_found_ms: outcome.best_found_at.map(|d| d.as_secs_f64() * 1e3),
            optimal_proven: outcome.optimal_proven,
            stop: outcome.stop.name(),
            solution_space: problem.lattice().size_string(),
            trace: outcome
                .trace
                .iter()
                .map(TraceEntry::from_improvement)
                .collect(),
            candidates: Some(
                (outcome.candidates.iter())
                    .map(|c| CandidateEntry::of(problem, c))
                    .collect(),
            ),
            job: None,
            warnings: problem_warnings(problem),
            timings: None,
            local: None,
        }
    }

    /// The report of local generalization: `trace` holds every step's improvements (the
    /// caller's, in order, with their step), `local` the steps.
    pub fn local(
        problem: &Problem,
        outcome: &LocalOutcome,
        settings: &deid_engine::local::LocalConfig,
        trace: Vec<TraceEntry>,
        risk_threshold: f64,
    ) -> SearchReport {
        let verdict = if outcome.has_solution() {
            let mut report = EvaluationReport::local(problem, outcome, risk_threshold);
            report.warnings.clear();
            Verdict::Best(Box::new(report))
        } else {
            Verdict::none(problem, risk_threshold)
        };
        let first = outcome.steps.first();
        SearchReport {
            verdict,
            algorithm: first.map_or("auto", |s| s.algorithm.name()),
            levels: first.map(|s| s.levels.clone()),
            checks: outcome.checks,
            expansions: outcome.steps.iter().map(|s| s.expansions).sum(),
            elapsed_ms: outcome.elapsed.as_secs_f64() * 1e3,
            best_found_ms: None,
            optimal_proven: false,
            stop: outcome.stop.name(),
            solution_space: problem.lattice().size_string(),
            trace,
            candidates: None,
            job: None,
            warnings: problem_warnings(problem),
            timings: None,
            local: Some(LocalReport {
                method: outcome.method.name(),
                iterations: settings.iterations,
                gs_factor: outcome.gs_factor,
                starts_global: outcome.starts_global,
                attempts: outcome.attempts,
                suppressed_rows: outcome.suppressed,
                refined_rows: outcome.refined_records,
                refined_transformations: outcome.refined.len(),
                steps: outcome
                    .steps
                    .iter()
                    .map(|s| LocalStepReport {
                        step: s.index,
                        transformation: transformation_json(problem, &s.levels),
                        levels: s.levels.clone(),
                        candidate_rows: s.candidates,
                        published_rows: s.published,
                        suppression_limit: s.suppression_limit,
                        algorithm: s.algorithm.name(),
                        checks: s.checks,
                        elapsed_ms: s.elapsed.as_secs_f64() * 1e3,
                        stop: s.stop.name(),
                        optimal_proven: s.optimal_proven,
                    })
                    .collect(),
            }),
        }
    }

    /// The report as a JSON value (keys in alphabetical order).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deid_engine::{
        Algorithm, CancelFlag, Checker, Hierarchy, NoObserver, PrivacyModel, ProblemConfig,
        QuasiIdentifier, SearchConfig, Table, search,
    };
    use serde_json::json;

    fn problem() -> Problem {
        let rows: Vec<Vec<String>> = ["20", "21", "30", "31", "32", "33"]
            .iter()
            .map(|x| vec![x.to_string(), "s".to_string()])
            .collect();
        let table = Table::from_rows(&["age", "d"], &rows).unwrap();
        let age = Hierarchy::from_rows(
            rows.iter()
                .map(|r| vec![r[0].clone(), format!("{}*", &r[0][..1]), "*".into()])
                .collect(),
            "age",
        )
        .unwrap();
        let config = ProblemConfig {
            quasi_identifiers: vec![QuasiIdentifier::new("age", age)],
            privacy: vec![PrivacyModel::KAnonymity { k: 2 }],
            ..ProblemConfig::default()
        };
        Problem::new(table, config).unwrap()
    }

    /// The report with its durations zeroed (they differ from run to run).
    fn without_durations(mut report: Value) -> Value {
        for key in ["elapsed_ms", "best_found_ms"] {
            if report.get(key).is_some_and(|v| !v.is_null()) {
                report[key] = json!(0.0);
            }
        }
        if let Some(trace) = report["trace"].as_array_mut() {
            for entry in trace {
                entry["time_ms"] = json!(0.0);
            }
        }
        report
    }

    /// The search report, field by field (`src/job/snapshots/`; durations zeroed), with and
    /// without a solution.
    #[test]
    fn the_search_report_matches_its_snapshot() {
        let p = problem();
        let config = SearchConfig {
            algorithm: Algorithm::Exhaustive,
            ..SearchConfig::default()
        };
        let outcome = search(&p, &config, &CancelFlag::new(), &NoObserver).unwrap();
        let eval = Checker::new(&p).evaluate(&outcome.best.as_ref().unwrap().levels);
        let report = SearchReport::new(&p, &outcome, Some(&eval), 0.2).to_json();
        insta::assert_json_snapshot!("search_report", without_durations(report));
        // Without a solution: the verdict, the rows and the input's risk only.
        let none = SearchReport::new(&p, &outcome, None, 0.2).to_json();
        insta::assert_json_snapshot!("search_report_without_solution", without_durations(none));
    }
}
