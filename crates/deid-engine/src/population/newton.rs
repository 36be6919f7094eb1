//! The two-dimensional Newton–Raphson solver of the Pitman and SNB estimators, made
//! deterministic: ARX's procedure (`docs/definitions.md` §6.2; REFERENCE-RISK §0.3) with its
//! iteration limits and without its wall-clock limits.
//!
//! Tries: try 0 starts at the caller's point, tries 1 to 16 at the prepared points
//! (x, y) ∈ {0, 0.33, 0.66, 0.99}², x the outer loop. In a try: evaluate F; if |F₁| and |F₂| are
//! both at most the accuracy, the point is the root. Otherwise step s ← s − J⁻¹F (explicit 2×2
//! inverse, no guard against a singular J). After the step: a try started at the last prepared
//! point gives up entirely (so that point only gets its convergence test, as in ARX); a violated
//! constraint, a NaN or more than `iterations_per_try` steps ends the try. A new try starts only
//! while the total number of steps is at most (16 + 1) × `iterations_per_try`.

/// Accuracy and iteration limits (ARX's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolverConfig {
    /// Both components of F must be at most this in absolute value.
    pub accuracy: f64,
    /// Steps per try.
    pub iterations_per_try: u32,
}

impl Default for SolverConfig {
    fn default() -> Self {
        SolverConfig {
            accuracy: 1e-6,
            iterations_per_try: 1000,
        }
    }
}

/// The 16 prepared start points, in ARX's order.
fn prepared_starts() -> [(f64, f64); 16] {
    // ARX generates them by repeated `+ 0.33` (floating point), hence 0.66 and 0.99 exactly so.
    let mut values = [0.0f64; 4];
    for i in 1..4 {
        values[i] = values[i - 1] + 0.33;
    }
    let mut starts = [(0.0, 0.0); 16];
    for (i, &x) in values.iter().enumerate() {
        for (j, &y) in values.iter().enumerate() {
            starts[i * 4 + j] = (x, y);
        }
    }
    starts
}

/// The objective F and its Jacobian J (row i = ∂F_i/∂(x, y)) at a point.
pub type Evaluation = ([f64; 2], [[f64; 2]; 2]);

/// Solves F(x, y) = 0 from `start`; `feasible` is the constraint checked after every step.
/// Returns `None` when no try converges (ARX: NaN).
pub fn solve(
    config: &SolverConfig,
    start: (f64, f64),
    feasible: impl Fn(f64, f64) -> bool,
    mut objective: impl FnMut(f64, f64) -> Evaluation,
) -> Option<(f64, f64)> {
    let starts = prepared_starts();
    let per_try = config.iterations_per_try as u64;
    let cap = (starts.len() as u64 + 1) * per_try;
    let mut total = 0u64;
    for t in 0..=starts.len() {
        if t > 0 && total > cap {
            break;
        }
        let (mut x, mut y) = if t == 0 { start } else { starts[t - 1] };
        let mut steps = 0u64;
        loop {
            let ([f1, f2], [[a, b], [c, d]]) = objective(x, y);
            if f1.abs() <= config.accuracy && f2.abs() <= config.accuracy {
                return Some((x, y));
            }
            let det = a * d - b * c;
            x -= (d * f1 - b * f2) / det;
            y -= (-c * f1 + a * f2) / det;
            total += 1;
            if t == starts.len() {
                return None;
            }
            if !feasible(x, y) {
                break;
            }
            let exhausted = steps >= per_try;
            steps += 1;
            if x.is_nan() || y.is_nan() || exhausted {
                break;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_starts_follow_arx_order() {
        let s = prepared_starts();
        assert_eq!(s[0], (0.0, 0.0));
        assert_eq!(s[1], (0.0, 0.33));
        assert_eq!(s[4], (0.33, 0.0));
        assert_eq!(s[15], (0.33 + 0.33 + 0.33, 0.33 + 0.33 + 0.33));
    }

    #[test]
    fn finds_a_root_of_a_smooth_system() {
        // x² + y² = 4, x·y = 1 → a root with x > y > 0 from (2, 0.5).
        let root = solve(
            &SolverConfig::default(),
            (2.0, 0.5),
            |_, _| true,
            |x, y| {
                (
                    [x * x + y * y - 4.0, x * y - 1.0],
                    [[2.0 * x, 2.0 * y], [y, x]],
                )
            },
        )
        .unwrap();
        assert!((root.0 * root.0 + root.1 * root.1 - 4.0).abs() <= 1e-6);
        assert!((root.0 * root.1 - 1.0).abs() <= 1e-6);
        assert!(root.0 > root.1);
    }

    #[test]
    fn gives_up_deterministically_without_a_root() {
        // x² + 1 = 0 has no real root: every try runs out, with a bounded number of evaluations.
        let mut evaluations = 0u64;
        let root = solve(
            &SolverConfig::default(),
            (1.0, 1.0),
            |_, _| true,
            |x, y| {
                evaluations += 1;
                ([x * x + 1.0, y - 1.0], [[2.0 * x, 0.0], [0.0, 1.0]])
            },
        );
        assert_eq!(root, None);
        // At most 16 tries of 1001 steps (+1 evaluation each), the last start only tested; the
        // four starts with x = 0 end at once (division by zero).
        assert!(evaluations <= 17 * 1002, "{evaluations}");
        assert!(evaluations > 11 * 1000, "{evaluations}");
    }

    #[test]
    fn infeasible_steps_end_the_try() {
        // Root at x = −1 only; the constraint x ≥ 0 makes every try fail fast.
        let mut evaluations = 0u64;
        let root = solve(
            &SolverConfig::default(),
            (0.5, 0.0),
            |x, _| x >= 0.0,
            |x, y| {
                evaluations += 1;
                ([x + 1.0, y], [[1.0, 0.0], [0.0, 1.0]])
            },
        );
        assert_eq!(root, None);
        assert_eq!(evaluations, 17);
    }
}
