//! `missing-zero-window` detector. (Skeleton: to be implemented.)

use pcapsleuth_detect::{Detector, DetectorInfo, FinishContext, Finding};

/// Detector id.
pub const ID: &str = "missing-zero-window";

/// The `missing-zero-window` detector.
#[derive(Debug, Default)]
pub struct MissingZeroWindow {}

impl Detector for MissingZeroWindow {
    fn info(&self) -> DetectorInfo {
        DetectorInfo { id: ID, title: "missing-zero-window", explain: "" }
    }
    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        Vec::new()
    }
}
