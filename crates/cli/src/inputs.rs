//! Expanding command-line inputs into capture paths.

use pcapsleuth_ingest::capture_files_under;
use std::path::{Path, PathBuf};

/// Expand inputs in order: a directory becomes its capture files (sorted), `-`
/// stays `-` (stdin), anything else is kept as given (a missing or unreadable
/// file is reported by the analysis with `error` set). Returns the paths and
/// the directories that held no capture.
pub fn expand(inputs: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut paths = Vec::new();
    let mut empty = Vec::new();
    for i in inputs {
        if i.as_os_str() != "-" && i.is_dir() {
            let found = capture_files_under(i);
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

/// Whether `a` and `b` name the same existing file (same device and inode on
/// Unix; same canonical path elsewhere). `-` is never a file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if a.as_os_str() == "-" || b.as_os_str() == "-" {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_expand_sorted_and_recursive() {
        let dir = pcapsleuth_testkit::scratch("inputs");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for f in ["b.pcap", "a.pcapng.gz", "notes.txt", "sub/c.cap"] {
            std::fs::write(dir.join(f), b"x").unwrap();
        }
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        let (paths, empty) = expand(&[dir.to_path_buf(), PathBuf::from("-"), dir.join("empty")]);
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
    }
}
