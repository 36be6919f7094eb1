//! `deid bench-api`: benchmarks of the service on loopback, against a `deid serve` child process
//! with a fresh SQLite database (or `--database-url`).
//!
//! 1. **Memory**: streams a generated CSV of `--upload-mb` MB to `POST /v1/datasets` and reports
//!    the server's peak resident memory (`VmHWM`) against the file size.
//! 2. **Throughput**: starts two long jobs, then `--concurrency` clients call
//!    `GET /v1/jobs/{id}` for `--seconds`; reports requests per second and latency percentiles,
//!    and checks that both jobs were running the whole time.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

/// Flags of `deid bench-api`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Seconds of the throughput measurement.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Concurrent client connections.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Size of the generated upload in MB (0 skips the memory benchmark).
    #[arg(long, default_value_t = 100)]
    pub upload_mb: u64,
    /// Database of the server (default: a fresh SQLite file in a temporary directory).
    #[arg(long)]
    pub database_url: Option<String>,
    /// Engine threads of the server.
    #[arg(long, default_value_t = 2)]
    pub engine_threads: usize,
    /// Scale benchmark instead: a dataset folder written by `deid bench generate`
    /// (`<dir>/synth-<rows>`): upload it, store its hierarchies, run one `auto` job on it and
    /// poll the job's status throughout; reports upload time, server peak memory and status
    /// latency.
    #[arg(long)]
    pub scale_dataset: Option<PathBuf>,
    /// Time limit of the scale benchmark's job.
    #[arg(long, default_value = "60s")]
    pub scale_time_limit: String,
    /// With `--scale-dataset`: upload the dataset as a frequency table (count column `n`)
    /// grouped at these levels of its hierarchies, declared as each quasi-identifier's
    /// `data_level`: `0` (every quasi-identifier at level 0: the distinct records), or
    /// `column=level,…` (the others at level 0), e.g. `zip=2,age=1,income=1`. The table is
    /// made by this command before the server starts (as the engine that holds the data would
    /// make it) and kept as `<dir>/<name>-frequency-<levels>.csv`. With a floor the job's
    /// suppression marker is `[suppressed]` (a floor at a hierarchy's top makes `*` a value).
    #[arg(long, value_name = "LEVELS")]
    pub scale_frequency: Option<String>,
    /// Rows of each load job's hierarchy (at least 20: the data use the values 0–19, the rest
    /// only make the stored specification large). 20,000 gives a ≈ 4 MB specification, like a
    /// creditcard_int job with its hierarchies inline.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(20..=1_000_000))]
    pub hierarchy_rows: u32,
    /// The `deid` binary to start as the server (default: this one), to compare builds with
    /// the same client.
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
}

/// A `deid serve` child process.
struct Server {
    child: Child,
    base: String,
    dir: PathBuf,
}

