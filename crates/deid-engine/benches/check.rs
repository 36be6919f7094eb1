//! Check throughput: every transformation of adult (and of cup and fars_int when
//! `DEID_BENCH_DATA` points at a directory with ARX-layout datasets), k = 5, 5 % suppression, Loss.

use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use deid_engine::dataset::ArxDataset;
use deid_engine::privacy::PrivacyModel;
use deid_engine::{Checker, Problem, ProblemConfig};
use rayon::prelude::*;

fn problem(dir: &Path, name: &str) -> Problem {
    let ds = ArxDataset::load(dir, name).expect("dataset loads");
    let config = ProblemConfig {
        quasi_identifiers: ds.quasi_identifiers,
        privacy: vec![PrivacyModel::KAnonymity { k: 5 }],
        suppression_limit: 0.05,
        ..Default::default()
    };
    Problem::new(ds.table, config).expect("valid problem")
}

fn all_checks(c: &mut Criterion) {
    let mut sets: Vec<(String, PathBuf)> = vec![("adult".into(), "../../examples/adult".into())];
    if let Ok(dir) = std::env::var("DEID_BENCH_DATA") {
        for name in ["cup", "fars_int"] {
            sets.push((name.into(), Path::new(&dir).join(name)));
        }
    }
    let mut group = c.benchmark_group("check_all_transformations");
    group.sample_size(10);
    for (name, dir) in sets {
        let p = problem(&dir, &name);
        let size = p.lattice().size().unwrap() as usize;
        group.throughput(Throughput::Elements(size as u64));
        group.bench_function(&name, |b| {
            b.iter(|| {
                // A fresh checker per iteration: no results cached across iterations.
                let checker = Checker::new(&p);
                (0..size)
                    .into_par_iter()
                    .with_min_len(64)
                    .filter(|&id| {
                        let levels = p.lattice().levels_of(id as u128).unwrap();
                        checker.check(&levels).anonymous
                    })
                    .count()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, all_checks);
criterion_main!(benches);
