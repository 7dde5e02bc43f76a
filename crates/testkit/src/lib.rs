//! Test helpers shared by the integration tests (dev-dependency only).
//!
//! - [`shared_dir`]: `../shared` beside the repository (public captures, lab captures).
//! - [`tshark`]: the tshark binary if installed; tests that need it print `SKIP`
//!   and return when it is absent, and `.ci/run` installs it so in CI they run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(2)
        .expect("crates/testkit lives two levels below the root")
        .to_path_buf()
}

/// `../shared` beside the repository, or `PCAPSLEUTH_SHARED`, if it exists.
pub fn shared_dir() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("PCAPSLEUTH_SHARED") {
        let p = PathBuf::from(p);
        return p.is_dir().then_some(p);
    }
    let p = repo_root().join("..").join("shared");
    p.is_dir().then_some(p)
}

/// `fixtures/captures` in the repository.
pub fn fixtures_dir() -> PathBuf {
    repo_root().join("fixtures").join("captures")
}

/// Path of `tshark` if it runs.
pub fn tshark() -> Option<PathBuf> {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then(|| PathBuf::from("tshark"))
}

/// True when running under CI (`CI` set): missing oracles then fail instead of skip.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Every capture file (`.pcap`, `.pcapng`, `.cap`, optionally `.gz`) below `dir`, sorted.
pub fn captures_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if is_capture_name(&p) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Whether a file name looks like a capture (`*.pcap`, `*.pcapng`, `*.cap`, each optionally `.gz`).
pub fn is_capture_name(p: &Path) -> bool {
    let name = p
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    name.ends_with(".pcap") || name.ends_with(".pcapng") || name.ends_with(".cap")
}

/// Run tshark with `args` on `file`, returning stdout lines (stderr ignored).
pub fn tshark_lines(file: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new("tshark")
        .arg("-n")
        .arg("-r")
        .arg(file)
        .args(args)
        .output()
        .expect("tshark runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
