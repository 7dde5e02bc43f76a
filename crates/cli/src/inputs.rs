//! Expanding command-line inputs into capture paths.

use std::path::{Path, PathBuf};

/// Whether a file name looks like a capture: `*.pcap`, `*.pcapng`, `*.cap`,
/// each optionally followed by `.gz` (case-insensitive).
pub fn is_capture_name(p: &Path) -> bool {
    let name = p
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    name.ends_with(".pcap") || name.ends_with(".pcapng") || name.ends_with(".cap")
}

/// Every capture file below `dir` (recursive), sorted by path. Symbolic links
/// to files are followed; symbolic links to directories are not (no loops).
fn captures_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if is_capture_name(&p) && (ft.is_file() || p.is_file()) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Expand inputs in order: a directory becomes its capture files (sorted), `-`
/// stays `-` (stdin), anything else is kept as given (a missing or unreadable
/// file is reported by the analysis with `error` set). Returns the paths and
/// the directories that held no capture.
pub fn expand(inputs: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut paths = Vec::new();
    let mut empty = Vec::new();
    for i in inputs {
        if i.as_os_str() != "-" && i.is_dir() {
            let found = captures_under(i);
            if found.is_empty() {
                empty.push(i.clone());
            }
            paths.extend(found);
        } else {
            paths.push(i.clone());
        }
    }
    (paths, empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_names() {
        for ok in ["a.pcap", "B.PCAPNG", "x.cap", "y.pcap.gz", "z.pcapng.GZ"] {
            assert!(is_capture_name(Path::new(ok)), "{ok}");
        }
        for no in ["a.txt", "pcap", "a.gz", "a.pcap.json", "a.truth.json"] {
            assert!(!is_capture_name(Path::new(no)), "{no}");
        }
    }

    #[test]
    fn directories_expand_sorted_and_recursive() {
        let dir = std::env::temp_dir().join(format!("pcapsleuth-inputs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for f in ["b.pcap", "a.pcapng.gz", "notes.txt", "sub/c.cap"] {
            std::fs::write(dir.join(f), b"x").unwrap();
        }
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        let (paths, empty) = expand(&[dir.clone(), PathBuf::from("-"), dir.join("empty")]);
        let rel: Vec<String> = paths
            .iter()
            .map(|p| {
                p.strip_prefix(&dir)
                    .map(|r| r.display().to_string())
                    .unwrap_or_else(|_| p.display().to_string())
            })
            .collect();
        assert_eq!(rel, ["a.pcapng.gz", "b.pcap", "sub/c.cap", "-"]);
        assert_eq!(empty, [dir.join("empty")]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
