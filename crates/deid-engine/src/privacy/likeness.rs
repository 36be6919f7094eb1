//! Models bounding how much a class's distribution of the sensitive attribute may deviate from the
//! table's, value by value: δ-disclosure privacy (Brickell and Shmatikov, KDD 2008) and basic and
//! enhanced β-likeness (Cao and Karras, VLDB 2012).
//!
//! With n records in the table, N in the class and counts g_v (table), c_v (class), the relative
//! gain (p_class − p_table)/p_table = (n·c_v − N·g_v)/(N·g_v) and the ratio
//! p_class/p_table = n·c_v/(N·g_v) are computed from exact integers with a single division.
//! Only values present in the class are checked (see the `privacy` module docs).

use super::SensitiveDomain;

/// δ-disclosure privacy: |log₂(p_class(v)/p_table(v))| < δ for every value v of the class.
#[derive(Debug, Clone)]
pub struct DeltaDisclosure {
    n: u64,
    global: Vec<u32>,
    delta: f64,
}

impl DeltaDisclosure {
    /// Heap size in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.global.capacity() * 4
    }

    /// Compiles the model with parameter `delta` (> 0).
    pub fn new(domain: &SensitiveDomain, delta: f64) -> DeltaDisclosure {
        DeltaDisclosure {
            n: domain.n as u64,
            global: domain.global_counts.clone(),
            delta,
        }
    }

    /// The largest |log₂(p_class/p_table)| over the class's values.
    pub fn disclosure(&self, count: u32, values: &[u32], freqs: &[u32]) -> f64 {
        values
            .iter()
            .zip(freqs)
            .map(|(&v, &f)| self.log_ratio(count, v, f).abs())
            .fold(0.0, f64::max)
    }

    #[inline]
    fn log_ratio(&self, count: u32, v: u32, f: u32) -> f64 {
        let num = self.n as f64 * f as f64;
        let den = count as f64 * self.global[v as usize] as f64;
        (num / den).log2()
    }

    /// True if every value of the class stays strictly within the bound.
    pub fn holds(&self, count: u32, values: &[u32], freqs: &[u32]) -> bool {
        values
            .iter()
            .zip(freqs)
            .all(|(&v, &f)| self.log_ratio(count, v, f).abs() < self.delta)
    }
}

/// Basic or enhanced β-likeness.
#[derive(Debug, Clone)]
pub struct BetaLikeness {
    n: u64,
    global: Vec<u32>,
    /// Per value code: the bound of the relative gain, β or min(β, −ln p_table(v)).
    bound: Vec<f64>,
}

