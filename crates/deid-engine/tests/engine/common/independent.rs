//! An independent privacy checker for anonymized CSV output. It shares no code with the engine:
//! it parses the output itself, recomputes the equivalence classes from the published
//! quasi-identifier values and evaluates every model from its textbook definition.
//!
//! Suppressed records have `*` in every quasi-identifier; they must be at most ⌊limit·n⌋. When
//! every row is `*` (the fully generalized table) the rows form one ordinary class.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

/// A model to verify.
#[derive(Debug, Clone)]
pub enum Model {
    K(usize),
    DistinctL {
        attr: String,
        l: usize,
    },
    EntropyL {
        attr: String,
        l: f64,
    },
    RecursiveCL {
        attr: String,
        c: f64,
        l: usize,
    },
    /// Equal ground distance.
    TEqual {
        attr: String,
        t: f64,
    },
    /// Ordered distance over the values sorted numerically.
    TOrdered {
        attr: String,
        t: f64,
    },
    /// Hierarchical distance; `parents[v]` = the labels of v at levels 1.. of its hierarchy.
    THierarchical {
        attr: String,
        t: f64,
        paths: HashMap<String, Vec<String>>,
    },
    Delta {
        attr: String,
        delta: f64,
    },
    BetaBasic {
        attr: String,
        beta: f64,
    },
    BetaEnhanced {
        attr: String,
        beta: f64,
    },
    /// Average risk ≤ avg; optionally the share of records with risk > highest ≤ records_at_risk.
    AverageRisk {
        avg: f64,
        highest: Option<f64>,
        records_at_risk: Option<f64>,
    },
    SampleUniqueness(f64),
    /// Estimated population uniques / N ≤ threshold (0 only without sample uniques); `estimate`
    /// maps the published class sizes and N to the estimated number of population uniques.
    PopulationUniqueness {
        threshold: f64,
        population: u64,
        estimate: fn(&[u64], u64) -> Option<f64>,
    },
}

/// A parsed output table.
pub struct Output {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Output {
    pub fn parse(text: &str, delimiter: u8) -> Output {
        let mut rdr = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(true)
            .from_reader(text.as_bytes());
        let header = rdr.headers().unwrap().iter().map(String::from).collect();
        let rows = rdr
            .records()
            .map(|r| r.unwrap().iter().map(String::from).collect())
            .collect();
        Output { header, rows }
    }

    pub fn col(&self, name: &str) -> usize {
        self.header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("output has no column {name}"))
    }
}

/// Outcome of the independent check.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Records with all quasi-identifiers `*`.
    pub suppressed: usize,
    /// Classes of published (not all-`*`) records.
    pub classes: usize,
    /// Violations found (empty = all models hold).
    pub violations: Vec<String>,
}

fn entropy(counts: &[usize]) -> f64 {
    let n: usize = counts.iter().sum();
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n as f64;
            -p * p.ln()
        })
        .sum()
}

