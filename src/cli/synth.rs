//! `deid bench generate`: synthetic census-like data of any size, in the layout of ARX's
//! benchmark files (`<dir>/<name>/<name>.csv` plus `<name>_hierarchy_<column>.csv` per
//! quasi-identifier, `;`-separated), for the scale benchmarks.
//!
//! Ten quasi-identifiers with hierarchies of 2 to 6 levels (233,280 transformations) and one
//! sensitive column. Columns are correlated as in real registries: the ZIP code lies in the
//! state, education and marital status depend on age, income on age and education, the
//! diagnosis on age and sex; ZIP codes within a county and ages follow skewed distributions, so
//! some classes are large and many records are unique on the lowest levels. Deterministic for a
//! given seed (its own SplitMix64 generator: the same file on every platform and version).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// States; each has [`COUNTIES`] counties with [`ZIPS_PER_COUNTY`] ZIP codes.
const STATES: u32 = 50;
const COUNTIES: u32 = 20;
const ZIPS_PER_COUNTY: u32 = 100;
const REGIONS: [&str; 4] = ["Northeast", "Midwest", "South", "West"];
const EDUCATION_GROUPS: [&str; 4] = ["primary", "secondary", "tertiary", "postgraduate"];
const MARITAL: [(&str, &str); 6] = [
    ("never-married", "single"),
    ("married", "partnered"),
    ("civil-union", "partnered"),
    ("separated", "formerly"),
    ("divorced", "formerly"),
    ("widowed", "formerly"),
];
const OCCUPATION_GROUPS: [&str; 6] = [
    "management",
    "professional",
    "service",
    "sales",
    "construction",
    "production",
];
const FIRST_YEAR: u32 = 2000;
const YEARS: u32 = 24;
/// The quasi-identifiers, in column order (the sensitive `diagnosis` follows them).
pub const QUASI_IDENTIFIERS: [&str; 10] = [
    "zip",
    "age",
    "sex",
    "state",
    "year",
    "income",
    "education",
    "marital",
    "occupation",
    "race",
];
/// The sensitive column.
pub const SENSITIVE: &str = "diagnosis";

/// SplitMix64: small, fast and fully specified.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        deid_engine::hash::splitmix64(&mut self.0)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u32) -> u32 {
        (((self.next() >> 32) * n as u64) >> 32) as u32
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Skewed towards small values: `⌊n · u²⌋`.
    fn skewed(&mut self, n: u32) -> u32 {
        let u = self.unit();
        ((u * u) * n as f64) as u32 % n
    }
}

fn zip(state: u32, county: u32, local: u32) -> String {
    // 5 digits: state (2) + county (1 or 2 merged into 3 digits) + local (2).
    format!(
        "{:02}{:01}{:02}",
        state * 2 + county / 10,
        county % 10,
        local
    )
}

fn age_band(age: u32, width: u32) -> String {
    let lo = age / width * width;
    format!("[{lo}-{}[", lo + width)
}

