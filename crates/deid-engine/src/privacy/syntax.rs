//! The compact text syntax of privacy models: `name(key=value,key=value,…)`, e.g.
//! `k-anonymity(k=5)` or `t-closeness(attribute=disease,t=0.2,distance=ordered)`.
//!
//! Names, keys and enumerated values are case-insensitive; whitespace around them is ignored.
//! Values that contain `,`, `(`, `)`, `=`, `"` or surrounding whitespace (column names) are
//! written in double quotes, with `""` for a quote inside. Keys may come in any order;
//! `Display` writes them in the order of [`MODEL_SYNTAX`] so that `parse(display(m)) == m`.
//!
//! Parsing is two steps: [`parse`] splits the text into the name and `(key, value)` pairs, and
//! [`from_params`] builds and validates the model from them (the service calls it directly for
//! the JSON object form, so that no value needs quoting). Errors name the parameter (`k`), or
//! nothing (the empty path) when the model as a whole is wrong.

use std::fmt;

use super::dp::{self, DpModel};
use super::{
    EntropyEstimator, Estimator, KMapEstimator, MODEL_SYNTAX, PrivacyModel, TClosenessDistance,
};
use crate::error::{EngineError, Result};
use crate::names::alternatives;

/// One model's name and its keys, each flagged required or optional.
struct Schema {
    name: &'static str,
    keys: &'static [(&'static str, bool)],
}

const SCHEMAS: &[Schema] = &[
    Schema {
        name: "k-anonymity",
        keys: &[("k", true)],
    },
    Schema {
        name: "distinct-l-diversity",
        keys: &[("attribute", true), ("l", true)],
    },
    Schema {
        name: "entropy-l-diversity",
        keys: &[("attribute", true), ("l", true), ("estimator", false)],
    },
    Schema {
        name: "recursive-l-diversity",
        keys: &[("attribute", true), ("c", true), ("l", true)],
    },
    Schema {
        name: "t-closeness",
        keys: &[("attribute", true), ("t", true), ("distance", true)],
    },
    Schema {
        name: "delta-disclosure",
        keys: &[("attribute", true), ("delta", true)],
    },
    Schema {
        name: "basic-beta-likeness",
        keys: &[("attribute", true), ("beta", true)],
    },
    Schema {
        name: "enhanced-beta-likeness",
        keys: &[("attribute", true), ("beta", true)],
    },
    Schema {
        name: "average-risk",
        keys: &[
            ("threshold", true),
            ("highest", false),
            ("records_at_risk", false),
        ],
    },
    Schema {
        name: "sample-uniqueness",
        keys: &[("threshold", true)],
    },
    Schema {
        name: "population-uniqueness",
        keys: &[("threshold", true), ("model", false)],
    },
    Schema {
        name: "k-map",
        keys: &[("k", true), ("alpha", false), ("estimator", false)],
    },
    Schema {
        name: "delta-presence",
        keys: &[("delta_min", true), ("delta_max", true)],
    },
    Schema {
        name: "differential-privacy",
        keys: &[
            ("epsilon", true),
            ("delta", true),
            ("search_share", false),
            ("steps", false),
        ],
    },
];

