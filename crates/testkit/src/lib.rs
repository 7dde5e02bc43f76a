//! Test helpers shared by the integration tests (dev-dependency only).
//!
//! - [`shared_dir`]: `../shared` beside the repository (public captures, lab captures).
//! - [`tshark`]: the tshark binary if installed; tests that need it print `SKIP`
//!   and return when it is absent, and `.ci/run` installs it so in CI they run.
//! - [`capture`]: the pcap / pcapng writer for hand-built capture files, and
//!   [`packet`]: the Ethernet / IP / TCP / UDP / ICMP byte builders for the
//!   frames in them.

pub mod capture;
pub mod packet;

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

/// Every capture file below `dir`, sorted: the same rule as the CLI's
/// directory inputs ([`pcapsleuth_ingest::capture_files_under`]).
pub fn captures_under(dir: &Path) -> Vec<PathBuf> {
    pcapsleuth_ingest::capture_files_under(dir)
}

/// Whether a file name looks like a capture ([`pcapsleuth_ingest::is_capture_file_name`]).
pub fn is_capture_name(p: &Path) -> bool {
    pcapsleuth_ingest::is_capture_file_name(p)
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

/// `../shared` (see [`shared_dir`]) when it and [`tshark`] are both present, for the
/// tshark-oracle comparison tests. When either is missing it prints
/// `SKIP: <reason>` and returns `None`, except under CI ([`in_ci`]) where it panics
/// so the comparison cannot be skipped silently.
pub fn shared_with_tshark() -> Option<PathBuf> {
    let Some(shared) = shared_dir() else {
        assert!(!in_ci(), "../shared is required in CI");
        println!("SKIP: ../shared not found");
        return None;
    };
    if tshark().is_none() {
        assert!(!in_ci(), "tshark is required in CI");
        println!("SKIP: tshark not installed");
        return None;
    }
    Some(shared)
}

/// Every capture below `shared/captures` and `shared/lab` (each part sorted, see
/// [`captures_under`]). Panics unless there are more than `min` of them, so a
/// missing or truncated corpus cannot pass as "all agreed".
pub fn corpus_captures(shared: &Path, min: usize) -> Vec<PathBuf> {
    let mut files = captures_under(&shared.join("captures"));
    files.extend(captures_under(&shared.join("lab")));
    assert!(
        files.len() > min,
        "corpus has only {} captures",
        files.len()
    );
    files
}

/// `f` applied to every item on `available_parallelism` worker threads clamped to
/// `2..=max_threads`, each pulling the next unclaimed item; results in item order.
/// A panic in `f` propagates when the scope joins.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    max_threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(items.len()));
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, max_threads.max(2));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// tshark's `-T fields` output (tab-separated, one line per frame) for
/// `shared/rel` with one `-e` per entry of `fields`, on the first `limit` frames
/// when set.
///
/// Developer speed-up: with `PCAPSLEUTH_TSHARK_CACHE=DIR` and no `limit`, the
/// output is read from, or else written to, `DIR/<rel with '/' → '_'><suffix>`.
///
/// # Errors
/// When tshark cannot be started (message names tshark and the OS error).
pub fn tshark_fields(
    shared: &Path,
    rel: &str,
    limit: Option<u64>,
    fields: &[&str],
    cache_suffix: &str,
) -> Result<String, String> {
    let cache = match std::env::var("PCAPSLEUTH_TSHARK_CACHE") {
        Ok(dir) if limit.is_none() => {
            Some(Path::new(&dir).join(format!("{}{cache_suffix}", rel.replace('/', "_"))))
        }
        _ => None,
    };
    if let Some(t) = cache.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
        return Ok(t);
    }
    let mut cmd = Command::new("tshark");
    cmd.arg("-n").arg("-r").arg(shared.join(rel));
    if let Some(n) = limit {
        cmd.arg("-c").arg(n.to_string());
    }
    cmd.args(["-T", "fields", "-E", "separator=/t"]);
    for f in fields {
        cmd.arg("-e").arg(f);
    }
    let out = cmd.output().map_err(|e| format!("tshark: {e}"))?;
    let t = String::from_utf8_lossy(&out.stdout).into_owned();
    if let Some(p) = &cache {
        let _ = std::fs::write(p, &t);
    }
    Ok(t)
}

/// A scratch directory for one test, removed with everything in it when the
/// value is dropped (also when the test fails and unwinds): tempfile's
/// `TempDir`, named `pcapsleuth-{prefix}-XXXXXX` in the system temp dir.
/// Dereferences to its [`Path`], so `dir.join("out.json")` works.
#[derive(Debug)]
pub struct Scratch(tempfile::TempDir);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// A new [`Scratch`] directory named after `prefix` (say `"cli-check0"`).
///
/// # Panics
/// When the temp dir cannot be created (a test cannot go on without it).
pub fn scratch(prefix: &str) -> Scratch {
    let dir = tempfile::Builder::new()
        .prefix(&format!("pcapsleuth-{prefix}-"))
        .tempdir()
        .expect("create a scratch directory");
    Scratch(dir)
}
