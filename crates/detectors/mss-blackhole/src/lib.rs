//! `mss-blackhole` detector. (Skeleton: to be implemented.)

use pcapsleuth_detect::{Detector, DetectorInfo, FinishContext, Finding};

/// Detector id.
pub const ID: &str = "mss-blackhole";

/// The `mss-blackhole` detector.
#[derive(Debug, Default)]
pub struct MssBlackhole {}

impl Detector for MssBlackhole {
    fn info(&self) -> DetectorInfo {
        DetectorInfo { id: ID, title: "mss-blackhole", explain: "" }
    }
    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        Vec::new()
    }
}
