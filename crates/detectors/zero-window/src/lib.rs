//! `zero-window` detector. (Skeleton: to be implemented.)

use pcapsleuth_detect::{Detector, DetectorInfo, FinishContext, Finding};

/// Detector id.
pub const ID: &str = "zero-window";

/// The `zero-window` detector.
#[derive(Debug, Default)]
pub struct ZeroWindow {}

impl Detector for ZeroWindow {
    fn info(&self) -> DetectorInfo {
        DetectorInfo { id: ID, title: "zero-window", explain: "" }
    }
    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        Vec::new()
    }
}