/// Writes the dataset `name` with `rows` records into `dir/name/`; returns the CSV's path.
/// Hierarchies list every value of the column's domain (not only those drawn).
pub fn generate(dir: &Path, name: &str, rows: u64, seed: u64) -> anyhow::Result<PathBuf> {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    write_hierarchies(&folder, name)?;
    let path = folder.join(format!("{name}.csv"));
    let tmp = folder.join(format!("{name}.csv.partial"));
    let file = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    writeln!(w, "{};{SENSITIVE}", QUASI_IDENTIFIERS.join(";"))?;
    let mut rng = Rng(seed ^ 0x5DEE_CE66_D1CE_5EED);
    // Skewed state populations: a few large states.
    for _ in 0..rows {
        let state = rng.skewed(STATES);
        let county = rng.skewed(COUNTIES);
        let local = rng.skewed(ZIPS_PER_COUNTY);
        // Ages: a broad pyramid, 0..99.
        let age = ((rng.unit() + rng.unit() + rng.unit()) / 3.0 * 100.0) as u32 % 100;
        let sex = if rng.below(2) == 0 { 'F' } else { 'M' };
        let year = FIRST_YEAR + rng.below(YEARS);
        // Education 0..16: capped by age, higher for some.
        let cap = (age.saturating_sub(5)).min(16);
        let education = if cap == 0 {
            0
        } else {
            (rng.below(cap + 1) + rng.below(cap + 1)) / 2
        };
        let marital = match age {
            0..=17 => 0,
            18..=29 => [0, 0, 1, 2][rng.below(4) as usize],
            30..=64 => [0, 1, 1, 1, 2, 3, 4][rng.below(7) as usize],
            _ => [1, 1, 4, 5, 5][rng.below(5) as usize],
        };
        let working = (18..=67).contains(&age);
        let income = if working {
            let base = 10 + education * 6 + (age.min(50) - 18.min(age)) * 2;
            (base + rng.below(40)).min(249)
        } else {
            rng.below(20)
        };
        let occupation = if working {
            (education / 3 * 5 + rng.below(10)) % 30
        } else {
            rng.below(30)
        };
        let race = rng.skewed(6);
        let diagnosis = (age / 10 * 3 + rng.skewed(12) + if sex == 'F' { 1 } else { 0 }) % 40;
        writeln!(
            w,
            "{};{age};{sex};S{state:02};{year};{income};E{education:02};{};O{occupation:02};R{race};D{diagnosis:02}",
            zip(state, county, local),
            MARITAL[marital].0,
        )?;
    }
    w.flush()?;
    drop(w);
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

fn write_hierarchy(
    folder: &Path,
    name: &str,
    column: &str,
    rows: &[Vec<String>],
) -> anyhow::Result<()> {
    let path = folder.join(format!("{name}_hierarchy_{column}.csv"));
    let mut w = BufWriter::new(
        File::create(&path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    for row in rows {
        writeln!(w, "{}", row.join(";"))?;
    }
    w.flush()?;
    Ok(())
}

/// Writes the hierarchy of every quasi-identifier as `<name>_hierarchy_<column>.csv`.
fn write_hierarchies(folder: &Path, name: &str) -> anyhow::Result<()> {
    let star = || "*".to_string();
    write_hierarchy(folder, name, "zip", &zip_hierarchy())?;
    write_hierarchy(folder, name, "age", &age_hierarchy())?;
    write_hierarchy(
        folder,
        name,
        "sex",
        &[vec!["F".into(), star()], vec!["M".into(), star()]],
    )?;
    // state: 3 levels.
    let rows: Vec<Vec<String>> = (0..STATES)
        .map(|s| {
            vec![
                format!("S{s:02}"),
                REGIONS[(s % 4) as usize].to_string(),
                star(),
            ]
        })
        .collect();
    write_hierarchy(folder, name, "state", &rows)?;
    write_hierarchy(folder, name, "year", &year_hierarchy())?;
    write_hierarchy(folder, name, "income", &income_hierarchy())?;
    let rows: Vec<Vec<String>> = (0..=16u32)
        .map(|e| {
            vec![
                format!("E{e:02}"),
                EDUCATION_GROUPS[(e / 5).min(3) as usize].to_string(),
                star(),
            ]
        })
        .collect();
    write_hierarchy(folder, name, "education", &rows)?;
    let rows: Vec<Vec<String>> = MARITAL
        .iter()
        .map(|(m, g)| vec![m.to_string(), g.to_string(), star()])
        .collect();
    write_hierarchy(folder, name, "marital", &rows)?;
    let rows: Vec<Vec<String>> = (0..30u32)
        .map(|o| {
            vec![
                format!("O{o:02}"),
                OCCUPATION_GROUPS[(o / 5) as usize].to_string(),
                star(),
            ]
        })
        .collect();
    write_hierarchy(folder, name, "occupation", &rows)?;
    let rows: Vec<Vec<String>> = (0..6u32).map(|r| vec![format!("R{r}"), star()]).collect();
    write_hierarchy(folder, name, "race", &rows)?;
    Ok(())
}

/// Rows of the zip hierarchy: 6 levels (digits masked from the right).
fn zip_hierarchy() -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for state in 0..STATES {
        for county in 0..COUNTIES {
            for local in 0..ZIPS_PER_COUNTY {
                let z = zip(state, county, local);
                let mut row = vec![z.clone()];
                for masked in 1..=5 {
                    row.push(format!("{}{}", &z[..5 - masked], "*".repeat(masked)));
                }
                rows.push(row);
            }
        }
    }
    rows
}

/// Rows of the age hierarchy: 6 levels.
fn age_hierarchy() -> Vec<Vec<String>> {
    (0..100)
        .map(|a: u32| {
            vec![
                a.to_string(),
                age_band(a, 5),
                age_band(a, 10),
                age_band(a, 20),
                if a < 60 { "<60" } else { ">=60" }.to_string(),
                "*".to_string(),
            ]
        })
        .collect()
}

/// Rows of the year hierarchy: 4 levels.
fn year_hierarchy() -> Vec<Vec<String>> {
    (0..YEARS)
        .map(|i| {
            let y = FIRST_YEAR + i;
            let p4 = y / 4 * 4;
            let p12 = (y - FIRST_YEAR) / 12 * 12 + FIRST_YEAR;
            vec![
                y.to_string(),
                format!("{p4}-{}", p4 + 3),
                format!("{p12}-{}", p12 + 11),
                "*".to_string(),
            ]
        })
        .collect()
}

/// Rows of the income hierarchy (thousands): 5 levels.
fn income_hierarchy() -> Vec<Vec<String>> {
    (0..250u32)
        .map(|i| {
            vec![
                i.to_string(),
                age_band(i, 10),
                age_band(i, 50),
                if i < 100 { "<100" } else { ">=100" }.to_string(),
                "*".to_string(),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use deid_engine::dataset::ArxDataset;

    #[test]
    fn generated_data_load_with_their_hierarchies() {
        let dir = std::env::temp_dir().join(format!("deid-synth-{}", std::process::id()));
        generate(&dir, "synth", 2000, 7).unwrap();
        let ds = ArxDataset::load(&dir.join("synth"), "synth").unwrap();
        assert_eq!(ds.table.rows(), 2000);
        assert_eq!(ds.quasi_identifiers.len(), 10);
        let config = deid_engine::ProblemConfig {
            quasi_identifiers: ds.quasi_identifiers,
            privacy: vec![deid_engine::privacy::PrivacyModel::KAnonymity { k: 5 }],
            ..Default::default()
        };
        // Every value has a row in its hierarchy, and the space is the documented one.
        let problem = deid_engine::Problem::new(ds.table, config).unwrap();
        assert_eq!(problem.lattice().size(), Some(233_280));
        // Same seed, same bytes; another seed, other bytes.
        let a = std::fs::read(dir.join("synth/synth.csv")).unwrap();
        generate(&dir, "synth", 2000, 7).unwrap();
        assert_eq!(a, std::fs::read(dir.join("synth/synth.csv")).unwrap());
        generate(&dir, "synth", 2000, 8).unwrap();
        assert_ne!(a, std::fs::read(dir.join("synth/synth.csv")).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
