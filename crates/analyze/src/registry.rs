//! The static list of detectors.

use pcapsleuth_detect::{Detector, DetectorInfo};

/// One fresh instance of every detector, in a fixed order.
pub fn all_detectors() -> Vec<Box<dyn Detector>> {
    vec![
        Box::new(pcapsleuth_syn_retransmit::SynRetransmit::default()),
        Box::new(pcapsleuth_frag_needed::FragNeeded::default()),
        Box::new(pcapsleuth_probe_timer_stall::ProbeTimerStall::default()),
        Box::new(pcapsleuth_delayed_ack_stall::DelayedAckStall::default()),
        Box::new(pcapsleuth_zero_window::ZeroWindow::default()),
        Box::new(pcapsleuth_missing_zero_window::MissingZeroWindow::default()),
        Box::new(pcapsleuth_mss_blackhole::MssBlackhole::default()),
        Box::new(pcapsleuth_cross_interface_loss::CrossInterfaceLoss::default()),
        Box::new(pcapsleuth_dns_timeout::DnsTimeout::default()),
        Box::new(pcapsleuth_window_retraction::WindowRetraction::default()),
        Box::new(pcapsleuth_dual_stack_latency::DualStackLatency::default()),
    ]
}

/// Static descriptions of every detector, in registry order.
pub fn detector_infos() -> Vec<DetectorInfo> {
    all_detectors().iter().map(|d| d.info()).collect()
}

/// The description of the detector named `name`, by its id or one of its
/// aliases (`pmtu-blackhole` finds `mss-blackhole`).
pub fn find_detector(name: &str) -> Option<DetectorInfo> {
    detector_infos()
        .into_iter()
        .find(|i| i.id == name || i.aliases.contains(&name))
}
