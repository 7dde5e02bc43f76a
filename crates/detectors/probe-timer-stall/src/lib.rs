//! `probe-timer-stall` detector. (Skeleton: to be implemented.)

use pcapsleuth_detect::{Detector, DetectorInfo, FinishContext, Finding};

/// Detector id.
pub const ID: &str = "probe-timer-stall";

/// The `probe-timer-stall` detector.
#[derive(Debug, Default)]
pub struct ProbeTimerStall {}

impl Detector for ProbeTimerStall {
    fn info(&self) -> DetectorInfo {
        DetectorInfo { id: ID, title: "probe-timer-stall", explain: "" }
    }
    fn finish(&mut self, _ctx: &FinishContext) -> Vec<Finding> {
        Vec::new()
    }
}
