//! `frag-needed` detector. (Skeleton: to be implemented.)

use pcapsleuth_detect::{Detector, DetectorInfo, FinishContext, Finding};

/// Detector id.
pub const ID: &str = "frag-needed";

/// The `frag-needed` detector.
#[derive(Debug, Default)]
pub struct FragNeeded {}

impl Detector for FragNeeded {
    fn info(&self) -> DetectorInfo {
        DetectorInfo { id: ID, title: "frag-needed", explain: "" }
    }
    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        Vec::new()
    }
}