impl Schema {
    fn expected(&self) -> String {
        self.keys
            .iter()
            .map(|(k, required)| {
                if *required {
                    k.to_string()
                } else {
                    format!("{k} (optional)")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The parsed parameters of one model, checked against its schema.
struct Params<'a> {
    schema: &'a Schema,
    values: Vec<(&'static str, String)>,
}

impl Params<'_> {
    fn raw(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    fn string(&self, key: &str) -> String {
        // Required keys are present after `parse_params`.
        self.raw(key).unwrap_or_default().to_string()
    }

    fn number(&self, key: &str) -> Result<f64> {
        self.raw(key).map_or(Ok(0.0), |v| self.parse_number(key, v))
    }

    fn optional_number(&self, key: &str) -> Result<Option<f64>> {
        self.raw(key).map(|v| self.parse_number(key, v)).transpose()
    }

    fn parse_number(&self, key: &str, v: &str) -> Result<f64> {
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(EngineError::config(
                key,
                format!("expected a number for {key}, got '{v}'"),
            )),
        }
    }

    fn whole(&self, key: &str) -> Result<u32> {
        let v = self.raw(key).unwrap_or("0");
        v.parse::<u32>().map_err(|_| {
            EngineError::config(
                key,
                format!(
                    "expected a whole number from 0 to {} for {key}, got '{v}'",
                    u32::MAX
                ),
            )
        })
    }

    fn choice<T>(
        &self,
        key: &str,
        parse: fn(&str) -> Option<T>,
        names: &[&str],
        default: Option<T>,
    ) -> Result<T> {
        match (self.raw(key), default) {
            (None, Some(d)) => Ok(d),
            (v, _) => {
                let v = v.unwrap_or_default();
                parse(v).ok_or_else(|| {
                    let options = alternatives(names);
                    EngineError::config(key, format!("expected {options} for {key}, got '{v}'"))
                })
            }
        }
    }
}

/// Parses and validates one model in the text syntax.
pub(super) fn parse(text: &str) -> Result<PrivacyModel> {
    let text = text.trim();
    let (name, rest) = match text.find('(') {
        Some(i) => (text[..i].trim(), Some(&text[i + 1..])),
        None => (text, None),
    };
    let schema = schema(name)?;
    let pairs = match rest {
        None => Vec::new(),
        Some(rest) => split_params(schema, rest)?,
    };
    from_params(name, &pairs)
}

/// Builds and validates one model from its name and parameters.
pub(super) fn from_params(name: &str, params: &[(String, String)]) -> Result<PrivacyModel> {
    let schema = schema(name)?;
    let params = check_keys(schema, params)?;
    let model = build(&params)?;
    model.validate()?;
    Ok(model)
}

/// The schema of the model called `name` (case-insensitive, surrounding whitespace ignored).
fn schema(name: &str) -> Result<&'static Schema> {
    let name = name.trim();
    let lower = name.to_ascii_lowercase();
    SCHEMAS.iter().find(|s| s.name == lower).ok_or_else(|| {
        EngineError::config(
            "",
            format!(
                "unknown privacy model '{name}'; expected one of: {}",
                MODEL_SYNTAX.join(", ")
            ),
        )
    })
}

/// The characters of a parameter list with their byte positions.
type ParamChars<'a> = std::iter::Peekable<std::str::CharIndices<'a>>;

/// Splits `key=value,…)` into pairs, honouring double-quoted values.
fn split_params(schema: &Schema, rest: &str) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = rest.char_indices().peekable();
    let mut closed = false;
    // Empty parameter list.
    if rest.trim_start().starts_with(')') {
        let after = &rest[rest.find(')').unwrap_or(0) + 1..];
        if !after.trim().is_empty() {
            return Err(syntax_error(format!(
                "unexpected text '{}' after ')'",
                after.trim()
            )));
        }
        return Ok(pairs);
    }
    loop {
        let key = param_key(schema, &mut chars)?;
        // Value: quoted or up to ',' / ')'.
        while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
            chars.next();
        }
        let quoted = chars.peek().is_some_and(|(_, c)| *c == '"');
        let mut value = if quoted {
            chars.next();
            quoted_value(&key, &mut chars)?
        } else {
            String::new()
        };
        let end = value_end(&key, quoted, &mut value, &mut chars)?;
        let value = if quoted {
            value
        } else {
            value.trim().to_string()
        };
        pairs.push((key.trim().to_string(), value));
        match end {
            Some((_, ',')) => continue,
            Some((i, _)) => {
                let after = rest[i + 1..].trim();
                if !after.is_empty() {
                    return Err(syntax_error(format!("unexpected text '{after}' after ')'")));
                }
                closed = true;
            }
            None => {}
        }
        break;
    }
    if !closed {
        return Err(syntax_error(format!(
            "missing ')' at the end of the parameters of {}",
            schema.name
        )));
    }
    Ok(pairs)
}

/// A syntax error of the model text (no field: the whole text).
fn syntax_error(message: String) -> EngineError {
    EngineError::config("", message)
}

/// Reads a parameter's key (untrimmed) and the `=` after it.
fn param_key(schema: &Schema, chars: &mut ParamChars<'_>) -> Result<String> {
    let mut key = String::new();
    for (_, ch) in chars.by_ref() {
        match ch {
            '=' => return Ok(key),
            ',' | ')' | '(' | '"' => {
                return Err(syntax_error(format!(
                    "expected key=value in the parameters of {}, found '{}{ch}'",
                    schema.name,
                    key.trim()
                )));
            }
            _ => key.push(ch),
        }
    }
    Err(syntax_error(format!(
        "expected key=value and a closing ')' in the parameters of {}",
        schema.name
    )))
}

/// Reads a quoted value after its opening `"`, up to and including the closing one (`""` is
/// a quote).
fn quoted_value(key: &str, chars: &mut ParamChars<'_>) -> Result<String> {
    let mut value = String::new();
    while let Some((_, ch)) = chars.next() {
        if ch == '"' {
            if chars.peek().is_some_and(|(_, c)| *c == '"') {
                chars.next();
                value.push('"');
            } else {
                return Ok(value);
            }
        } else {
            value.push(ch);
        }
    }
    Err(syntax_error(format!(
        "unterminated quoted value for '{}'",
        key.trim()
    )))
}

/// Reads up to the `,` or `)` ending a value, appending an unquoted value's characters to
/// `value` (only whitespace may follow a quoted one); returns the position and the character
/// that ended it, `None` at the end of the text.
fn value_end(
    key: &str,
    quoted: bool,
    value: &mut String,
    chars: &mut ParamChars<'_>,
) -> Result<Option<(usize, char)>> {
    for (i, ch) in chars.by_ref() {
        match ch {
            ',' | ')' => return Ok(Some((i, ch))),
            c if quoted && !c.is_whitespace() => {
                return Err(syntax_error(format!(
                    "unexpected '{c}' after the quoted value of '{}'",
                    key.trim()
                )));
            }
            '(' | '"' | '=' => {
                return Err(syntax_error(format!(
                    "unexpected '{ch}' in the value of '{}'; quote values that contain it",
                    key.trim()
                )));
            }
            c => {
                if !quoted {
                    value.push(c);
                }
            }
        }
    }
    Ok(None)
}

/// Maps keys to the schema: unknown, duplicate and missing keys are errors. Keys are
/// case-insensitive; surrounding whitespace is ignored in keys and in every value but the
/// attribute (a column name, taken as given).
fn check_keys<'s>(schema: &'s Schema, pairs: &[(String, String)]) -> Result<Params<'s>> {
    let mut values: Vec<(&'static str, String)> = Vec::new();
    for (key, value) in pairs {
        let key = key.trim();
        let lower = key.to_ascii_lowercase();
        let Some(&(known, _)) = schema.keys.iter().find(|(k, _)| *k == lower) else {
            return Err(EngineError::config(
                key,
                format!(
                    "unknown parameter '{key}' for {}; expected: {}",
                    schema.name,
                    schema.expected()
                ),
            ));
        };
        if values.iter().any(|(k, _)| *k == known) {
            return Err(EngineError::config(
                known,
                format!("parameter '{known}' is given twice"),
            ));
        }
        let value = if known == "attribute" {
            value.clone()
        } else {
            value.trim().to_string()
        };
        values.push((known, value));
    }
    for &(key, required) in schema.keys {
        if required && !values.iter().any(|(k, _)| *k == key) {
            return Err(EngineError::config(
                key,
                format!(
                    "missing parameter '{key}' for {}; expected: {}",
                    schema.name,
                    schema.expected()
                ),
            ));
        }
    }
    Ok(Params { schema, values })
}

