//! Population risk: the population model (how many people the data were sampled from), the
//! class-size histogram of a table, and the population-uniqueness estimators (Pitman, Zayatz,
//! SNB and Dankar et al.'s decision rule) with their deterministic Newton–Raphson solver.
//!
//! Pure numerics on class sizes: used by the `population-uniqueness` privacy model
//! ([`crate::privacy::risk`]) and by the risk report ([`crate::risk`]). Definitions and the
//! differences from ARX 3.9.2: `docs/definitions.md` §6.2.

use std::fmt;

use crate::error::{EngineError, Result};

pub mod estimators;
pub mod kmap;
pub mod newton;
pub mod special;

pub use estimators::{
    Estimate, Estimator, PitmanStatistics, UniquenessEstimates, pitman_statistics,
};
pub use kmap::{KMapEstimator, KPrime, k_prime};
pub use newton::SolverConfig;

/// ARX's population presets (ARX 3.9.2 `ARXPopulationModel.Region`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// 1,100,000,000.
    Africa,
    /// 23,130,900.
    Australia,
    /// 740,000,000.
    Europe,
    /// 565,265,000.
    NorthAmerica,
    /// 385,742,554.
    SouthAmerica,
    /// 507,420,000.
    EuropeanUnion,
    /// 202,656,788.
    Brazil,
    /// 34,834,841.
    Canada,
    /// 1,366,040,000.
    China,
    /// 65,820,916.
    France,
    /// 80,767,000.
    Germany,
    /// 1,210,569,573.
    India,
    /// 63,705,000.
    Uk,
    /// 317,238,626.
    Usa,
}

crate::names::enum_names! {
    Region {
        Africa => "africa",
        Australia => "australia",
        Europe => "europe",
        NorthAmerica => "north_america",
        SouthAmerica => "south_america",
        EuropeanUnion => "european_union",
        Brazil => "brazil" | "brasil",
        Canada => "canada",
        China => "china",
        France => "france",
        Germany => "germany",
        India => "india",
        Uk => "uk",
        Usa => "usa",
    }
    /// Name in specifications: `usa`, `european_union`, ….
    pub fn name;
    /// The region named exactly `name` (ARX's `brasil` too).
    fn from_name;
}

impl Region {
    /// Parses a name (case-insensitive; `-` and spaces count as `_`; ARX's `brasil` is accepted).
    pub fn parse(text: &str) -> Option<Region> {
        Region::from_name(&text.trim().to_ascii_lowercase().replace(['-', ' '], "_"))
    }

    /// The population size ARX uses for the region.
    pub fn population(self) -> u64 {
        match self {
            Region::Africa => 1_100_000_000,
            Region::Australia => 23_130_900,
            Region::Europe => 740_000_000,
            Region::NorthAmerica => 565_265_000,
            Region::SouthAmerica => 385_742_554,
            Region::EuropeanUnion => 507_420_000,
            Region::Brazil => 202_656_788,
            Region::Canada => 34_834_841,
            Region::China => 1_366_040_000,
            Region::France => 65_820_916,
            Region::Germany => 80_767_000,
            Region::India => 1_210_569_573,
            Region::Uk => 63_705_000,
            Region::Usa => 317_238_626,
        }
    }
}

/// How large the population is that the data were sampled from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PopulationModel {
    /// The population size N.
    Size(u64),
    /// The sampling fraction f = rows / N; N = round(rows / f), halves up (as ARX).
    SamplingFraction(f64),
    /// One of ARX's region presets.
    Region(Region),
}

impl PopulationModel {
    /// The population size for a table of `rows` records, validated: N ≥ rows, fraction in (0, 1].
    /// Errors name the field relative to the population model (`size`, `sampling_fraction`,
    /// `region`).
    pub fn population_size(&self, rows: usize) -> Result<u64> {
        let rows = rows as u64;
        let (field, n) = match *self {
            PopulationModel::Size(n) => ("size", n),
            PopulationModel::SamplingFraction(f) => {
                if !(f > 0.0 && f <= 1.0) {
                    return Err(EngineError::config(
                        "sampling_fraction",
                        format!("the sampling fraction must lie in (0, 1], got {f}"),
                    ));
                }
                let n = (rows as f64 / f + 0.5).floor();
                if n >= u64::MAX as f64 {
                    return Err(EngineError::config(
                        "sampling_fraction",
                        format!("the sampling fraction {f} makes the population too large"),
                    ));
                }
                ("sampling_fraction", (n as u64).max(rows))
            }
            PopulationModel::Region(r) => ("region", r.population()),
        };
        if n < rows.max(1) {
            return Err(EngineError::config(
                field,
                format!(
                    "the population ({n} people) must be at least as large as the data \
                     ({rows} records)"
                ),
            ));
        }
        Ok(n)
    }
}

impl fmt::Display for PopulationModel {
    /// `size=N`, `sampling_fraction=f` or `region=name`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PopulationModel::Size(n) => write!(f, "size={n}"),
            PopulationModel::SamplingFraction(x) => write!(f, "sampling_fraction={x}"),
            PopulationModel::Region(r) => write!(f, "region={}", r.name()),
        }
    }
}

/// The class-size histogram of a table: pairs (class size j, number of classes c_j) sorted by
/// size, n = Σ j·c_j records and u = Σ c_j classes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ClassSizes {
    pairs: Vec<(u64, u64)>,
    records: u64,
    classes: u64,
}

impl ClassSizes {
    /// The histogram of the given class sizes (zeros are ignored).
    pub fn from_sizes(sizes: impl IntoIterator<Item = u64>) -> ClassSizes {
        let mut all: Vec<u64> = sizes.into_iter().filter(|&s| s > 0).collect();
        all.sort_unstable();
        let mut pairs: Vec<(u64, u64)> = Vec::new();
        for s in all {
            match pairs.last_mut() {
                Some((size, count)) if *size == s => *count += 1,
                _ => pairs.push((s, 1)),
            }
        }
        ClassSizes::from_pairs(pairs)
    }

    /// The histogram of (size, count) pairs (any order; repeated sizes are added up, zero sizes
    /// and counts ignored).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u64, u64)>) -> ClassSizes {
        let mut pairs: Vec<(u64, u64)> =
            pairs.into_iter().filter(|&(s, c)| s > 0 && c > 0).collect();
        pairs.sort_unstable();
        pairs.dedup_by(|b, a| {
            if a.0 == b.0 {
                a.1 += b.1;
                true
            } else {
                false
            }
        });
        let records = pairs.iter().map(|(s, c)| s * c).sum();
        let classes = pairs.iter().map(|(_, c)| c).sum();
        ClassSizes {
            pairs,
            records,
            classes,
        }
    }

    /// (size, number of classes) pairs, sizes ascending.
    pub fn pairs(&self) -> &[(u64, u64)] {
        &self.pairs
    }

    /// Records n.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Classes u.
    pub fn classes(&self) -> u64 {
        self.classes
    }

    /// Classes of size `j` (c_j).
    pub fn count(&self, j: u64) -> u64 {
        self.pairs
            .binary_search_by_key(&j, |p| p.0)
            .map_or(0, |i| self.pairs[i].1)
    }

    /// Sample uniques c₁.
    pub fn uniques(&self) -> u64 {
        self.count(1)
    }

    /// The same histogram with `k` of its sample uniques removed (k ≤ c₁).
    pub fn without_uniques(&self, k: u64) -> ClassSizes {
        let mut pairs = self.pairs.clone();
        if let Some(first) = pairs.first_mut()
            && first.0 == 1
        {
            first.1 -= k.min(first.1);
        }
        ClassSizes::from_pairs(pairs)
    }
}