impl Server {
    fn start(args: &BenchArgs) -> anyhow::Result<Server> {
        let dir = std::env::temp_dir().join(format!("deid-bench-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir)?;
        let log = dir.join("server.log");
        let bin = match &args.server_bin {
            Some(b) => b.clone(),
            None => std::env::current_exe()?,
        };
        let mut cmd = Command::new(bin);
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--workers", "2"])
            .arg("--engine-threads")
            .arg(args.engine_threads.to_string())
            .arg("--data-dir")
            .arg(&dir)
            .args(["--max-upload-bytes", &(4u64 << 30).to_string()])
            .env("RUST_LOG", "warn,deid::app=info")
            .env("NO_COLOR", "1")
            .env_remove("DEID_API_KEYS")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?);
        match &args.database_url {
            Some(url) => cmd.arg("--database-url").arg(url),
            None => cmd.env_remove("DATABASE_URL"),
        };
        let child = cmd.spawn().context("cannot start deid serve")?;
        let start = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(i) = text.find("deid listening on http://") {
                let rest = &text[i + "deid listening on ".len()..];
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                return Ok(Server {
                    child,
                    base: rest[..end].to_string(),
                    dir,
                });
            }
            if start.elapsed() > Duration::from_secs(30) {
                bail!("the server did not start:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// (current, peak) resident memory in bytes.
    fn memory(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |kb| kb * 1024)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs the benchmarks and prints a report.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        if let Some(dir) = &args.scale_dataset {
            return scale_benchmark(&args, dir).await;
        }
        if args.upload_mb > 0 {
            memory_benchmark(&args).await?;
        }
        throughput_benchmark(&args).await
    })
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A generated CSV: 8 columns of moderate cardinality, produced in 1 MiB pieces.
fn generated_csv(total: u64) -> impl futures_util::Stream<Item = std::io::Result<Vec<u8>>> {
    futures_util::stream::unfold((0u64, 0u64, true), move |(sent, row, first)| async move {
        if sent >= total {
            return None;
        }
        let mut buf = Vec::with_capacity(1 << 20);
        if first {
            buf.extend_from_slice(b"id,age,zip,sex,education,occupation,hours,income\n");
        }
        let mut r = row;
        while buf.len() < (1 << 20) && sent + (buf.len() as u64) < total {
            let h = deid_engine::hash::mix(r);
            use std::io::Write;
            let _ = writeln!(
                buf,
                "{r},{},{:05},{},edu-{},occ-{},{},{}",
                18 + h % 70,
                (h >> 8) % 5000,
                if (h >> 20) & 1 == 0 { "m" } else { "f" },
                (h >> 24) % 16,
                (h >> 32) % 40,
                (h >> 40) % 80,
                (h >> 44) % 200_000
            );
            r += 1;
        }
        let len = buf.len() as u64;
        Some((Ok(buf), (sent + len, r, false)))
    })
}

async fn memory_benchmark(args: &BenchArgs) -> anyhow::Result<()> {
    let server = Server::start(args)?;
    let client = reqwest::Client::new();
    let total = args.upload_mb * 1_000_000;
    let (rss_before, _) = server.memory();
    let start = Instant::now();
    let r = client
        .post(format!("{}/v1/datasets?name=generated", server.base))
        .header("content-type", "text/csv")
        .body(reqwest::Body::wrap_stream(generated_csv(total)))
        .send()
        .await?;
    let status = r.status();
    let body: Value = r.json().await?;
    if !status.is_success() {
        bail!("upload failed: {status} {body}");
    }
    let elapsed = start.elapsed();
    let (rss_after, peak) = server.memory();
    println!(
        "## Upload of a {} MB CSV ({} rows)",
        args.upload_mb, body["rows"]
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| upload time | {:.1} s ({:.0} MB/s) |",
        elapsed.as_secs_f64(),
        args.upload_mb as f64 / elapsed.as_secs_f64()
    );
    println!("| server RSS before | {:.0} MiB |", mb(rss_before));
    println!("| server peak RSS (VmHWM) | {:.0} MiB |", mb(peak));
    println!("| server RSS after | {:.0} MiB |", mb(rss_after));
    println!(
        "| peak RSS / file size | {:.2} |",
        peak as f64 / total as f64
    );
    println!();
    Ok(())
}

fn slow_dataset() -> String {
    let mut s = (0..10)
        .map(|i| format!("q{i}"))
        .collect::<Vec<_>>()
        .join(",")
        + "\n";
    let mut x: u64 = 7;
    for _ in 0..3000 {
        let row: Vec<String> = (0..10)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 20).to_string()
            })
            .collect();
        s.push_str(&row.join(","));
        s.push('\n');
    }
    s
}

/// The hierarchy of the load jobs' columns (values 0–19): value, band of 5, band of 10, `*`.
pub fn slow_hierarchy() -> String {
    hierarchy_of(20)
}

/// [`slow_hierarchy`] with `rows` values (0 to rows − 1; the data use 0–19).
fn hierarchy_of(rows: u32) -> String {
    (0..rows)
        .map(|v| {
            format!(
                "{v};{}-{};{}-{};*\n",
                v / 5 * 5,
                v / 5 * 5 + 4,
                v / 10 * 10,
                v / 10 * 10 + 9
            )
        })
        .collect()
}

