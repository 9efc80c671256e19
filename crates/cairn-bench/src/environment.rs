//! What a benchmark report states about where it ran (machine, versions, command line), and the
//! Python that runs the peer systems.

use serde::Serialize;
use std::path::PathBuf;
use std::process::Command;

/// `relative` (a path inside the repository) from the working directory when it is the
/// repository's root, else from where this crate was built.
pub fn repo_path(relative: &str) -> PathBuf {
    if std::path::Path::new(relative).exists() {
        return PathBuf::from(relative);
    }
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

/// Runs a chart script of bench/peers (`script RAW.json OUT.png`) with `python`, the peers'
/// Python, which has matplotlib; false if it could not (the report then says there is no chart).
pub fn draw_chart(
    python: &std::path::Path,
    script: &str,
    raw: &std::path::Path,
    out: &std::path::Path,
) -> bool {
    Command::new(python)
        .arg(repo_path(script))
        .arg(raw)
        .arg(out)
        .status()
        .is_ok_and(|status| status.success())
}

/// The Python of the peers' virtualenv (made by bench/peers/python-env.sh), or `CAIRN_PYTHON`.
pub fn peer_python() -> PathBuf {
    std::env::var_os("CAIRN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/cairn-venv/bin/python")
        })
}

#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub os: String,
    pub rustc: String,
    /// The commit this binary was built from (`build.rs`), noting uncommitted changes.
    pub cairn_commit: String,
    pub command_line: String,
    pub started_at: String,
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

impl Environment {
    pub fn capture() -> Environment {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or("unknown")
            .trim()
            .to_string();
        let memory_kib: f64 = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("MemTotal"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        Environment {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_gib: (memory_kib / (1024.0 * 1024.0) * 10.0).round() / 10.0,
            os: command_output("uname", &["-sr"]),
            rustc: command_output("rustc", &["--version"]),
            cairn_commit: env!("CAIRN_BUILD_COMMIT").to_string(),
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
            started_at: command_output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        }
    }

    pub fn markdown(&self) -> String {
        format!(
            "- Machine: {} ({} cores), {} GiB memory, {}\n- Toolchain: {}\n- Cairn built from commit: {}\n- Run at: {}\n- Command: `{}`\n",
            self.cpu,
            self.cores,
            self.memory_gib,
            self.os,
            self.rustc,
            self.cairn_commit,
            self.started_at,
            self.command_line
        )
    }
}
