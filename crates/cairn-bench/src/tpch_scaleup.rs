//! `cairn bench tpch-scaleup`: the scale-up series (SF 1 → 3 → 10) from the raw results of
//! `cairn bench tpch` at each scale factor — per query and system, the measured seconds divided
//! by the scale factor, so a system that scales linearly shows the same figure in every column.

use crate::tpch_bench::{mean_after_first, scale_label};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, clap::Args)]
pub struct TpchScaleupArgs {
    /// Scale factors, each already run by `cairn bench tpch --sf X`.
    #[arg(long, value_delimiter = ',', default_value = "1,3,10")]
    pub sfs: Vec<f64>,
    /// Systems to compare (each must be in every run).
    #[arg(long, value_delimiter = ',', default_value = "cairn,duckdb")]
    pub systems: Vec<String>,
    #[arg(long, default_value = "bench/results")]
    pub results_dir: PathBuf,
}

/// One system at one scale factor: the measured seconds of each query (None: no time).
struct Measured {
    version: String,
    seconds: Vec<Option<f64>>,
}

/// The seeds' measure from a raw run's times of one query.
fn measured(runs: &Value) -> Option<f64> {
    let runs: Vec<Option<f64>> = runs.as_array()?.iter().map(Value::as_f64).collect();
    mean_after_first(&runs)
}

fn read_run(results_dir: &Path, sf: f64, system: &str) -> Result<Measured, String> {
    let path = results_dir
        .join("raw")
        .join(format!("tpch-sf{}.json", scale_label(sf)));
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (run `cairn bench tpch --sf {}` first)",
            path.display(),
            scale_label(sf)
        )
    })?;
    let raw: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let run = raw["systems"]
        .as_array()
        .and_then(|systems| systems.iter().find(|s| s["system"] == system))
        .ok_or_else(|| format!("{} has no run of {system}", path.display()))?;
    Ok(Measured {
        version: run["version"].as_str().unwrap_or_default().to_string(),
        seconds: run["seconds"]
            .as_array()
            .map(|queries| queries.iter().map(measured).collect())
            .unwrap_or_default(),
    })
}

pub fn run(args: &TpchScaleupArgs) -> Result<PathBuf, String> {
    if args.sfs.is_empty() || args.systems.is_empty() {
        return Err("give at least one scale factor and one system".into());
    }
    let mut table: Vec<(String, f64, Measured)> = Vec::new();
    for system in &args.systems {
        for &sf in &args.sfs {
            table.push((system.clone(), sf, read_run(&args.results_dir, sf, system)?));
        }
    }
    let queries = table
        .iter()
        .map(|(_, _, m)| m.seconds.len())
        .max()
        .unwrap_or(0);
    let sfs: Vec<String> = args.sfs.iter().map(|sf| scale_label(*sf)).collect();
    let mut out = format!(
        "# TPC-H scale-up: SF {}\n\n`cairn bench tpch-scaleup --sfs {} --systems {}`, from `bench/results/raw/tpch-sf<X>.json` (each written by `cairn bench tpch --sf X`; machine, versions and command line are in each run's report). Seconds per query divided by the scale factor: equal figures across a row mean linear scaling, smaller ones at larger SF mean better than linear.\n\n| query |",
        sfs.join(" → "),
        sfs.join(","),
        args.systems.join(","),
    );
    for (system, sf, measured) in &table {
        out.push_str(&format!(
            " {system} {} SF {} |",
            measured.version,
            scale_label(*sf)
        ));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(table.len()));
    out.push('\n');
    let cell = |seconds: Option<f64>, sf: f64| {
        seconds.map_or("-".to_string(), |s| format!("{:.3}", s / sf))
    };
    for query in 0..queries {
        out.push_str(&format!("| Q{} |", query + 1));
        for (_, sf, measured) in &table {
            out.push_str(&format!(
                " {} |",
                cell(measured.seconds.get(query).copied().flatten(), *sf)
            ));
        }
        out.push('\n');
    }
    out.push_str("| **total** |");
    for (_, sf, measured) in &table {
        let total: Option<f64> = measured.seconds.iter().copied().sum();
        out.push_str(&format!(" **{}** |", cell(total, *sf)));
    }
    out.push('\n');
    let page = args.results_dir.join("tpch-scaleup.md");
    std::fs::write(&page, out).map_err(|e| format!("{}: {e}", page.display()))?;
    Ok(page)
}