fn slow_job(dataset: &str, seconds: u64, hierarchy_rows: u32) -> Value {
    let hierarchy = hierarchy_of(hierarchy_rows);
    let attributes: serde_json::Map<String, Value> = (0..10)
        .map(|i| {
            (
                format!("q{i}"),
                json!({"type": "quasi_identifying", "hierarchy": {"csv": hierarchy}}),
            )
        })
        .collect();
    json!({
        "dataset_id": dataset,
        "attributes": attributes,
        "privacy": ["k-anonymity(k=3)"],
        "suppression_limit": 1.0,
        "time_limit": format!("{seconds}s"),
        "algorithm": "exhaustive",
        "threads": 1,
    })
}

async fn throughput_benchmark(args: &BenchArgs) -> anyhow::Result<()> {
    let server = Server::start(args)?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()?;
    let base = server.base.clone();
    let ds: Value = client
        .post(format!("{base}/v1/datasets"))
        .body(slow_dataset())
        .send()
        .await?
        .json()
        .await?;
    let dataset = ds["id"].as_str().context("upload failed")?.to_string();
    let mut jobs = Vec::new();
    let spec_bytes = slow_job(&dataset, 0, args.hierarchy_rows).to_string().len();
    for _ in 0..2 {
        let j: Value = client
            .post(format!("{base}/v1/jobs"))
            .body(slow_job(&dataset, args.seconds + 60, args.hierarchy_rows).to_string())
            .send()
            .await?
            .json()
            .await?;
        jobs.push(j["id"].as_str().context("job creation failed")?.to_string());
    }
    let start = Instant::now();
    while running_jobs(&client, &base, &jobs).await? < 2 {
        if start.elapsed() > Duration::from_secs(30) {
            bail!("the two jobs did not start");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (all, errors, elapsed) = poll_jobs(args, &client, &base, &jobs).await?;
    let still_running = running_jobs(&client, &base, &jobs).await?;
    for id in &jobs {
        let _ = client
            .post(format!("{base}/v1/jobs/{id}/cancel"))
            .send()
            .await;
    }
    println!(
        "## GET /v1/jobs/{{id}} while two jobs run ({} clients, {} s, {} CPUs, specification {} bytes)",
        args.concurrency,
        args.seconds,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        spec_bytes
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!("| requests | {} ({} errors) |", all.len(), errors);
    println!(
        "| throughput | {:.0} requests/s |",
        all.len() as f64 / elapsed
    );
    println!("| latency p50 | {:.2} ms |", percentile_ms(&all, 0.50));
    println!("| latency p90 | {:.2} ms |", percentile_ms(&all, 0.90));
    println!("| latency p99 | {:.2} ms |", percentile_ms(&all, 0.99));
    println!("| latency max | {:.2} ms |", percentile_ms(&all, 1.0));
    println!("| jobs still running at the end | {still_running} of 2 |");
    println!();
    Ok(())
}

/// How many of `jobs` are running.
async fn running_jobs(
    client: &reqwest::Client,
    base: &str,
    jobs: &[String],
) -> anyhow::Result<usize> {
    let mut n = 0;
    for id in jobs {
        let j: Value = client
            .get(format!("{base}/v1/jobs/{id}"))
            .send()
            .await?
            .json()
            .await?;
        n += usize::from(j["status"] == "running");
    }
    Ok(n)
}

/// `--concurrency` clients calling `GET /v1/jobs/{id}` on `jobs` (alternately) for `--seconds`:
/// the latencies of the successful requests in µs (sorted), the number of failed ones, and the
/// seconds measured.
async fn poll_jobs(
    args: &BenchArgs,
    client: &reqwest::Client,
    base: &str,
    jobs: &[String],
) -> anyhow::Result<(Vec<u64>, u64, f64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..args.concurrency {
        let (client, base, id) = (client.clone(), base.to_string(), jobs[c % 2].clone());
        let (stop, errors) = (stop.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                match client.get(format!("{base}/v1/jobs/{id}")).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        latencies.push(t.elapsed().as_micros() as u64);
                    }
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            latencies
        }));
    }
    let measured = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await?);
    }
    let elapsed = measured.elapsed().as_secs_f64();
    all.sort_unstable();
    Ok((all, errors.load(Ordering::Relaxed), elapsed))
}

