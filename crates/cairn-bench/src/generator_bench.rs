//! The BigFUN generator benchmark: generates an instance several times, with and without the
//! normalized tables, and reports MB/s of JSON (BIGFUN issue target: ≥ 50 MB/s on this
//! machine). Writes `bigfun-generator.md` and raw JSON to the results directory.

use crate::bigfun::BigfunRun;
use crate::bigfun::{GenerateOptions, GenerateReport, generate_to_dir};
use crate::environment::Environment;
use crate::stats::median;
use serde::Serialize;

#[derive(Serialize)]
struct ModeResult {
    mode: &'static str,
    seconds: Vec<f64>,
    median_seconds: f64,
    json_mb_per_s: f64,
    all_mb_per_s: f64,
    report: GenerateReport,
}

#[derive(Serialize)]
struct GeneratorBenchReport {
    environment: Environment,
    threads: usize,
    modes: Vec<ModeResult>,
}

const TARGET_JSON_MB_PER_S: f64 = 50.0;

pub fn run(config: &BigfunRun) -> Result<(), Box<dyn std::error::Error>> {
    let environment = Environment::capture();
    let out = config.work_dir.join(format!("bigfun-gen-{}", config.users));
    let mut modes = Vec::new();
    let mut threads = 0;
    for (mode, normalized) in [("JSON + normalized CSV", true), ("JSON only", false)] {
        let mut options = GenerateOptions::new(config.users, config.seed);
        options.normalized = normalized;
        threads = options.threads;
        let mut seconds = Vec::new();
        let mut last = None;
        for _ in 0..config.runs {
            let report = generate_to_dir(&options, &out, &|_| {})?;
            seconds.push(report.seconds);
            last = Some(report);
        }
        let Some(report) = last else {
            return Err("--runs must be at least 1".into());
        };
        let median_seconds = median(&seconds);
        modes.push(ModeResult {
            mode,
            json_mb_per_s: report.json_bytes as f64 / median_seconds / 1e6,
            all_mb_per_s: (report.json_bytes + report.csv_bytes) as f64 / median_seconds / 1e6,
            seconds,
            median_seconds,
            report,
        });
    }
    let _ = std::fs::remove_dir_all(&out);
    let report = GeneratorBenchReport {
        environment,
        threads,
        modes,
    };
    crate::report::write_report(
        &config.results_dir,
        &format!("bigfun-generator-{}.json", config.users),
        &report,
        "bigfun-generator.md",
        |_| markdown(&report, config),
    )?;
    Ok(())
}

fn markdown(report: &GeneratorBenchReport, config: &BigfunRun) -> String {
    let mut text = format!(
        "# BigFUN generator benchmark\n\n{}- Scale: {} Gleambook users, seed {}, {} generator threads, {} runs per mode (median reported); output to `{}`\n- Raw: `bench/results/raw/bigfun-generator-{}.json`\n\n",
        report.environment.markdown(),
        config.users,
        config.seed,
        report.threads,
        config.runs,
        config.work_dir.display(),
        config.users
    );
    if let Some(first) = report.modes.first() {
        let r = &first.report;
        text.push_str(&format!(
            "Records: {} users, {} messages, {} Chirp users with {} chirps.\n\n",
            r.users, r.messages, r.chirp_users, r.chirps
        ));
    }
    text.push_str("| output | JSON MB | CSV MB | median s | min s | max s | JSON MB/s | all MB/s |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for mode in &report.modes {
        let min = mode.seconds.iter().copied().fold(f64::INFINITY, f64::min);
        let max = mode.seconds.iter().copied().fold(0.0, f64::max);
        text.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} |\n",
            mode.mode,
            mode.report.json_bytes as f64 / 1e6,
            mode.report.csv_bytes as f64 / 1e6,
            mode.median_seconds,
            min,
            max,
            mode.json_mb_per_s,
            mode.all_mb_per_s
        ));
    }
    let worst = report
        .modes
        .iter()
        .map(|m| m.json_mb_per_s)
        .fold(f64::INFINITY, f64::min);
    text.push_str(&format!(
        "\nTarget: ≥ {TARGET_JSON_MB_PER_S:.0} MB/s of JSON — **{}** ({worst:.0} MB/s in the slower mode, which also writes the CSV tables).\n",
        if worst >= TARGET_JSON_MB_PER_S { "met" } else { "not met" }
    ));
    text
}
