//! End-to-end searches on `examples/adult` (30 162 rows, 9 QIs, 12 960 transformations,
//! 5-anonymity, Loss): Flash with 0 %, 5 % and 100 % suppression, and Lightning with 5 %
//! suppression and a check limit (it would otherwise run to its end).

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use deid_engine::dataset::ArxDataset;
use deid_engine::search::NoObserver;
use deid_engine::{
    Algorithm, CancelFlag, PrivacyModel, Problem, ProblemConfig, SearchConfig, search,
};

fn adult(suppression: f64) -> Problem {
    let ds = ArxDataset::load(Path::new("../../examples/adult"), "adult").expect("examples/adult");
    let cfg = ProblemConfig {
        quasi_identifiers: ds.quasi_identifiers,
        privacy: vec![PrivacyModel::KAnonymity { k: 5 }],
        suppression_limit: suppression,
        ..ProblemConfig::default()
    };
    Problem::new(ds.table, cfg).expect("valid problem")
}

fn bench_search(c: &mut Criterion) {
    let mut group = c.benchmark_group("adult");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    let cases = [
        ("flash k=5 0%", Algorithm::Flash, 0.0, None),
        ("flash k=5 5%", Algorithm::Flash, 0.05, None),
        ("flash k=5 100%", Algorithm::Flash, 1.0, None),
        (
            "lightning k=5 5% 1000 checks",
            Algorithm::Lightning,
            0.05,
            Some(1000),
        ),
    ];
    for (name, algorithm, suppression, check_limit) in cases {
        let problem = adult(suppression);
        let config = SearchConfig {
            algorithm,
            check_limit,
            time_limit: Duration::from_secs(600),
            ..SearchConfig::default()
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                let outcome = search(&problem, &config, &CancelFlag::new(), &NoObserver)
                    .expect("valid configuration");
                black_box(outcome.best)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_search);
criterion_main!(benches);
