//! Drive ingest → decode → flow → ledger over a capture file, through the
//! one pipeline driver (`pcapsleuth_analyze::observe_path`, no detectors).

#![allow(dead_code)]

use pcapsleuth_analyze::{observe_path, PacketObserver};
use pcapsleuth_detect::PacketContext;
use pcapsleuth_flow::FlowEvent;
use pcapsleuth_ledger::{LedgerReport, StallLedger};
use std::path::{Path, PathBuf};

/// Feeds every flow event to a ledger.
#[derive(Default)]
pub struct Feed(pub StallLedger);

impl PacketObserver for Feed {
    fn packet(&mut self, _pkt: &PacketContext<'_>, events: &[FlowEvent]) {
        for e in events {
            self.0.on_event(e);
        }
    }
    fn finish(&mut self, events: &[FlowEvent]) {
        for e in events {
            self.0.on_event(e);
        }
    }
}

/// The ledger of `path` (`None` when it cannot be opened).
pub fn ledger_of(path: &Path) -> Option<LedgerReport> {
    let mut feed = Feed::default();
    observe_path(path, Vec::new(), &mut feed).ok()?;
    Some(feed.0.finish())
}

/// Every capture of `fixtures/captures`, `../shared/lab` and `../shared/lab-incoming`.
pub fn lab_and_fixtures() -> Vec<PathBuf> {
    let mut v = pcapsleuth_testkit::captures_under(&pcapsleuth_testkit::fixtures_dir());
    if let Some(shared) = pcapsleuth_testkit::shared_dir() {
        v.extend(pcapsleuth_testkit::captures_under(&shared.join("lab")));
        v.extend(pcapsleuth_testkit::captures_under(
            &shared.join("lab-incoming"),
        ));
    } else {
        assert!(!pcapsleuth_testkit::in_ci(), "../shared is required in CI");
        println!("SKIP: ../shared not found");
    }
    v
}