/// The `p`-quantile (0–1, nearest rank below) of latencies sorted ascending in µs, in ms;
/// 0 if there are none.
fn percentile_ms(sorted: &[u64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p) as usize)
        .copied()
        .unwrap_or(0) as f64
        / 1000.0
}

/// A file as a stream of 1 MiB pieces (blocking reads: a benchmark client only).
fn file_stream(
    path: PathBuf,
) -> anyhow::Result<impl futures_util::Stream<Item = std::io::Result<Vec<u8>>>> {
    let file =
        std::fs::File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(futures_util::stream::unfold(
        Some(file),
        |file| async move {
            use std::io::Read;
            let mut file = file?;
            let mut buf = vec![0u8; 1 << 20];
            match file.read(&mut buf) {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(buf), Some(file)))
                }
                Err(e) => Some((Err(e), None)),
            }
        },
    ))
}

/// A level per quasi-identifier of the generated data (`--scale-frequency`).
type FloorLevels = Vec<(String, usize)>;

/// The CSV the scale benchmark uploads: the generated dataset, or (with `--scale-frequency`)
/// its frequency table at the given levels, made here.
fn scale_input(
    args: &BenchArgs,
    dir: &std::path::Path,
    name: &str,
) -> anyhow::Result<(std::path::PathBuf, Option<FloorLevels>)> {
    let Some(levels) = &args.scale_frequency else {
        return Ok((dir.join(format!("{name}.csv")), None));
    };
    let levels = parse_levels(levels)?;
    let started = Instant::now();
    let (table, rows) = frequency_table(dir, name, &levels)?;
    println!(
        "frequency table {}: {rows} rows at levels {}, made in {:.1} s",
        table.display(),
        levels_tag(&levels),
        started.elapsed().as_secs_f64()
    );
    Ok((table, Some(levels)))
}

/// The phases of a finished job from its report's `timings` (load, search, output) and what
/// the job's `seconds` spent beyond them (queueing, storing the result).
async fn job_phases(
    client: &reqwest::Client,
    base: &str,
    job_id: &str,
    seconds: f64,
) -> anyhow::Result<String> {
    let url = format!("{base}/v1/jobs/{job_id}/result");
    let response = client.get(&url).send().await?;
    anyhow::ensure!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    let report: Value = response.json().await?;
    let t = &report["timings"];
    let [load, search, output] =
        ["load_ms", "search_ms", "output_ms"].map(|f| t[f].as_f64().unwrap_or(0.0) / 1000.0);
    Ok(format!(
        "load {load:.1} s, search {search:.1} s, output {output:.1} s, the rest {:.1} s",
        seconds - load - search - output
    ))
}

/// GETs `url` (it must succeed); the body's length in bytes and the seconds it took.
async fn fetch(client: &reqwest::Client, url: &str) -> anyhow::Result<(usize, f64)> {
    let started = Instant::now();
    let response = client.get(url).send().await?;
    anyhow::ensure!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    let body = response.bytes().await?;
    Ok((body.len(), started.elapsed().as_secs_f64()))
}

