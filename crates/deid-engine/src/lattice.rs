//! The generalization lattice, never materialized: a transformation is a vector of levels (one per
//! quasi-identifier, within its `[min, max]`); ids are mixed-radix numbers (`u128`) when the space
//! fits, which it does for every realistic problem up to far beyond 30 quasi-identifiers.

/// One generalization level per quasi-identifier.
pub type Levels = Vec<u8>;

/// Hard limit on quasi-identifiers, i.e. on the dimensions of a lattice (as in ARX).
pub const MAX_QUASI_IDENTIFIERS: usize = 64;

/// The solution space: all level vectors between `min` and `max` component-wise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lattice {
    min: Vec<u8>,
    max: Vec<u8>,
    /// `strides[i]` = product of the ranges of the QIs after i (u128; `None` if the space overflows).
    strides: Option<Vec<u128>>,
}

impl Lattice {
    /// A lattice with the given inclusive bounds (`min[i] <= max[i]` is the caller's invariant).
    pub fn new(min: Vec<u8>, max: Vec<u8>) -> Lattice {
        assert_eq!(min.len(), max.len());
        let mut strides = vec![0u128; min.len()];
        let mut acc: Option<u128> = Some(1);
        for i in (0..min.len()).rev() {
            if let Some(a) = acc {
                strides[i] = a;
                acc = a.checked_mul((max[i] - min[i]) as u128 + 1);
            }
        }
        Lattice {
            min,
            max,
            strides: acc.map(|_| strides),
        }
    }

    /// Number of quasi-identifiers.
    pub fn dimensions(&self) -> usize {
        self.min.len()
    }

    /// Lowest level per QI.
    pub fn min(&self) -> &[u8] {
        &self.min
    }

    /// Highest level per QI.
    pub fn max(&self) -> &[u8] {
        &self.max
    }

    /// The bottom transformation.
    pub fn bottom(&self) -> Levels {
        self.min.clone()
    }

    /// The top transformation.
    pub fn top(&self) -> Levels {
        self.max.clone()
    }

    /// Exact number of transformations, if it fits in `u128`.
    pub fn size(&self) -> Option<u128> {
        self.min
            .iter()
            .zip(&self.max)
            .try_fold(1u128, |acc, (a, b)| acc.checked_mul((b - a) as u128 + 1))
    }

    /// Number of transformations as a float (always available, approximate beyond 2^53).
    pub fn size_f64(&self) -> f64 {
        self.min
            .iter()
            .zip(&self.max)
            .map(|(a, b)| (b - a) as f64 + 1.0)
            .product()
    }

    /// Exact number of transformations as a decimal string (any size).
    pub fn size_string(&self) -> String {
        // Little-endian base-10^9 big integer.
        let mut digits: Vec<u64> = vec![1];
        for (a, b) in self.min.iter().zip(&self.max) {
            let f = (b - a) as u64 + 1;
            let mut carry = 0u64;
            for d in digits.iter_mut() {
                let v = *d * f + carry;
                *d = v % 1_000_000_000;
                carry = v / 1_000_000_000;
            }
            while carry > 0 {
                digits.push(carry % 1_000_000_000);
                carry /= 1_000_000_000;
            }
        }
        let mut s = digits.last().map(|d| d.to_string()).unwrap_or_default();
        for d in digits.iter().rev().skip(1) {
            s.push_str(&format!("{d:09}"));
        }
        s
    }

    /// Sum of the levels (the lattice level / rank of a transformation).
    pub fn rank(levels: &[u8]) -> u32 {
        levels.iter().map(|&l| l as u32).sum()
    }

    /// Rank of the bottom node.
    pub fn min_rank(&self) -> u32 {
        Self::rank(&self.min)
    }

    /// Rank of the top node.
    pub fn max_rank(&self) -> u32 {
        Self::rank(&self.max)
    }

    /// Height of the lattice (top rank − bottom rank).
    pub fn height(&self) -> u32 {
        self.max_rank() - self.min_rank()
    }

    /// True if `levels` lies within the bounds.
    pub fn contains(&self, levels: &[u8]) -> bool {
        levels.len() == self.min.len()
            && levels
                .iter()
                .zip(self.min.iter().zip(&self.max))
                .all(|(l, (a, b))| a <= l && l <= b)
    }

