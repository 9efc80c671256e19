//! Records the commit the benchmark binary is built from, so that every report names the code
//! it measured rather than whatever checkout it happens to run in.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    let commit = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(commit) => {
            let changed = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|status| !status.is_empty());
            if changed {
                format!("{commit} with uncommitted changes")
            } else {
                commit
            }
        }
        None => "unknown (built outside a git checkout)".to_string(),
    };
    println!("cargo:rustc-env=CAIRN_BUILD_COMMIT={commit}");
    // Rerun on a new commit, a checkout, or any edit of the sources.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        println!("cargo:rerun-if-changed={git_dir}/index");
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={git_dir}/{branch}");
        }
    }
    println!("cargo:rerun-if-changed=..");
}