impl BetaLikeness {
    /// Heap size in bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.global.capacity() * 4 + self.bound.capacity() * 8
    }

    /// Compiles basic (`enhanced = false`: bound β) or enhanced β-likeness (bound
    /// min(β, −ln p_table(v))).
    pub fn new(domain: &SensitiveDomain, beta: f64, enhanced: bool) -> BetaLikeness {
        let n = domain.n as f64;
        let bound = domain
            .global_counts
            .iter()
            .map(|&g| {
                if enhanced && g > 0 {
                    beta.min((n / g as f64).ln())
                } else {
                    beta
                }
            })
            .collect();
        BetaLikeness {
            n: domain.n as u64,
            global: domain.global_counts.clone(),
            bound,
        }
    }

    /// The relative gain (p_class(v) − p_table(v))/p_table(v) of one value of the class.
    #[inline]
    pub fn gain(&self, count: u32, v: u32, f: u32) -> f64 {
        let table = count as i128 * self.global[v as usize] as i128;
        let diff = self.n as i128 * f as i128 - table;
        diff as f64 / table as f64
    }

    /// True if no value of the class gains more than its bound.
    pub fn holds(&self, count: u32, values: &[u32], freqs: &[u32]) -> bool {
        values
            .iter()
            .zip(freqs)
            .all(|(&v, &f)| self.gain(count, v, f) <= self.bound[v as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::super::PrivacyModel;
    use super::super::testutil::*;
    use super::*;

    fn delta(d: f64) -> PrivacyModel {
        PrivacyModel::DeltaDisclosure {
            attribute: "s".into(),
            delta: d,
        }
    }

    fn basic(beta: f64) -> PrivacyModel {
        PrivacyModel::BasicBetaLikeness {
            attribute: "s".into(),
            beta,
        }
    }

    fn enhanced(beta: f64) -> PrivacyModel {
        PrivacyModel::EnhancedBetaLikeness {
            attribute: "s".into(),
            beta,
        }
    }

    /// Table distribution x: 1/2, y: 1/4, z: 1/4 (n = 8).
    /// c0 {x, y}: ratios x 1, y 2. c1 {x, x, y, z}: all ratios 1. c2 {x, z}: x 1, z 2.
    const CLASSES: &[&[&str]] = &[&["x", "y"], &["x", "x", "y", "z"], &["x", "z"]];

    #[test]
    fn delta_disclosure_by_hand() {
        // |log₂ 2| = 1 is not < 1: c0 and c2 violate δ = 1, everything fulfils δ = 1.0001.
        assert_eq!(
            suppressed_classes(CLASSES, None, vec![delta(1.0)]),
            [true, false, true]
        );
        assert_eq!(
            suppressed_classes(CLASSES, None, vec![delta(1.0001)]),
            [false, false, false]
        );
        // Values absent from c0 (z) are not checked. Ratios below 1 count as well: table
        // x: 1/2, y: 1/2; c0 {x, y, y, y}: x ratio (1/4)/(1/2) = 1/2 → |log₂| = 1, y ratio 3/2 →
        // 0.585; c1 {x, x, x, y} symmetrically.
        let low: &[&[&str]] = &[&["x", "y", "y", "y"], &["x", "x", "x", "y"]];
        assert_eq!(
            suppressed_classes(low, None, vec![delta(1.0)]),
            [true, true]
        );
        assert_eq!(
            suppressed_classes(low, None, vec![delta(1.1)]),
            [false, false]
        );
        let t = class_table(CLASSES);
        let p = problem(
            t,
            &[("g", &class_hierarchy(3))],
            &[("s", None)],
            vec![delta(1.0)],
            0.0,
        )
        .unwrap();
        let m = DeltaDisclosure::new(&p.sensitive_domains()[0], 1.0);
        let (v, f) = p.base_groups().hists[0].get(1);
        assert_eq!(m.disclosure(4, v, f), 0.0);
    }

    #[test]
    fn basic_beta_likeness_by_hand() {
        // Gains: c0 y (1/2 − 1/4)/(1/4) = 1; c1 all 0; c2 z 1.
        assert_eq!(
            suppressed_classes(CLASSES, None, vec![basic(1.0)]),
            [false, false, false]
        );
        assert_eq!(
            suppressed_classes(CLASSES, None, vec![basic(0.99)]),
            [true, false, true]
        );
    }

    #[test]
    fn enhanced_beta_likeness_by_hand() {
        // Table x: 1/2, y: 1/4, z: 1/4 (n = 4): c0 {x, x}: gain of x = 1; c1 {y, z}: gains 1.
        // Basic β = 1 accepts both; enhanced bounds x by min(1, ln 2 = 0.693) and y, z by
        // min(1, ln 4) = 1, so c0 violates.
        let classes: &[&[&str]] = &[&["x", "x"], &["y", "z"]];
        assert_eq!(
            suppressed_classes(classes, None, vec![basic(1.0)]),
            [false, false]
        );
        assert_eq!(
            suppressed_classes(classes, None, vec![enhanced(1.0)]),
            [true, false]
        );
        // β below ln 2 makes β the bound for every value: both classes gain 1 > 0.5.
        assert_eq!(
            suppressed_classes(classes, None, vec![enhanced(0.5)]),
            [true, true]
        );
        // A value that makes up the whole table has bound min(β, ln 1 = 0) and gain 0.
        assert_eq!(
            suppressed_classes(&[&["x"], &["x", "x"]], None, vec![enhanced(2.0)]),
            [false, false]
        );
    }
}
