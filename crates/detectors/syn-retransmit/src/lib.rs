//! `syn-retransmit` detector. (Skeleton: to be implemented.)

use pcapsleuth_detect::{Detector, DetectorInfo, FinishContext, Finding};

/// Detector id.
pub const ID: &str = "syn-retransmit";

/// The `syn-retransmit` detector.
#[derive(Debug, Default)]
pub struct SynRetransmit {}

impl Detector for SynRetransmit {
    fn info(&self) -> DetectorInfo {
        DetectorInfo { id: ID, title: "syn-retransmit", explain: "" }
    }
    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        Vec::new()
    }
}
