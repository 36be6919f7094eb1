//! The search of the `anonymize` task: one global search, or local generalization when the
//! specification asks for it, with the report of what it found.

use deid_engine::check::Evaluation;
use deid_engine::local::{Forward, LocalConfig, LocalOutcome, local_search};
use deid_engine::output::Recoding;
use deid_engine::plan::Stepped;
use deid_engine::{
    CancelFlag, Checker, EngineError, Improvement, Problem, Progress, ProgressObserver,
    SearchConfig, SearchOutcome, search,
};
use std::sync::Mutex;

use super::Summary;
use crate::job::report::{SearchReport, TraceEntry};

/// What an anonymization produced (one value per run: the size of its variants does not matter).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Anonymized {
    /// One transformation for every record; `eval` is the best one's evaluation.
    Global {
        /// The search.
        outcome: SearchOutcome,
        /// The best transformation, evaluated (`None`: no solution).
        eval: Option<Evaluation>,
    },
    /// Local generalization.
    Local {
        /// The steps and which records each published.
        outcome: LocalOutcome,
        /// Its settings.
        settings: LocalConfig,
        /// Every step's improvements, in order.
        trace: Vec<TraceEntry>,
    },
}

/// Records every improvement as a trace entry and passes everything on.
struct Recorder<'a> {
    inner: &'a dyn ProgressObserver,
    trace: Mutex<Vec<TraceEntry>>,
}

impl ProgressObserver for Recorder<'_> {
    fn progress(&self, progress: &Progress) {
        self.inner.progress(progress);
    }

    fn improved(&self, improvement: &Improvement) {
        if let Ok(mut t) = self.trace.lock() {
            t.push(TraceEntry::from_improvement(improvement));
        }
        self.inner.improved(improvement);
    }
}

/// Runs the search `spec` asks for: local generalization with `local`, else one global search
/// whose best transformation is evaluated.
pub fn anonymize(
    problem: &Problem,
    local: Option<LocalConfig>,
    config: &SearchConfig,
    cancel: &CancelFlag,
    observer: &dyn ProgressObserver,
) -> Result<Anonymized, EngineError> {
    match local {
        None => {
            let outcome = search(problem, config, cancel, observer)?;
            let eval = outcome
                .best
                .as_ref()
                .map(|b| Checker::new(problem).evaluate(&b.levels));
            Ok(Anonymized::Global { outcome, eval })
        }
        Some(settings) => {
            let recorder = Recorder {
                inner: observer,
                trace: Mutex::new(Vec::new()),
            };
            let outcome = local_search(problem, &settings, config, cancel, &Forward(&recorder))?;
            let trace = recorder.trace.into_inner().unwrap_or_default();
            Ok(Anonymized::Local {
                outcome,
                settings,
                trace,
            })
        }
    }
}

impl Anonymized {
    /// The output's recoding (`None`: no solution).
    pub fn recoding(&self) -> Option<&dyn Recoding> {
        match self {
            Anonymized::Global { eval, .. } => eval.as_ref().map(|e| e as &dyn Recoding),
            Anonymized::Local { outcome, .. } => {
                outcome.anonymous.then_some(outcome as &dyn Recoding)
            }
        }
    }

    /// The output's recoding with its steps, for its plan (`None`: no solution).
    pub fn stepped(&self) -> Option<&dyn Stepped> {
        match self {
            Anonymized::Global { eval, .. } => eval.as_ref().map(|e| e as &dyn Stepped),
            Anonymized::Local { outcome, .. } => {
                outcome.anonymous.then_some(outcome as &dyn Stepped)
            }
        }
    }

    /// Records the output suppresses.
    pub fn suppressed(&self) -> usize {
        match self {
            Anonymized::Global { eval, .. } => eval.as_ref().map_or(0, |e| e.result.suppressed),
            Anonymized::Local { outcome, .. } => outcome.suppressed,
        }
    }

    /// Counters for the end of the job.
    pub fn summary(&self) -> Summary {
        match self {
            Anonymized::Global { outcome, .. } => Summary {
                found: outcome.best.is_some(),
                checks: outcome.checks,
                elapsed: outcome.elapsed,
                optimal_proven: outcome.optimal_proven,
                stop: outcome.stop.name(),
            },
            Anonymized::Local { outcome, .. } => Summary {
                found: outcome.anonymous,
                checks: outcome.checks,
                elapsed: outcome.elapsed,
                optimal_proven: false,
                stop: outcome.stop.name(),
            },
        }
    }

    /// The search report.
    pub fn report(&self, problem: &Problem, risk_threshold: f64) -> SearchReport {
        match self {
            Anonymized::Global { outcome, eval } => {
                SearchReport::new(problem, outcome, eval.as_ref(), risk_threshold)
            }
            Anonymized::Local {
                outcome,
                settings,
                trace,
            } => SearchReport::local(problem, outcome, settings, trace.clone(), risk_threshold),
        }
    }
}