fn class_ok(
    model: &Model,
    rows: &[&Vec<String>],
    out: &Output,
    global: &HashMap<String, BTreeMap<String, usize>>,
    n_total: usize,
) -> Result<(), String> {
    let dist = |attr: &str| -> BTreeMap<String, usize> {
        let c = out.col(attr);
        let mut m = BTreeMap::new();
        for r in rows {
            *m.entry(r[c].clone()).or_insert(0) += 1;
        }
        m
    };
    let size = rows.len();
    match model {
        Model::K(k) => (size >= *k)
            .then_some(())
            .ok_or(format!("class of {size} < k={k}")),
        Model::DistinctL { attr, l } => {
            let d = dist(attr).len();
            (d >= *l)
                .then_some(())
                .ok_or(format!("{d} distinct < l={l}"))
        }
        Model::EntropyL { attr, l } => {
            let counts: Vec<usize> = dist(attr).values().copied().collect();
            let e = entropy(&counts);
            (e >= l.ln() - 1e-9)
                .then_some(())
                .ok_or(format!("entropy {e} < ln {l}"))
        }
        Model::RecursiveCL { attr, c, l } => {
            let mut counts: Vec<usize> = dist(attr).values().copied().collect();
            counts.sort_unstable_by(|a, b| b.cmp(a));
            if counts.len() < *l {
                return Err(format!("{} distinct < l={l}", counts.len()));
            }
            let tail: usize = counts[l - 1..].iter().sum();
            ((counts[0] as f64) < c * tail as f64)
                .then_some(())
                .ok_or(format!("r1={} ≥ c·tail={}", counts[0], c * tail as f64))
        }
        Model::TEqual { attr, t }
        | Model::TOrdered { attr, t }
        | Model::THierarchical { attr, t, .. } => {
            let g = &global[attr];
            let d = dist(attr);
            let p = |v: &str| *d.get(v).unwrap_or(&0) as f64 / size as f64;
            let q = |v: &str| g[v] as f64 / n_total as f64;
            let emd = match model {
                Model::TEqual { .. } => 0.5 * g.keys().map(|v| (p(v) - q(v)).abs()).sum::<f64>(),
                Model::TOrdered { .. } => {
                    let mut values: Vec<&String> = g.keys().collect();
                    values.sort_by(|a, b| match (a.parse::<f64>(), b.parse::<f64>()) {
                        (Ok(x), Ok(y)) => x.partial_cmp(&y).unwrap(),
                        _ => a.cmp(b),
                    });
                    let m = values.len();
                    if m < 2 {
                        0.0
                    } else {
                        let mut acc = 0.0;
                        let mut sum = 0.0;
                        for v in &values {
                            acc += p(v) - q(v);
                            sum += acc.abs();
                        }
                        sum / (m - 1) as f64
                    }
                }
                Model::THierarchical { paths, .. } => {
                    // Li et al.: cost = Σ over inner nodes N of height(N)/H · min(pos, neg) of the
                    // extra mass below N after matching at lower nodes.
                    let height = paths.values().next().map_or(1, |p| p.len()) as f64;
                    let mut extra: HashMap<(usize, String), f64> = HashMap::new();
                    for v in g.keys() {
                        let e = p(v) - q(v);
                        for (lvl, label) in paths[v].iter().enumerate() {
                            *extra.entry((lvl, label.clone())).or_insert(0.0) += e;
                        }
                    }
                    // pos/neg extra per node: recompute from children.
                    let mut cost = 0.0;
                    let levels = paths.values().next().map_or(0, |p| p.len());
                    for lvl in 0..levels {
                        let mut nodes: HashMap<&String, (f64, f64)> = HashMap::new();
                        // children of node at level lvl are nodes at lvl-1 (or leaves).
                        let children: HashMap<String, f64> = if lvl == 0 {
                            g.keys().map(|v| (v.clone(), p(v) - q(v))).collect()
                        } else {
                            extra
                                .iter()
                                .filter(|((l, _), _)| *l == lvl - 1)
                                .map(|((_, lab), e)| (lab.clone(), *e))
                                .collect()
                        };
                        for (child, e) in &children {
                            let parent = if lvl == 0 {
                                &paths[child][0]
                            } else {
                                g.keys()
                                    .map(|v| &paths[v])
                                    .find(|path| &path[lvl - 1] == child)
                                    .map(|path| &path[lvl])
                                    .unwrap()
                            };
                            let ent = nodes.entry(parent).or_insert((0.0, 0.0));
                            if *e > 0.0 {
                                ent.0 += e;
                            } else {
                                ent.1 -= e;
                            }
                        }
                        for (pos, neg) in nodes.values() {
                            cost += (lvl + 1) as f64 / height * pos.min(*neg);
                        }
                    }
                    cost
                }
                _ => unreachable!(),
            };
            (emd <= t + 1e-9)
                .then_some(())
                .ok_or(format!("EMD {emd} > t={t}"))
        }
        Model::Delta { attr, delta } => {
            let g = &global[attr];
            for (v, c) in dist(attr) {
                let p = c as f64 / size as f64;
                let q = g[&v] as f64 / n_total as f64;
                let d = (p / q).log2().abs();
                if d >= *delta {
                    return Err(format!("|log2(p/q)| = {d} ≥ δ={delta} for a value"));
                }
            }
            Ok(())
        }
        Model::BetaBasic { attr, beta } | Model::BetaEnhanced { attr, beta } => {
            let g = &global[attr];
            for (v, c) in dist(attr) {
                let p = c as f64 / size as f64;
                let q = g[&v] as f64 / n_total as f64;
                let bound = match model {
                    Model::BetaEnhanced { .. } => beta.min(-q.ln()),
                    _ => *beta,
                };
                if p > q && (p - q) / q > bound + 1e-9 {
                    return Err(format!("relative gain {} > {bound}", (p - q) / q));
                }
            }
            Ok(())
        }
        Model::AverageRisk { .. }
        | Model::SampleUniqueness(_)
        | Model::PopulationUniqueness { .. } => Ok(()),
    }
}

/// Verifies the output: recomputes classes over `qis` and checks every model.
pub fn verify(out: &Output, qis: &[&str], models: &[Model], suppression_limit: f64) -> Verdict {
    verify_marked(out, qis, models, suppression_limit, "*")
}