    /// Compact id (mixed radix), if the space fits in `u128`.
    pub fn id(&self, levels: &[u8]) -> Option<u128> {
        let strides = self.strides.as_ref()?;
        Some(
            levels
                .iter()
                .zip(&self.min)
                .zip(strides)
                .map(|((l, m), s)| (l - m) as u128 * s)
                .sum(),
        )
    }

    /// Inverse of [`Lattice::id`].
    pub fn levels_of(&self, mut id: u128) -> Option<Levels> {
        let strides = self.strides.as_ref()?;
        let mut out = Vec::with_capacity(strides.len());
        for (i, s) in strides.iter().enumerate() {
            out.push(self.min[i] + (id / s) as u8);
            id %= s;
        }
        Some(out)
    }

    /// Direct generalizations (one QI one level higher), in QI order.
    pub fn successors(&self, levels: &[u8]) -> Vec<Levels> {
        (0..levels.len())
            .filter(|&i| levels[i] < self.max[i])
            .map(|i| {
                let mut s = levels.to_vec();
                s[i] += 1;
                s
            })
            .collect()
    }

    /// Direct specializations (one QI one level lower), in QI order.
    pub fn predecessors(&self, levels: &[u8]) -> Vec<Levels> {
        (0..levels.len())
            .filter(|&i| levels[i] > self.min[i])
            .map(|i| {
                let mut s = levels.to_vec();
                s[i] -= 1;
                s
            })
            .collect()
    }

    /// True if `a ≤ b` component-wise (b generalizes a).
    pub fn le(a: &[u8], b: &[u8]) -> bool {
        a.iter().zip(b).all(|(x, y)| x <= y)
    }

    /// Calls `f` for every transformation of the lattice in id order. Use only for small spaces.
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        let mut cur = self.min.clone();
        loop {
            f(&cur);
            let mut i = cur.len();
            loop {
                if i == 0 {
                    return;
                }
                i -= 1;
                if cur[i] < self.max[i] {
                    cur[i] += 1;
                    break;
                }
                cur[i] = self.min[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn adult_sized_lattice() {
        // Heights of adult's QIs: 2,5,2,3,4,3,3,3,2 → 12 960 transformations.
        let max = vec![1, 4, 1, 2, 3, 2, 2, 2, 1];
        let l = Lattice::new(vec![0; 9], max.clone());
        assert_eq!(l.size(), Some(12_960));
        assert_eq!(l.size_string(), "12960");
        assert_eq!(l.height(), 18);
        let mut n = 0;
        l.for_each(|t| {
            assert_eq!(l.levels_of(l.id(t).unwrap()).unwrap(), t);
            n += 1;
        });
        assert_eq!(n, 12_960);
    }

    #[test]
    fn huge_lattices_have_exact_sizes_and_ids() {
        // 64 QIs with 5 levels: 5^64 does not fit in u128.
        let l = Lattice::new(vec![0; 64], vec![4; 64]);
        assert_eq!(l.size(), None);
        assert_eq!(l.id(&[0; 64]), None);
        assert!(
            l.size_string()
                .starts_with("542101086242752217003726400434970855712890625")
        );
        // 30 QIs with 4 levels do fit.
        let l = Lattice::new(vec![0; 30], vec![3; 30]);
        assert_eq!(l.size(), Some(1u128 << 60));
        let t: Vec<u8> = (0..30).map(|i| (i % 4) as u8).collect();
        assert_eq!(l.levels_of(l.id(&t).unwrap()).unwrap(), t);
    }

    proptest! {
        #[test]
        fn successors_and_predecessors_mirror(
            bounds in prop::collection::vec((0u8..3, 0u8..4), 1..6),
            pick in prop::collection::vec(0u8..8, 6),
        ) {
            let min: Vec<u8> = bounds.iter().map(|b| b.0).collect();
            let max: Vec<u8> = bounds.iter().map(|b| b.0 + b.1).collect();
            let l = Lattice::new(min.clone(), max.clone());
            let t: Vec<u8> = (0..min.len()).map(|i| min[i] + pick[i] % (max[i] - min[i] + 1)).collect();
            for s in l.successors(&t) {
                prop_assert!(l.contains(&s));
                prop_assert_eq!(Lattice::rank(&s), Lattice::rank(&t) + 1);
                prop_assert!(l.predecessors(&s).contains(&t));
            }
            for p in l.predecessors(&t) {
                prop_assert!(l.successors(&p).contains(&t));
                prop_assert!(Lattice::le(&p, &t));
            }
        }
    }
}
