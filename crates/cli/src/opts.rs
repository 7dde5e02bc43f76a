//! Options shared by several subcommands: detector and severity filters,
//! `--shard`, and the global `--color` / `--quiet`.

use crate::Threshold;
use clap::{Args, ValueEnum};
use pcapsleuth_report::CaptureReport;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::OnceLock;

/// `--color`.
#[derive(Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorWhen {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty.
    #[default]
    Auto,
    /// Always colour (also into a pipe or file).
    Always,
    /// Never colour.
    Never,
}

/// The global options, set once in `main`.
#[derive(Clone, Copy, Default)]
pub struct Ui {
    /// `--color`.
    pub color: ColorWhen,
    /// `-q`: no progress bar, no notes on stderr (errors are still printed);
    /// `check` prints only the captures that fail.
    pub quiet: bool,
}

static UI: OnceLock<Ui> = OnceLock::new();

/// Record the global options (first call wins).
pub fn set_ui(ui: Ui) {
    let _ = UI.set(ui);
}

/// The global options.
pub fn ui() -> Ui {
    UI.get().copied().unwrap_or_default()
}

/// Whether text output to stdout is coloured (`--color`; `auto`: stdout is a
/// terminal and `NO_COLOR` is unset or empty, <https://no-color.org>).
pub fn use_color() -> bool {
    match ui().color {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            std::io::stdout().is_terminal()
                && !matches!(std::env::var_os("NO_COLOR"), Some(v) if !v.is_empty())
        }
    }
}

/// Whether text written to `output` (`None`: stdout) is coloured: `always`
/// and `never` as said; `auto` only on a terminal stdout ([`use_color`]).
pub fn color_for(output: Option<&std::path::Path>) -> bool {
    match ui().color {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => output.is_none() && use_color(),
    }
}

/// `--only`, `--exclude`, `--min-severity`: which findings are reported
/// (and, for `check`, judged). JSON keeps the same shape; only the findings
/// left out are missing.
#[derive(Args, Clone, Default)]
pub struct Filters {
    /// Report only findings of these detectors (id or alias, e.g.
    /// `pmtu-blackhole`; repeat or separate with commas).
    #[arg(long, value_name = "DETECTOR", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Leave out findings of these detectors (id or alias).
    #[arg(long, value_name = "DETECTOR", value_delimiter = ',')]
    pub exclude: Vec<String>,
    /// Leave out findings below this severity.
    #[arg(long, value_enum, value_name = "SEVERITY")]
    pub min_severity: Option<Threshold>,
}

/// [`Filters`] with detector names resolved to ids.
#[derive(Clone, Default)]
pub struct FindingFilter {
    only: Vec<&'static str>,
    exclude: Vec<&'static str>,
    min: Option<pcapsleuth_core::Severity>,
}

impl Filters {
    /// Resolve names (ids or aliases); an unknown name is a usage error
    /// (message and detector list on stderr, exit status 2).
    pub fn resolve(&self) -> Result<FindingFilter, i32> {
        let ids = |names: &[String]| -> Result<Vec<&'static str>, i32> {
            names
                .iter()
                .map(|n| match pcapsleuth_analyze::find_detector(n.trim()) {
                    Some(info) => Ok(info.id),
                    None => {
                        let known: Vec<&str> = pcapsleuth_analyze::detector_infos()
                            .iter()
                            .map(|i| i.id)
                            .collect();
                        eprintln!(
                            "pcapsleuth: unknown detector '{n}' (known: {}; `pcapsleuth explain` lists them with their aliases)",
                            known.join(", ")
                        );
                        Err(crate::EXIT_INPUT)
                    }
                })
                .collect()
        };
        Ok(FindingFilter {
            only: ids(&self.only)?,
            exclude: ids(&self.exclude)?,
            min: self.min_severity.map(Threshold::severity),
        })
    }
}

impl FindingFilter {
    /// Whether anything is filtered.
    pub fn is_active(&self) -> bool {
        !self.only.is_empty() || !self.exclude.is_empty() || self.min.is_some()
    }

    /// Keep the findings the filter selects.
    pub fn apply(&self, c: &mut CaptureReport) {
        if !self.is_active() {
            return;
        }
        c.findings.retain(|f| {
            (self.only.is_empty() || self.only.contains(&f.detector.as_str()))
                && !self.exclude.contains(&f.detector.as_str())
                && self.min.is_none_or(|m| f.severity >= m)
        });
    }
}

/// `--shard K/N`: this run analyses the inputs whose position (0-based, in
/// the expanded input list: directories expand sorted) is `K-1` modulo `N`.
/// Every input is in exactly one of the N shards, whatever the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 1-based shard index.
    pub index: usize,
    /// Number of shards.
    pub total: usize,
}

/// Parse `K/N` (1 ≤ K ≤ N), or `ci`: GitLab's `CI_NODE_INDEX` (1-based) and
/// `CI_NODE_TOTAL` (`parallel:` jobs); `ci` without them is `1/1`.
pub fn parse_shard(s: &str) -> Result<Shard, String> {
    let (k, n) = if s == "ci" {
        match (
            std::env::var("CI_NODE_INDEX").ok(),
            std::env::var("CI_NODE_TOTAL").ok(),
        ) {
            (Some(k), Some(n)) => (k, n),
            _ => return Ok(Shard { index: 1, total: 1 }),
        }
    } else {
        let Some((k, n)) = s.split_once('/') else {
            return Err(format!("`{s}`: expected K/N (e.g. 2/4) or `ci`"));
        };
        (k.to_string(), n.to_string())
    };
    let num = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|_| format!("`{v}` is not a number"))
    };
    let (index, total) = (num(&k)?, num(&n)?);
    if total == 0 || index == 0 || index > total {
        return Err(format!("shard {index}/{total}: need 1 <= K <= N"));
    }
    Ok(Shard { index, total })
}

impl Shard {
    /// The inputs of this shard, in order.
    pub fn select(self, paths: Vec<PathBuf>) -> Vec<PathBuf> {
        paths
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % self.total == self.index - 1)
            .map(|(_, p)| p)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_inputs() {
        let paths: Vec<PathBuf> = (0..7).map(|i| PathBuf::from(format!("{i}.pcap"))).collect();
        let mut all = Vec::new();
        for k in 1..=3 {
            let s = parse_shard(&format!("{k}/3")).unwrap();
            all.extend(s.select(paths.clone()));
        }
        all.sort();
        assert_eq!(all, paths);
        assert_eq!(
            parse_shard("2/3").unwrap().select(paths.clone()),
            [PathBuf::from("1.pcap"), PathBuf::from("4.pcap")]
        );
        assert!(parse_shard("0/3").is_err());
        assert!(parse_shard("4/3").is_err());
        assert!(parse_shard("x").is_err());
    }
}
