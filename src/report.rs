//! JSON reports shared by the CLI and the service: the verdict, transformation, quality and risk
//! of one evaluated transformation.

use serde_json::{Map, Value, json};

use crate::engine::Problem;
use crate::engine::check::Evaluation;
use crate::engine::risk::RiskReport;

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
    let quality: Map<String, Value> = crate::engine::quality::evaluate_all(problem, eval)
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
