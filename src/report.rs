//! JSON reports shared by the CLI and the service: the verdict, transformation, quality and risk
//! of one evaluated transformation.

use serde_json::{Map, Value, json};

use deid_engine::Problem;
use deid_engine::SearchOutcome;
use deid_engine::check::Evaluation;
use deid_engine::risk::RiskReport;

/// Default threshold for the "records at risk" statistic (prosecutor risk above 20 %).
pub const DEFAULT_RISK_THRESHOLD: f64 = 0.2;

/// Column name → level of a transformation.
pub fn transformation_json(problem: &Problem, levels: &[u8]) -> Value {
    let map: Map<String, Value> = problem
        .quasi_identifiers()
        .iter()
        .zip(levels)
        .map(|(q, l)| (q.column.clone(), json!(l)))
        .collect();
    Value::Object(map)
}

/// The report of `deid evaluate` (and the base of `deid anonymize`'s and the API's reports).
pub fn evaluation_report(problem: &Problem, eval: &Evaluation, risk_threshold: f64) -> Value {
    let model = problem.quality_config().model;
    let per_attribute: Map<String, Value> = problem
        .quasi_identifiers()
        .iter()
        .zip(&eval.quality.per_attribute)
        .map(|(q, v)| (q.column.clone(), json!(v)))
        .collect();
    let quality: Map<String, Value> = deid_engine::check::evaluate_all(problem, eval)
        .into_iter()
        .map(|(m, q)| {
            (
                m.name().to_string(),
                json!({"score": q.score, "utility": q.utility}),
            )
        })
        .collect();
    json!({
        "anonymous": eval.result.anonymous,
        "transformation": transformation_json(problem, &eval.result.levels),
        "suppressed_rows": eval.result.suppressed,
        "rows": problem.rows(),
        "classes": eval.result.classes,
        "quality_model": model.name(),
        "score": eval.quality.score,
        "lower_bound": eval.quality.lower_bound,
        "quality": quality,
        "per_attribute": per_attribute,
        "utility": eval.quality.utility,
        "risk": {
            "input": RiskReport::input(problem, risk_threshold),
            "output": RiskReport::output(eval, risk_threshold),
        },
    })
}

/// The report of a search (`deid anonymize`, job results): the evaluation report of the best
/// transformation (when there is one) plus the search statistics and the utility-over-time trace.
pub fn search_report(
    problem: &Problem,
    outcome: &SearchOutcome,
    best: Option<&Evaluation>,
    risk_threshold: f64,
) -> Value {
    let mut report = match best {
        Some(eval) => evaluation_report(problem, eval, risk_threshold),
        None => json!({
            "anonymous": false,
            "transformation": null,
            "rows": problem.rows(),
            "risk": {"input": RiskReport::input(problem, risk_threshold)},
        }),
    };
    let trace: Vec<Value> = outcome
        .trace
        .iter()
        .map(|i| {
            json!({
                "time_ms": i.found_at.as_secs_f64() * 1e3,
                "score": i.score,
                "utility": i.utility,
                "suppressed_rows": i.suppressed,
                "checks": i.checks,
                "levels": i.levels,
            })
        })
        .collect();
    let obj = report.as_object_mut().expect("reports are objects");
    obj.insert("algorithm".into(), json!(outcome.algorithm.name()));
    obj.insert(
        "levels".into(),
        json!(outcome.best.as_ref().map(|b| b.levels.clone())),
    );
    obj.insert("checks".into(), json!(outcome.checks));
    obj.insert("expansions".into(), json!(outcome.expansions));
    obj.insert(
        "elapsed_ms".into(),
        json!(outcome.elapsed.as_secs_f64() * 1e3),
    );
    obj.insert(
        "best_found_ms".into(),
        json!(outcome.best_found_at.map(|d| d.as_secs_f64() * 1e3)),
    );
    obj.insert("optimal_proven".into(), json!(outcome.optimal_proven));
    obj.insert("stop".into(), json!(outcome.stop.name()));
    obj.insert(
        "solution_space".into(),
        json!(problem.lattice().size_string()),
    );
    obj.insert("trace".into(), Value::Array(trace));
    report
}
