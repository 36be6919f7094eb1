//! `deid bench apply`: the recoding plan at scale. Generates the synthetic data of
//! `deid bench generate` (once), runs `deid anonymize --plan-output` on it (k-anonymity, `auto`
//! within a time limit), then times `deid apply` of that plan to the same CSV and `deid verify`
//! of the anonymized output, each as a separate process and several times, checking that
//! `apply` writes `anonymize --output`'s bytes.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use clap::Args;

use super::synth::{QUASI_IDENTIFIERS, SENSITIVE, generate};

/// Flags of `deid bench apply`.
#[derive(Debug, Args)]
pub struct ApplyBenchArgs {
    /// Comma-separated numbers of records.
    #[arg(long, default_value = "1000000")]
    pub rows: String,
    /// Where the generated datasets are kept (`<dir>/synth-<rows>/`; generated when missing).
    #[arg(long, default_value = "target/scale")]
    pub dir: PathBuf,
    /// Time limit of the search that makes the plan.
    #[arg(long, default_value = "60s")]
    pub time_limit: String,
    /// k of k-anonymity.
    #[arg(long, default_value_t = 5)]
    pub k: u32,
    /// Suppression limit.
    #[arg(long, default_value_t = 0.05)]
    pub suppression_limit: f64,
    /// Timed runs of `apply` and of `verify`.
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
}

/// Runs `deid bench apply`.
pub fn run(args: ApplyBenchArgs) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    println!(
        "| rows | CSV (MB) | plan (MB) | run | apply (s) | apply (rows/s) | same bytes | verify (s) | verify (rows/s) | verdict |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for rows in args
        .rows
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
    {
        let rows: u64 = rows.parse().with_context(|| format!("--rows: '{rows}'"))?;
        let name = format!("synth-{rows}");
        let folder = args.dir.join(&name);
        let csv = folder.join(format!("{name}.csv"));
        if !csv.exists() {
            eprintln!("generating {}", csv.display());
            generate(&args.dir, &name, rows, 1)?;
        }
        let (plan, anonymized) = (folder.join("plan.json"), folder.join("anonymized.csv"));
        eprintln!("planning {} (auto, {})", csv.display(), args.time_limit);
        let status = Command::new(&exe)
            .arg("anonymize")
            .args(job_flags(&folder, &name, &args))
            .args(["--input".into(), csv.clone().into_os_string()])
            .args(["--algorithm", "auto", "--time-limit", &args.time_limit])
            .args(["--output".into(), anonymized.clone().into_os_string()])
            .args(["--plan-output".into(), plan.clone().into_os_string()])
            .arg("--quiet")
            .arg("--report")
            .arg(folder.join("plan-report.json"))
            .status()?;
        anyhow::ensure!(status.success(), "deid anonymize failed: {status}");
        let mb = |p: &Path| std::fs::metadata(p).map_or(0.0, |m| m.len() as f64 / 1e6);
        let applied = folder.join("applied.csv");
        for run in 1..=args.runs {
            let (status, apply) = timed(
                Command::new(&exe)
                    .args(["apply", "--quiet", "--plan"])
                    .arg(&plan)
                    .arg("--input")
                    .arg(&csv)
                    .arg("--output")
                    .arg(&applied),
            )?;
            anyhow::ensure!(status.success(), "deid apply failed: {status}");
            let same = same_bytes(&applied, &anonymized)?;
            let (verdict, verify) = timed(
                Command::new(&exe)
                    .arg("verify")
                    .args(job_flags(&folder, &name, &args))
                    .arg("--released")
                    .arg(&anonymized)
                    .arg("--report")
                    .arg(folder.join("verify.json")),
            )?;
            println!(
                "| {rows} | {:.0} | {:.1} | {run} | {apply:.2} | {:.0} | {} | {verify:.2} | {:.0} | {} |",
                mb(&csv),
                mb(&plan),
                rows as f64 / apply,
                if same { "yes" } else { "NO" },
                rows as f64 / verify,
                if verdict.success() {
                    "passed"
                } else {
                    "failed"
                },
            );
        }
        let _ = std::fs::remove_file(&applied);
    }
    Ok(())
}

/// The job's flags shared by `anonymize` and `verify`: delimiter, model, suppression limit,
/// hierarchies, the sensitive column.
fn job_flags(folder: &Path, name: &str, args: &ApplyBenchArgs) -> Vec<OsString> {
    let mut flags: Vec<OsString> = ["--delimiter", ";", "--sensitive", SENSITIVE, "--privacy"]
        .into_iter()
        .map(OsString::from)
        .collect();
    flags.push(format!("k-anonymity(k={})", args.k).into());
    flags.push("--suppression-limit".into());
    flags.push(args.suppression_limit.to_string().into());
    for q in QUASI_IDENTIFIERS {
        flags.push("--hierarchy".into());
        let file = folder.join(format!("{name}_hierarchy_{q}.csv"));
        flags.push(format!("{q}={}", file.display()).into());
    }
    flags
}

/// Whether the files at `a` and `b` hold the same bytes.
fn same_bytes(a: &Path, b: &Path) -> anyhow::Result<bool> {
    let open = |p: &Path| {
        std::fs::File::open(p)
            .map(|f| std::io::BufReader::with_capacity(1 << 20, f))
            .with_context(|| format!("cannot open {}", p.display()))
    };
    let (mut a, mut b) = (open(a)?, open(b)?);
    let (mut x, mut y) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = read_full(&mut a, &mut x)?;
        let m = read_full(&mut b, &mut y)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Fills `buf` from `r` as far as it goes; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..])? {
            0 => break,
            n => at += n,
        }
    }
    Ok(at)
}

/// Runs `cmd` to its end; its exit status and wall time in seconds (the child-process timing
/// of every `deid bench` command).
pub(super) fn timed(
    cmd: &mut std::process::Command,
) -> anyhow::Result<(std::process::ExitStatus, f64)> {
    let started = std::time::Instant::now();
    let status = cmd.status()?;
    Ok((status, started.elapsed().as_secs_f64()))
}
