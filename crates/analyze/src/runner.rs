//! The ordered parallel runner: many captures analysed on a worker pool,
//! reports handed out **in input order** as soon as each one and all before
//! it are done, so output is byte-identical whatever the thread count.

use crate::{analyze_merged, analyze_path, AnalyzeOptions};
use pcapsleuth_report::CaptureReport;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How to run a set of inputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Analyse all inputs as one merged capture set ([`analyze_merged`]).
    pub merge: bool,
    /// Worker threads; `None` for one per CPU. Output does not depend on it.
    pub threads: Option<usize>,
}

/// Why [`analyze_inputs`] could not run.
#[derive(Debug)]
pub enum RunError {
    /// The worker pool could not be started.
    ThreadPool(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::ThreadPool(e) => write!(f, "cannot start worker threads: {e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// Threads each capture gets ([`AnalyzeOptions::capture_threads`]) when
/// `inputs` captures share `threads`: the spare threads when there are fewer
/// captures than threads (so one file uses every core through the staged
/// pipeline), else 1.
pub fn capture_threads(threads: usize, inputs: usize) -> usize {
    if inputs == 0 || inputs >= threads {
        1
    } else {
        threads / inputs
    }
}

/// Analyse `paths` and hand each report to `emit`, in input order. Without
/// [`RunOptions::merge`] the captures run in parallel on a pool of
/// [`RunOptions::threads`] workers (one per CPU when `None`); when there are
/// fewer captures than threads, each capture runs the staged pipeline on its
/// share of the threads ([`capture_threads`]); `done` is called (on the calling thread)
/// for each report as it finishes, in completion order (for a progress
/// display), and `emit` as soon as it and every report before it are done.
/// With `merge`, the paths are analysed as one set and its single report is
/// passed to `done` and `emit` (nothing happens when `paths` is empty).
///
/// # Errors
/// [`RunError::ThreadPool`] when the worker pool cannot be started (nothing
/// was analysed).
pub fn analyze_inputs(
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    run: RunOptions,
    mut done: impl FnMut(&CaptureReport),
    mut emit: impl FnMut(CaptureReport),
) -> Result<(), RunError> {
    let threads = run.threads.filter(|&n| n > 0).unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let mut opts = opts.clone();
    opts.capture_threads = capture_threads(threads, if run.merge { 1 } else { paths.len() });
    let opts = &opts;
    if run.merge {
        if !paths.is_empty() {
            let report = analyze_merged(paths, opts);
            done(&report);
            emit(report);
        }
        return Ok(());
    }
    use rayon::prelude::*;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.min(paths.len()).max(1))
        .build()
        .map_err(|e| RunError::ThreadPool(e.to_string()))?;
    let (tx, rx) = std::sync::mpsc::channel::<(usize, CaptureReport)>();
    std::thread::scope(|s| {
        s.spawn(move || {
            pool.install(|| {
                paths
                    .par_iter()
                    .enumerate()
                    .for_each_with(tx, |tx, (i, p)| {
                        // The receiver only goes away when the caller's
                        // thread unwinds; nothing to report then.
                        let _ = tx.send((i, analyze_path(p, opts)));
                    });
            });
        });
        let mut pending = BTreeMap::new();
        let mut next = 0usize;
        for (i, report) in rx {
            done(&report);
            pending.insert(i, report);
            while let Some(r) = pending.remove(&next) {
                emit(r);
                next += 1;
            }
        }
    });
    Ok(())
}