/// The model named by `p`'s schema, from its checked parameters.
///
/// Long because it is one arm per privacy model of the text syntax; each arm only reads its
/// parameters.
fn build(p: &Params<'_>) -> Result<PrivacyModel> {
    Ok(match p.schema.name {
        "k-anonymity" => PrivacyModel::KAnonymity { k: p.whole("k")? },
        "distinct-l-diversity" => PrivacyModel::DistinctLDiversity {
            attribute: p.string("attribute"),
            l: p.whole("l")?,
        },
        "entropy-l-diversity" => PrivacyModel::EntropyLDiversity {
            attribute: p.string("attribute"),
            l: p.number("l")?,
            estimator: p.choice(
                "estimator",
                EntropyEstimator::parse,
                &EntropyEstimator::NAMES,
                Some(EntropyEstimator::Shannon),
            )?,
        },
        "recursive-l-diversity" => PrivacyModel::RecursiveCLDiversity {
            attribute: p.string("attribute"),
            c: p.number("c")?,
            l: p.whole("l")?,
        },
        "t-closeness" => PrivacyModel::TCloseness {
            attribute: p.string("attribute"),
            t: p.number("t")?,
            distance: p.choice(
                "distance",
                TClosenessDistance::parse,
                &TClosenessDistance::NAMES,
                None,
            )?,
        },
        "delta-disclosure" => PrivacyModel::DeltaDisclosure {
            attribute: p.string("attribute"),
            delta: p.number("delta")?,
        },
        "basic-beta-likeness" => PrivacyModel::BasicBetaLikeness {
            attribute: p.string("attribute"),
            beta: p.number("beta")?,
        },
        "enhanced-beta-likeness" => PrivacyModel::EnhancedBetaLikeness {
            attribute: p.string("attribute"),
            beta: p.number("beta")?,
        },
        "average-risk" => PrivacyModel::AverageRisk {
            threshold: p.number("threshold")?,
            highest: p.optional_number("highest")?,
            records_at_risk: p.optional_number("records_at_risk")?,
        },
        "population-uniqueness" => PrivacyModel::PopulationUniqueness {
            threshold: p.number("threshold")?,
            estimator: p.choice(
                "model",
                Estimator::parse,
                &Estimator::NAMES,
                Some(Estimator::Dankar),
            )?,
        },
        // Without α: the population is the table itself (a research subset is released).
        "k-map" if p.raw("alpha").is_none() => {
            if p.raw("estimator").is_some() {
                return Err(EngineError::config(
                    "alpha",
                    "k-map with an estimator needs alpha (the significance level, in [0, 1]); \
                     without alpha and estimator the table is the population and a research \
                     subset is released",
                ));
            }
            PrivacyModel::KMapSubset { k: p.whole("k")? }
        }
        "k-map" => PrivacyModel::KMap {
            k: p.whole("k")?,
            alpha: p.number("alpha")?,
            estimator: p.choice(
                "estimator",
                KMapEstimator::parse,
                &KMapEstimator::NAMES,
                Some(KMapEstimator::Poisson),
            )?,
        },
        "delta-presence" => PrivacyModel::DeltaPresence {
            delta_min: p.number("delta_min")?,
            delta_max: p.number("delta_max")?,
        },
        "differential-privacy" => PrivacyModel::DifferentialPrivacy(DpModel {
            search_share: p
                .optional_number("search_share")?
                .unwrap_or(dp::DEFAULT_SEARCH_SHARE),
            steps: match p.raw("steps") {
                Some(_) => p.whole("steps")?,
                None => dp::DEFAULT_STEPS,
            },
            ..DpModel::new(p.number("epsilon")?, p.number("delta")?)
        }),
        _ => PrivacyModel::SampleUniqueness {
            threshold: p.number("threshold")?,
        },
    })
}