/// Runs the scale benchmark on `dir`. Long because it prints the measures of one run — upload,
/// job, status latencies, plan, result, memory — as one table, each row where it is measured.
async fn scale_benchmark(args: &BenchArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .context("--scale-dataset: a folder such as target/scale/synth-1000000")?
        .to_string();
    let (csv, levels) = scale_input(args, dir, &name)?;
    let csv_bytes = std::fs::metadata(&csv)
        .with_context(|| format!("cannot read {}", csv.display()))?
        .len();
    let server = Server::start(args)?;
    let client = reqwest::Client::new();
    let base = server.base.clone();
    let start = Instant::now();
    let count = levels.as_ref().map(|_| FREQUENCY_COUNT);
    let ds = upload_csv(&client, &base, &csv, &name, count).await?;
    let upload = start.elapsed();
    let (_, upload_peak) = server.memory();
    let id = ds["id"].as_str().context("dataset id")?.to_string();
    let floors = levels.unwrap_or_default();
    let attributes = put_scale_hierarchies(&client, &base, dir, &name, &id, &floors).await?;
    let mut spec = json!({
        "dataset_id": id, "attributes": attributes, "privacy": ["k-anonymity(k=5)"],
        "suppression_limit": 0.05, "quality": "loss", "algorithm": "auto",
        "time_limit": args.scale_time_limit,
    });
    if floors.iter().any(|(_, l)| *l > 0) {
        // A floor at a hierarchy's top makes `*` a value of the data.
        spec["suppression_marker"] = json!("[suppressed]");
    }
    let job_id = submit_job(&client, &base, &spec).await?;
    let run = poll_until_done(&client, &base, &job_id).await?;
    let (plan, planned) = fetch(&client, &format!("{base}/v1/jobs/{job_id}/plan")).await?;
    let phases = job_phases(&client, &base, &job_id, run.seconds).await?;
    let (_, peak) = server.memory();
    let (bytes, download) = fetch(&client, &format!("{base}/v1/jobs/{job_id}/result.csv")).await?;
    let latencies = &run.latencies;
    let what = match args.scale_frequency.as_ref().map(|_| &floors) {
        Some(levels) => format!(
            "as a frequency table at levels {} ({} rows, {} records, {:.0} MB)",
            levels_tag(levels),
            ds["rows"],
            ds["records"],
            csv_bytes as f64 / 1e6
        ),
        None => format!("({} rows, {:.0} MB)", ds["rows"], csv_bytes as f64 / 1e6),
    };
    println!("## Scale: {name} {what} through the service");
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| upload | {:.1} s ({:.0} MB/s), server peak {:.0} MiB |",
        upload.as_secs_f64(),
        csv_bytes as f64 / 1e6 / upload.as_secs_f64(),
        mb(upload_peak)
    );
    println!(
        "| job ({}) | {} after {:.1} s, Loss {}, first solution after {} s |",
        args.scale_time_limit,
        run.job["status"],
        run.seconds,
        run.job["best"]["score"],
        run.first_solution.map_or("-".into(), |f| format!("{f:.1}"))
    );
    println!(
        "| GET /v1/jobs/{{id}} during the job | {} requests, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms |",
        latencies.len(),
        percentile_ms(latencies, 0.5),
        percentile_ms(latencies, 0.99),
        percentile_ms(latencies, 1.0)
    );
    println!("| job phases (report `timings`) | {phases} |");
    println!("| plan | {:.1} MB in {planned:.2} s |", plan as f64 / 1e6);
    println!(
        "| upload + job + plan | {:.1} s |",
        upload.as_secs_f64() + run.seconds + planned
    );
    println!(
        "| result.csv | {:.0} MB in {download:.1} s |",
        bytes as f64 / 1e6
    );
    println!(
        "| server peak memory (VmHWM) | {:.0} MiB ({:.1} × the CSV) |",
        mb(peak),
        peak as f64 / csv_bytes as f64
    );
    println!();
    Ok(())
}

/// The count column of the scale benchmark's frequency tables.
const FREQUENCY_COUNT: &str = "n";

/// Parses `--scale-frequency`: `0`, or `column=level,…` of the generated data's
/// quasi-identifiers; every quasi-identifier with its level, in column order.
fn parse_levels(text: &str) -> anyhow::Result<Vec<(String, usize)>> {
    let mut levels: Vec<(String, usize)> = (super::synth::QUASI_IDENTIFIERS.iter())
        .map(|q| (q.to_string(), 0))
        .collect();
    if text.trim() == "0" {
        return Ok(levels);
    }
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (column, level) = part
            .split_once('=')
            .with_context(|| format!("--scale-frequency: '{part}' is not column=level"))?;
        let slot = (levels.iter_mut())
            .find(|(q, _)| q == column.trim())
            .with_context(|| {
                format!(
                    "--scale-frequency: '{column}' is none of the quasi-identifiers {}",
                    super::synth::QUASI_IDENTIFIERS.join(", ")
                )
            })?;
        slot.1 = level
            .trim()
            .parse()
            .with_context(|| format!("--scale-frequency: level '{level}' of '{column}'"))?;
    }
    Ok(levels)
}

