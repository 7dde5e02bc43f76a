//! Finding capture files on disk: the one rule for which file names are
//! captures, shared by the CLI's directory inputs and the corpus tests.

use std::path::{Path, PathBuf};

/// Whether a file name looks like a capture: `*.pcap`, `*.pcapng`, `*.cap`,
/// each optionally followed by `.gz` (case-insensitive).
pub fn is_capture_file_name(p: &Path) -> bool {
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
pub fn capture_files_under(dir: &Path) -> Vec<PathBuf> {
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
            } else if is_capture_file_name(&p) && (ft.is_file() || p.is_file()) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_names() {
        for ok in ["a.pcap", "B.PCAPNG", "x.cap", "y.pcap.gz", "z.pcapng.GZ"] {
            assert!(is_capture_file_name(Path::new(ok)), "{ok}");
        }
        for no in ["a.txt", "pcap", "a.gz", "a.pcap.json", "a.truth.json"] {
            assert!(!is_capture_file_name(Path::new(no)), "{no}");
        }
    }
}