/// [`verify`] for an output whose suppressed records show `marker` in every quasi-identifier.
/// With a marker other than `*`, rows whose quasi-identifiers are all `*` form an ordinary
/// class (e.g. the top of every hierarchy in a step of local generalization).
pub fn verify_marked(
    out: &Output,
    qis: &[&str],
    models: &[Model],
    suppression_limit: f64,
    marker: &str,
) -> Verdict {
    let n = out.rows.len();
    let qi_cols: Vec<usize> = qis.iter().map(|q| out.col(q)).collect();
    let mut global: HashMap<String, BTreeMap<String, usize>> = HashMap::new();
    for m in models {
        let attr = match m {
            Model::DistinctL { attr, .. }
            | Model::EntropyL { attr, .. }
            | Model::RecursiveCL { attr, .. }
            | Model::TEqual { attr, .. }
            | Model::TOrdered { attr, .. }
            | Model::THierarchical { attr, .. }
            | Model::Delta { attr, .. }
            | Model::BetaBasic { attr, .. }
            | Model::BetaEnhanced { attr, .. } => attr,
            _ => continue,
        };
        let c = out.col(attr);
        let mut d = BTreeMap::new();
        for r in &out.rows {
            *d.entry(r[c].clone()).or_insert(0) += 1;
        }
        global.insert(attr.clone(), d);
    }
    let mut classes: BTreeMap<Vec<&str>, Vec<&Vec<String>>> = BTreeMap::new();
    let mut starred: Vec<&Vec<String>> = Vec::new();
    for r in &out.rows {
        let key: Vec<&str> = qi_cols.iter().map(|&c| r[c].as_str()).collect();
        if key.iter().all(|v| *v == marker) {
            starred.push(r);
        } else {
            classes.entry(key).or_default().push(r);
        }
    }
    let limit = (suppression_limit * n as f64).floor() as usize;
    let mut violations = Vec::new();
    for (key, rows) in &classes {
        for m in models {
            if let Err(e) = class_ok(m, rows, out, &global, n) {
                violations.push(format!("class {key:?}: {e}"));
            }
        }
    }
    // Rows with every quasi-identifier `*` are suppressed records — unless every row is, which is
    // the fully generalized table: then they form one ordinary class.
    let suppressed = if classes.is_empty() && marker == "*" {
        for m in models {
            if let Err(e) = class_ok(m, &starred, out, &global, n) {
                violations.push(format!("the single fully generalized class: {e}"));
            }
        }
        0
    } else {
        if starred.len() > limit {
            violations.push(format!(
                "{} suppressed records exceed the limit {limit}",
                starred.len()
            ));
        }
        starred.len()
    };
    // Sample-based models over the published classes.
    let published: usize = classes.values().map(|r| r.len()).sum();
    for m in models {
        match m {
            Model::AverageRisk {
                avg,
                highest,
                records_at_risk,
            } if published > 0 => {
                let risk = classes.len() as f64 / published as f64;
                if risk > *avg + 1e-12 {
                    violations.push(format!("average risk {risk} > {avg}"));
                }
                if let (Some(h), Some(share)) = (highest, records_at_risk) {
                    let at_risk: usize = classes
                        .values()
                        .filter(|r| 1.0 / r.len() as f64 > *h)
                        .map(|r| r.len())
                        .sum();
                    let s = at_risk as f64 / published as f64;
                    if s > *share + 1e-12 {
                        violations.push(format!("records at risk {s} > {share}"));
                    }
                }
            }
            // Share of the published records that are unique.
            Model::SampleUniqueness(th) if published > 0 => {
                let uniques = classes.values().filter(|r| r.len() == 1).count();
                let share = uniques as f64 / published as f64;
                if share > *th + 1e-12 {
                    violations.push(format!("sample uniques {share} > {th}"));
                }
            }
            Model::PopulationUniqueness {
                threshold,
                population,
                estimate,
            } if published > 0 => {
                let sizes: Vec<u64> = classes.values().map(|r| r.len() as u64).collect();
                let uniques = sizes.iter().filter(|&&s| s == 1).count();
                match estimate(&sizes, *population) {
                    Some(u) => {
                        let share = u / *population as f64;
                        let ok = (share > 0.0 && share <= threshold * (1.0 + 1e-9))
                            || (share == 0.0 && uniques == 0);
                        if !ok {
                            violations.push(format!(
                                "population uniques {share} > {threshold} ({uniques} sample uniques)"
                            ));
                        }
                    }
                    None if uniques > 0 => {
                        violations.push("no population-uniqueness estimate".to_string())
                    }
                    None => {}
                }
            }
            _ => {}
        }
    }
    Verdict {
        suppressed,
        classes: classes.len(),
        violations,
    }
}