/// The levels in a file name: `0`, or `zip2-age1` (the levels above 0).
fn levels_tag(levels: &[(String, usize)]) -> String {
    let above: Vec<String> = (levels.iter())
        .filter(|(_, l)| *l > 0)
        .map(|(q, l)| format!("{q}{l}"))
        .collect();
    match above.is_empty() {
        true => "0".into(),
        false => above.join("-"),
    }
}

/// The frequency table of the generated dataset `<dir>/<name>.csv` with every quasi-identifier
/// replaced by its label at `levels` (from its hierarchy file) and the sensitive column kept:
/// one row per distinct row, in order of first appearance, with its count in
/// [`FREQUENCY_COUNT`]. Written once to `<dir>/<name>-frequency-<levels>.csv`; its path and
/// rows.
fn frequency_table(
    dir: &std::path::Path,
    name: &str,
    levels: &[(String, usize)],
) -> anyhow::Result<(PathBuf, u64)> {
    use std::io::{BufRead, Write};
    let path = dir.join(format!("{name}-frequency-{}.csv", levels_tag(levels)));
    let count_rows = |p: &std::path::Path| -> anyhow::Result<u64> {
        let file = std::io::BufReader::new(std::fs::File::open(p)?);
        Ok(file.lines().count().saturating_sub(1) as u64)
    };
    if path.exists() {
        return Ok((path.clone(), count_rows(&path)?));
    }
    // Per quasi-identifier (in column order): value → its label at the level.
    let mut maps: Vec<std::collections::HashMap<String, String>> = Vec::new();
    for (q, level) in levels {
        let file = dir.join(format!("{name}_hierarchy_{q}.csv"));
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let mut map = std::collections::HashMap::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let cells: Vec<&str> = line.split(';').collect();
            let label = cells.get(*level).with_context(|| {
                format!("{}: level {level} is above the hierarchy's", file.display())
            })?;
            map.insert(cells[0].to_string(), label.to_string());
        }
        maps.push(map);
    }
    let source = dir.join(format!("{name}.csv"));
    let input = std::io::BufReader::with_capacity(
        1 << 20,
        std::fs::File::open(&source)
            .with_context(|| format!("cannot open {}", source.display()))?,
    );
    let mut lines = input.lines();
    let header = lines.next().context("the generated CSV is empty")??;
    // Distinct row → (its rank of first appearance, its count).
    let mut counts: std::collections::HashMap<String, (u32, u32)> = Default::default();
    let mut key = String::new();
    for line in lines {
        let line = line?;
        key.clear();
        for (i, cell) in line.split(';').enumerate() {
            if i > 0 {
                key.push(';');
            }
            match maps.get(i) {
                Some(map) => key.push_str(map.get(cell).map_or(cell, String::as_str)),
                None => key.push_str(cell),
            }
        }
        match counts.get_mut(key.as_str()) {
            Some((_, n)) => *n += 1,
            None => {
                let rank = counts.len() as u32;
                counts.insert(key.clone(), (rank, 1));
            }
        }
    }
    let mut rows: Vec<(String, (u32, u32))> = counts.into_iter().collect();
    rows.sort_unstable_by_key(|(_, (rank, _))| *rank);
    let tmp = path.with_extension("csv.partial");
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
    writeln!(out, "{header};{FREQUENCY_COUNT}")?;
    for (key, (_, n)) in &rows {
        writeln!(out, "{key};{n}")?;
    }
    out.flush()?;
    drop(out);
    std::fs::rename(&tmp, &path)?;
    Ok((path, rows.len() as u64))
}