/// Writes a value, quoting it if it would not parse back as is.
fn value(f: &mut fmt::Formatter<'_>, v: &str) -> fmt::Result {
    let plain = !v.is_empty() && v.trim() == v && !v.contains([',', '(', ')', '=', '"']);
    if plain {
        f.write_str(v)
    } else {
        write!(f, "\"{}\"", v.replace('"', "\"\""))
    }
}

/// Writes the text syntax of `m`.
pub(super) fn write(m: &PrivacyModel, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{}(", m.name())?;
    if let Some(a) = m.attribute() {
        f.write_str("attribute=")?;
        value(f, a)?;
        f.write_str(",")?;
    }
    match m {
        PrivacyModel::KAnonymity { k } => write!(f, "k={k}")?,
        PrivacyModel::DistinctLDiversity { l, .. } => write!(f, "l={l}")?,
        PrivacyModel::EntropyLDiversity { l, estimator, .. } => {
            write!(f, "l={l},estimator={}", estimator.name())?
        }
        PrivacyModel::RecursiveCLDiversity { c, l, .. } => write!(f, "c={c},l={l}")?,
        PrivacyModel::TCloseness { t, distance, .. } => {
            write!(f, "t={t},distance={}", distance.name())?
        }
        PrivacyModel::DeltaDisclosure { delta, .. } => write!(f, "delta={delta}")?,
        PrivacyModel::BasicBetaLikeness { beta, .. }
        | PrivacyModel::EnhancedBetaLikeness { beta, .. } => write!(f, "beta={beta}")?,
        PrivacyModel::AverageRisk {
            threshold,
            highest,
            records_at_risk,
        } => {
            write!(f, "threshold={threshold}")?;
            if let Some(h) = highest {
                write!(f, ",highest={h}")?;
            }
            if let Some(r) = records_at_risk {
                write!(f, ",records_at_risk={r}")?;
            }
        }
        PrivacyModel::SampleUniqueness { threshold } => write!(f, "threshold={threshold}")?,
        PrivacyModel::PopulationUniqueness {
            threshold,
            estimator,
        } => write!(f, "threshold={threshold},model={}", estimator.name())?,
        PrivacyModel::KMap {
            k,
            alpha,
            estimator,
        } => write!(f, "k={k},alpha={alpha},estimator={}", estimator.name())?,
        PrivacyModel::KMapSubset { k } => write!(f, "k={k}")?,
        PrivacyModel::DeltaPresence {
            delta_min,
            delta_max,
        } => write!(f, "delta_min={delta_min},delta_max={delta_max}")?,
        PrivacyModel::DifferentialPrivacy(m) => write!(
            f,
            "epsilon={},delta={},search_share={},steps={}",
            m.epsilon, m.delta, m.search_share, m.steps
        )?,
    }
    f.write_str(")")
}

#[cfg(test)]
mod tests {
    use super::super::testutil::sample_models;
    use super::*;
    use proptest::prelude::*;

    fn field_of(text: &str) -> (String, String) {
        match PrivacyModel::parse(text) {
            Err(EngineError::InvalidConfig { field, message }) => (field, message),
            other => panic!("{text}: expected an error, got {other:?}"),
        }
    }

    #[test]
    fn examples_parse_and_print() {
        let cases = [
            "k-anonymity(k=5)",
            "distinct-l-diversity(attribute=x,l=3)",
            "entropy-l-diversity(attribute=x,l=2.5,estimator=grassberger)",
            "entropy-l-diversity(attribute=x,l=2,estimator=shannon)",
            "recursive-l-diversity(attribute=occupation,c=4,l=3)",
            "t-closeness(attribute=x,t=0.2,distance=equal)",
            "t-closeness(attribute=x,t=0.2,distance=ordered)",
            "t-closeness(attribute=x,t=0.2,distance=hierarchical)",
            "delta-disclosure(attribute=x,delta=1.2)",
            "basic-beta-likeness(attribute=x,beta=1)",
            "enhanced-beta-likeness(attribute=x,beta=1)",
            "average-risk(threshold=0.1)",
            "average-risk(threshold=0.1,highest=0.2,records_at_risk=0.05)",
            "sample-uniqueness(threshold=0.01)",
            "population-uniqueness(threshold=0.01,model=pitman)",
            "population-uniqueness(threshold=0,model=zayatz)",
            "population-uniqueness(threshold=1,model=snb)",
            "population-uniqueness(threshold=0.5,model=dankar)",
        ];
        for text in cases {
            let m = PrivacyModel::parse(text).unwrap();
            assert_eq!(m.to_string(), text);
            assert_eq!(text.split('(').next(), Some(m.name()));
        }
        assert_eq!(
            PrivacyModel::parse("recursive-l-diversity(attribute=occupation,c=4,l=3)").unwrap(),
            PrivacyModel::RecursiveCLDiversity {
                attribute: "occupation".into(),
                c: 4.0,
                l: 3
            }
        );
        assert_eq!(
            PrivacyModel::parse("average-risk(threshold=0.1,highest=0.2,records_at_risk=0.05)")
                .unwrap(),
            PrivacyModel::AverageRisk {
                threshold: 0.1,
                highest: Some(0.2),
                records_at_risk: Some(0.05)
            }
        );
    }

    #[test]
    fn parsing_is_lenient_about_case_order_and_spaces() {
        assert_eq!(
            PrivacyModel::parse(
                "  T-Closeness ( Distance = Ordered , t = 0.25 , attribute = age ) "
            )
            .unwrap(),
            PrivacyModel::TCloseness {
                attribute: "age".into(),
                t: 0.25,
                distance: TClosenessDistance::Ordered
            }
        );
        // The estimator defaults to Shannon.
        assert_eq!(
            PrivacyModel::parse("entropy-l-diversity(attribute=x,l=3)").unwrap(),
            PrivacyModel::EntropyLDiversity {
                attribute: "x".into(),
                l: 3.0,
                estimator: EntropyEstimator::Shannon
            }
        );
    }

    #[test]
    fn awkward_attribute_names_are_quoted() {
        for name in [
            "a,b",
            "f(x)",
            "x=y",
            "say \"hi\"",
            " padded ",
            "Ünïcode ok",
            "a)b",
        ] {
            let m = PrivacyModel::DistinctLDiversity {
                attribute: name.into(),
                l: 2,
            };
            let text = m.to_string();
            assert_eq!(PrivacyModel::parse(&text).unwrap(), m, "{text}");
        }
        assert_eq!(
            PrivacyModel::DistinctLDiversity {
                attribute: "a,b".into(),
                l: 2
            }
            .to_string(),
            "distinct-l-diversity(attribute=\"a,b\",l=2)"
        );
        assert_eq!(
            PrivacyModel::DistinctLDiversity {
                attribute: "plain name".into(),
                l: 2
            }
            .to_string(),
            "distinct-l-diversity(attribute=plain name,l=2)"
        );
    }

    #[test]
    fn every_kind_of_error_names_the_culprit() {
        let (field, message) = field_of("l-diversity(attribute=x,l=2)");
        assert_eq!(field, "");
        assert!(message.contains("'l-diversity'"), "{message}");
        assert!(
            message.contains("k-anonymity(k=…)") && message.contains("sample-uniqueness"),
            "{message}"
        );

        let (field, message) = field_of("k-anonymity(k=5,l=2)");
        assert_eq!(field, "l");
        assert!(message.contains("unknown parameter 'l'") && message.contains("expected: k"));

        let (field, message) = field_of("t-closeness(attribute=x,t=0.2)");
        assert_eq!(field, "distance");
        assert!(
            message.contains("missing parameter 'distance'")
                && message.contains("attribute, t, distance"),
            "{message}"
        );

        let (field, message) = field_of("k-anonymity");
        assert_eq!(field, "k");
        assert!(message.contains("missing parameter 'k'"));

        let (field, message) = field_of("k-anonymity(k=five)");
        assert_eq!(field, "k");
        assert!(message.contains("whole number") && message.contains("'five'"));

        let (field, message) = field_of("distinct-l-diversity(attribute=x,l=2.5)");
        assert_eq!(field, "l");
        assert!(message.contains("'2.5'"));

        let (field, message) = field_of("k-anonymity(k=-1)");
        assert_eq!(field, "k");
        assert!(message.contains("'-1'"));

        let (field, message) = field_of("t-closeness(attribute=x,t=abc,distance=equal)");
        assert_eq!(field, "t");
        assert!(message.contains("expected a number") && message.contains("'abc'"));

        let (field, _) = field_of("delta-disclosure(attribute=x,delta=NaN)");
        assert_eq!(field, "delta");
        let (field, _) = field_of("basic-beta-likeness(attribute=x,beta=inf)");
        assert_eq!(field, "beta");

        let (field, message) = field_of("t-closeness(attribute=x,t=0.2,distance=manhattan)");
        assert_eq!(field, "distance");
        assert!(
            message.contains("equal, ordered or hierarchical") && message.contains("'manhattan'")
        );

        let (field, message) = field_of("entropy-l-diversity(attribute=x,l=2,estimator=miller)");
        assert_eq!(field, "estimator");
        assert!(message.contains("shannon or grassberger"));

        let (field, message) = field_of("k-anonymity(k=2,k=3)");
        assert_eq!(field, "k");
        assert!(message.contains("twice"));

        let (field, message) = field_of("k-anonymity(k=2");
        assert_eq!(field, "");
        assert!(message.contains("missing ')'"), "{message}");

        let (field, message) = field_of("k-anonymity(k=2) extra");
        assert_eq!(field, "");
        assert!(message.contains("'extra'"), "{message}");

        let (field, message) = field_of("k-anonymity(k)");
        assert_eq!(field, "");
        assert!(message.contains("key=value"), "{message}");

        let (field, message) = field_of("distinct-l-diversity(attribute=\"x,l=2)");
        assert_eq!(field, "");
        assert!(message.contains("unterminated"), "{message}");

        let (field, message) = field_of("distinct-l-diversity(attribute=f(x),l=2)");
        assert_eq!(field, "");
        assert!(message.contains("quote"), "{message}");

        // Estimated k-map: Poisson by default, the estimator named, α in [0, 1].
        let m = PrivacyModel::parse("k-map(k=1000,alpha=0.01)").unwrap();
        assert_eq!(
            m,
            PrivacyModel::KMap {
                k: 1000,
                alpha: 0.01,
                estimator: KMapEstimator::Poisson
            }
        );
        assert_eq!(PrivacyModel::parse(&m.to_string()).unwrap(), m);
        let ztp = "k-map(k=5,alpha=0.05,estimator=zero-truncated-poisson)";
        assert_eq!(PrivacyModel::parse(ztp).unwrap().to_string(), ztp);
        assert_eq!(
            field_of("k-map(k=5,alpha=0.01,estimator=normal)").0,
            "estimator"
        );
        assert_eq!(field_of("k-map(k=5,alpha=1.5)").0, "alpha");
        assert_eq!(field_of("k-map(k=0,alpha=0.1)").0, "k");
        // Without α: k-map with the table as the population (a research subset is released).
        let m = PrivacyModel::parse("k-map(k=5)").unwrap();
        assert_eq!(m, PrivacyModel::KMapSubset { k: 5 });
        assert_eq!(m.to_string(), "k-map(k=5)");
        assert_eq!(field_of("k-map(k=5,estimator=poisson)").0, "alpha");
        assert_eq!(field_of("k-map(k=0)").0, "k");

        // δ-presence: both bounds in [0, 1], δmin ≤ δmax.
        let text = "delta-presence(delta_min=0.1,delta_max=0.5)";
        let m = PrivacyModel::parse(text).unwrap();
        assert_eq!(
            m,
            PrivacyModel::DeltaPresence {
                delta_min: 0.1,
                delta_max: 0.5
            }
        );
        assert_eq!(m.to_string(), text);
        assert_eq!(field_of("delta-presence(delta_min=0.1)").0, "delta_max");
        assert_eq!(
            field_of("delta-presence(delta_min=-0.1,delta_max=0.5)").0,
            "delta_min"
        );
        assert_eq!(
            field_of("delta-presence(delta_min=0,delta_max=1.5)").0,
            "delta_max"
        );
        let (field, message) = field_of("delta-presence(delta_min=0.6,delta_max=0.5)");
        assert_eq!(field, "delta_min");
        assert!(message.contains("at most delta_max"), "{message}");

        // The estimator defaults to Dankar's rule; the threshold lies in [0, 1].
        assert_eq!(
            PrivacyModel::parse("population-uniqueness(threshold=0.01)").unwrap(),
            PrivacyModel::PopulationUniqueness {
                threshold: 0.01,
                estimator: Estimator::Dankar
            }
        );
        let (field, message) = field_of("population-uniqueness(threshold=0.01,model=poisson)");
        assert_eq!(field, "model");
        assert!(
            message.contains("pitman, zayatz, snb or dankar"),
            "{message}"
        );
        let (field, _) = field_of("population-uniqueness(threshold=1.01)");
        assert_eq!(field, "threshold");
        let (field, _) = field_of("population-uniqueness(threshold=-0.1,model=pitman)");
        assert_eq!(field, "threshold");

        let (field, message) = field_of("sample-uniqueness()");
        assert_eq!(field, "threshold");
        assert!(message.contains("missing"));

        // Out-of-range values are validated too; errors name the parameter.
        let (field, message) = field_of("k-anonymity(k=0)");
        assert_eq!(field, "k");
        assert!(message.contains("at least 1"));
        let (field, _) = field_of("t-closeness(attribute=x,t=1.5,distance=equal)");
        assert_eq!(field, "t");
        let (field, _) = field_of("average-risk(threshold=0.1,highest=0.2)");
        assert_eq!(field, "records_at_risk");
        let (field, _) = field_of("distinct-l-diversity(attribute=,l=2)");
        assert_eq!(field, "attribute");
    }

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parameters_need_no_quoting() {
        for name in [
            "a,b",
            "x=(y)",
            "f(x)",
            "a)b",
            "say \"hi\"",
            " padded ",
            "k=5,l=2",
        ] {
            let m = PrivacyModel::from_params(
                "t-closeness",
                &params(&[("attribute", name), ("t", "0.2"), ("distance", "ordered")]),
            )
            .unwrap();
            assert_eq!(
                m,
                PrivacyModel::TCloseness {
                    attribute: name.into(),
                    t: 0.2,
                    distance: TClosenessDistance::Ordered
                }
            );
            // The text syntax needs the name in quotes.
            let quoted = format!(
                "t-closeness(attribute=\"{}\",t=0.2,distance=ordered)",
                name.replace('"', "\"\"")
            );
            assert_eq!(PrivacyModel::parse(&quoted).unwrap(), m, "{quoted}");
            assert_eq!(m.to_string(), quoted);
        }
        assert_eq!(
            PrivacyModel::parse("distinct-l-diversity(attribute=\"x=(y),z\", l=2)").unwrap(),
            PrivacyModel::DistinctLDiversity {
                attribute: "x=(y),z".into(),
                l: 2
            }
        );
        // Names and keys are case-insensitive and trimmed, as are values other than the attribute.
        assert_eq!(
            PrivacyModel::from_params(
                " Entropy-L-Diversity ",
                &params(&[
                    (" Attribute", " a "),
                    ("L ", " 2.5 "),
                    ("estimator", "Grassberger")
                ])
            )
            .unwrap(),
            PrivacyModel::EntropyLDiversity {
                attribute: " a ".into(),
                l: 2.5,
                estimator: EntropyEstimator::Grassberger
            }
        );
        assert_eq!(
            PrivacyModel::from_params("k-anonymity", &params(&[("k", "5")])).unwrap(),
            PrivacyModel::KAnonymity { k: 5 }
        );
    }

    #[test]
    fn parameter_errors_name_the_parameter() {
        let error = |name: &str, pairs: &[(&str, &str)]| match PrivacyModel::from_params(
            name,
            &params(pairs),
        ) {
            Err(EngineError::InvalidConfig { field, message }) => (field, message),
            other => panic!("{name} {pairs:?}: expected an error, got {other:?}"),
        };
        let (field, message) = error("k-anonymity(k=5)", &[]);
        assert_eq!(field, "");
        assert!(
            message.contains("unknown privacy model 'k-anonymity(k=5)'"),
            "{message}"
        );
        let (field, message) = error("k-anonymity", &[("k", "5"), ("l", "2")]);
        assert_eq!(field, "l");
        assert!(message.contains("unknown parameter 'l'"), "{message}");
        let (field, message) = error("k-anonymity", &[("k", "5"), ("K", "6")]);
        assert_eq!(field, "k");
        assert!(message.contains("twice"), "{message}");
        let (field, message) = error("t-closeness", &[("attribute", "a,b"), ("t", "0.2")]);
        assert_eq!(field, "distance");
        assert!(
            message.contains("missing parameter 'distance'"),
            "{message}"
        );
        let (field, message) = error("k-anonymity", &[("k", "[1,2]")]);
        assert_eq!(field, "k");
        assert!(message.contains("'[1,2]'"), "{message}");
        let (field, message) = error("distinct-l-diversity", &[("attribute", "a"), ("l", "0")]);
        assert_eq!(field, "l");
        assert!(message.contains("at least 1"), "{message}");
        // The caller puts the model's position in front.
        let e = PrivacyModel::from_params("k-anonymity", &params(&[("k", "x")]))
            .unwrap_err()
            .within("privacy[2]");
        assert!(
            matches!(&e, EngineError::InvalidConfig { field, .. } if field == "privacy[2].k"),
            "{e:?}"
        );
    }

    #[test]
    fn sample_models_round_trip() {
        for m in sample_models() {
            assert_eq!(PrivacyModel::parse(&m.to_string()).unwrap(), m, "{m}");
        }
    }

    fn arbitrary_model() -> impl Strategy<Value = PrivacyModel> {
        let chars = vec!['a', 'b', 'z', '(', ')', ',', '=', ' ', '"', 'é'];
        let attribute =
            prop::collection::vec(prop::sample::select(chars), 1..8).prop_map(String::from_iter);
        let share = (1u32..=1_000_000).prop_map(|x| x as f64 / 1_000_000.0);
        let positive = (1u32..1_000_000).prop_map(|x| x as f64 / 997.0);
        prop_oneof![
            (1u32..1000).prop_map(|k| PrivacyModel::KAnonymity { k }),
            (attribute.clone(), 1u32..50)
                .prop_map(|(attribute, l)| PrivacyModel::DistinctLDiversity { attribute, l }),
            (attribute.clone(), positive.clone(), any::<bool>()).prop_map(|(attribute, l, g)| {
                PrivacyModel::EntropyLDiversity {
                    attribute,
                    l: 1.0 + l,
                    estimator: if g {
                        EntropyEstimator::Grassberger
                    } else {
                        EntropyEstimator::Shannon
                    },
                }
            }),
            (attribute.clone(), positive.clone(), 1u32..20).prop_map(|(attribute, c, l)| {
                PrivacyModel::RecursiveCLDiversity { attribute, c, l }
            }),
            (attribute.clone(), share.clone(), 0u8..3).prop_map(|(attribute, t, d)| {
                PrivacyModel::TCloseness {
                    attribute,
                    t,
                    distance: [
                        TClosenessDistance::Equal,
                        TClosenessDistance::Ordered,
                        TClosenessDistance::Hierarchical,
                    ][d as usize],
                }
            }),
            (attribute.clone(), positive.clone())
                .prop_map(|(attribute, delta)| PrivacyModel::DeltaDisclosure { attribute, delta }),
            (attribute.clone(), positive.clone())
                .prop_map(|(attribute, beta)| PrivacyModel::BasicBetaLikeness { attribute, beta }),
            (attribute, positive).prop_map(|(attribute, beta)| {
                PrivacyModel::EnhancedBetaLikeness { attribute, beta }
            }),
            (
                share.clone(),
                prop::option::of((share.clone(), share.clone()))
            )
                .prop_map(|(threshold, relaxed)| PrivacyModel::AverageRisk {
                    threshold,
                    highest: relaxed.map(|r| r.0),
                    records_at_risk: relaxed.map(|r| r.1),
                }),
            share
                .clone()
                .prop_map(|threshold| PrivacyModel::SampleUniqueness { threshold }),
            (share, 0u8..4).prop_map(|(threshold, e)| PrivacyModel::PopulationUniqueness {
                threshold,
                estimator: [
                    Estimator::Pitman,
                    Estimator::Zayatz,
                    Estimator::Snb,
                    Estimator::Dankar
                ][e as usize],
            }),
        ]
    }

    proptest! {
        #[test]
        fn display_round_trips(m in arbitrary_model()) {
            let text = m.to_string();
            prop_assert_eq!(PrivacyModel::parse(&text).unwrap(), m, "{}", text);
        }
    }
}
