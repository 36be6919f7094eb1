//! Command-line values named by the engine's own lists: `--algorithm` ([`Algorithm::ALL`]),
//! `--quality` ([`QualityModel::ALL`]) and `--local-method` ([`LocalMethod::ALL`]). clap rejects any other name and lists the valid ones;
//! the engine crate stays free of clap.

use clap::ValueEnum;
use clap::builder::{EnumValueParser, PossibleValue, PossibleValuesParser, TypedValueParser};
use deid_engine::local::LocalMethod;
use deid_engine::{Algorithm, QualityModel};

/// Parses `--algorithm`: every [`Algorithm::name`], plus `igreedy` for `improved-greedy`.
pub fn algorithm_parser() -> impl TypedValueParser<Value = Algorithm> {
    EnumValueParser::<AlgorithmName>::new().map(|a| a.0)
}

/// Parses `--local-method`: every [`LocalMethod::name`].
pub fn local_method_parser() -> impl TypedValueParser<Value = LocalMethod> {
    PossibleValuesParser::new(LocalMethod::NAMES)
        .map(|name| LocalMethod::from_name(&name).expect("one of LocalMethod::NAMES"))
}

/// Parses `--quality`: every [`QualityModel::name`].
pub fn quality_parser() -> impl TypedValueParser<Value = QualityModel> {
    EnumValueParser::<QualityName>::new().map(|q| q.0)
}

/// An [`Algorithm`] as clap sees it.
#[derive(Debug, Clone, Copy)]
struct AlgorithmName(Algorithm);

impl ValueEnum for AlgorithmName {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [AlgorithmName; Algorithm::ALL.len()] = {
            let mut all = [AlgorithmName(Algorithm::Auto); Algorithm::ALL.len()];
            let mut i = 0;
            while i < all.len() {
                all[i] = AlgorithmName(Algorithm::ALL[i]);
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let value = PossibleValue::new(self.0.name());
        Some(match self.0 {
            Algorithm::ImprovedGreedy => value.alias("igreedy"),
            _ => value,
        })
    }
}

/// A [`QualityModel`] as clap sees it.
#[derive(Debug, Clone, Copy)]
struct QualityName(QualityModel);

impl ValueEnum for QualityName {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [QualityName; QualityModel::ALL.len()] = {
            let mut all = [QualityName(QualityModel::Loss); QualityModel::ALL.len()];
            let mut i = 0;
            while i < all.len() {
                all[i] = QualityName(QualityModel::ALL[i]);
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every engine name parses to its own value; the alias and only the alias is extra.
    #[test]
    fn names_round_trip() {
        let cmd = clap::Command::new("t");
        for a in Algorithm::ALL {
            let parsed = algorithm_parser()
                .parse_ref(&cmd, None, std::ffi::OsStr::new(a.name()))
                .unwrap();
            assert_eq!(parsed, a);
        }
        let igreedy = algorithm_parser()
            .parse_ref(&cmd, None, std::ffi::OsStr::new("igreedy"))
            .unwrap();
        assert_eq!(igreedy, Algorithm::ImprovedGreedy);
        for q in QualityModel::ALL {
            let parsed = quality_parser()
                .parse_ref(&cmd, None, std::ffi::OsStr::new(q.name()))
                .unwrap();
            assert_eq!(parsed, q);
        }
        assert!(
            quality_parser()
                .parse_ref(&cmd, None, std::ffi::OsStr::new("lost"))
                .is_err()
        );
    }
}
