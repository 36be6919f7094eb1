//! `deid bench-api`: benchmarks of the service (placeholder while the service is being built).

use clap::Args;

/// Flags of `deid bench-api`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Seconds to measure.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
}

/// Runs the benchmark.
pub fn run(_args: BenchArgs) -> anyhow::Result<()> {
    Ok(())
}