/// Streams the CSV file `csv` to `POST /v1/datasets` (`;`-separated, named `name`; a frequency
/// table with the count column `count`); returns the dataset.
async fn upload_csv(
    client: &reqwest::Client,
    base: &str,
    csv: &std::path::Path,
    name: &str,
    count: Option<&str>,
) -> anyhow::Result<Value> {
    let count = count.map_or(String::new(), |c| format!("&count_column={c}"));
    let r = client
        .post(format!("{base}/v1/datasets?delimiter=;&name={name}{count}"))
        .header("content-type", "text/csv")
        .body(reqwest::Body::wrap_stream(file_stream(csv.to_path_buf())?))
        .send()
        .await?;
    let status = r.status();
    let ds: Value = r.json().await?;
    if !status.is_success() {
        bail!("upload failed: {status} {ds}");
    }
    Ok(ds)
}

/// Creates a job from `spec`; returns its id.
async fn submit_job(client: &reqwest::Client, base: &str, spec: &Value) -> anyhow::Result<String> {
    let r = client
        .post(format!("{base}/v1/jobs"))
        .body(spec.to_string())
        .send()
        .await?;
    let job: Value = r.json().await?;
    Ok(job["id"]
        .as_str()
        .with_context(|| format!("job: {job}"))?
        .to_string())
}

/// Stores the generated hierarchy of each quasi-identifier of dataset `id` (from the files
/// `<dir>/<name>_hierarchy_<column>.csv`); returns the job's `attributes`. A quasi-identifier
/// given at a floor (`floors`: column and level) gets its hierarchy inline with its
/// `data_level` instead (a stored hierarchy must cover the data's values, which are labels of
/// the floor).
async fn put_scale_hierarchies(
    client: &reqwest::Client,
    base: &str,
    dir: &std::path::Path,
    name: &str,
    id: &str,
    floors: &[(String, usize)],
) -> anyhow::Result<serde_json::Map<String, Value>> {
    let mut attributes = serde_json::Map::new();
    for q in super::synth::QUASI_IDENTIFIERS {
        let h = std::fs::read(dir.join(format!("{name}_hierarchy_{q}.csv")))?;
        if let Some((_, level)) = floors.iter().find(|(c, l)| c == q && *l > 0) {
            let csv = String::from_utf8(h)?;
            let attribute = json!({"type": "quasi_identifying", "hierarchy": {"csv": csv}, "data_level": level});
            attributes.insert(q.to_string(), attribute);
            continue;
        }
        let r = client
            .put(format!("{base}/v1/datasets/{id}/hierarchies/{q}"))
            .body(h)
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("hierarchy {q}: {} {}", r.status(), r.text().await?);
        }
        attributes.insert(q.to_string(), json!({"type": "quasi_identifying"}));
    }
    attributes.insert(
        super::synth::SENSITIVE.to_string(),
        json!({"type": "sensitive"}),
    );
    Ok(attributes)
}

/// A job polled until it ended.
struct PolledJob {
    /// The job's last status body.
    job: Value,
    /// Seconds from the first poll to the end.
    seconds: f64,
    /// Seconds until the status first showed a solution.
    first_solution: Option<f64>,
    /// Latencies of the status requests in µs, sorted.
    latencies: Vec<u64>,
}

/// Calls `GET /v1/jobs/{job_id}` every 20 ms until the job is neither queued nor running.
async fn poll_until_done(
    client: &reqwest::Client,
    base: &str,
    job_id: &str,
) -> anyhow::Result<PolledJob> {
    let submitted = Instant::now();
    let mut latencies = Vec::new();
    let mut first_solution: Option<f64> = None;
    let job = loop {
        let t = Instant::now();
        let j: Value = client
            .get(format!("{base}/v1/jobs/{job_id}"))
            .send()
            .await?
            .json()
            .await?;
        latencies.push(t.elapsed().as_micros() as u64);
        if first_solution.is_none() && !j["best"].is_null() {
            first_solution = Some(submitted.elapsed().as_secs_f64());
        }
        if !matches!(j["status"].as_str(), Some("queued" | "running")) {
            break j;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let seconds = submitted.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Ok(PolledJob {
        job,
        seconds,
        first_solution,
        latencies,
    })
}
