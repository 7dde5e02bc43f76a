//! What a detector reports. The serde shape of [`Finding`] is part of the JSON
//! report contract (`schema_version` 1): fields may be added, never renamed.

use serde::{Deserialize, Serialize};

/// How bad a finding is. Ordered: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; normal behaviour or context (e.g. ordinary flow control).
    Info,
    /// A pathology that cost time or is likely to.
    Warning,
    /// A pathology that broke or badly stalled a connection.
    Error,
}

impl Severity {
    /// The lowercase name used in JSON and on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// The flow a finding is about, oriented client → server. `client` is the side
/// that sent the first SYN, else the first sender seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRef {
    /// `"tcp"`, `"udp"` or `"icmp"`.
    pub protocol: String,
    /// Client address (IPv4 dotted quad or RFC 5952 IPv6).
    pub client: String,
    /// Client port.
    pub client_port: u16,
    /// Server address.
    pub server: String,
    /// Server port.
    pub server_port: u16,
}

/// Detector-specific evidence: a JSON object whose keys carry their unit in the
/// name (`delay_ms`, `mtu`, `size_bytes`, `count`…). Keys are kept in insertion
/// order so output is byte-identical from run to run.
pub type Evidence = serde_json::Map<String, serde_json::Value>;

/// One diagnosis: which detector, how bad, what flow, which frames prove it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Detector id, e.g. `"syn-retransmit"`.
    pub detector: String,
    /// How bad it is.
    pub severity: Severity,
    /// One sentence a network engineer understands.
    pub summary: String,
    /// The flow concerned, if any.
    pub flow: Option<FlowRef>,
    /// Wireshark `tcp.stream` of that flow, if TCP.
    pub tcp_stream: Option<u64>,
    /// Wireshark frame numbers proving the finding, ascending, deduplicated.
    pub frames: Vec<u64>,
    /// Timestamp of the earliest cited event, ns since the Unix epoch.
    pub start_ts_ns: i64,
    /// Timestamp of the latest cited event, ns since the Unix epoch.
    pub end_ts_ns: i64,
    /// Wireshark display filter selecting exactly `frames`
    /// (`frame.number in {a,b,c}`).
    pub wireshark_filter: String,
    /// Display filter for the whole flow (`tcp.stream eq N`), if TCP.
    pub stream_filter: Option<String>,
    /// What to change; one or two sentences.
    pub remedy: String,
    /// Detector-specific facts, units in the key names.
    pub evidence: Evidence,
    /// Only for a merged capture set (`pcapsleuth analyze --merge`): for each
    /// entry of `frames`, in the same order, the capture file and that file's
    /// own `frame.number` it came from. Empty (and omitted from JSON) for a
    /// single capture, where `frames` already are the file's frame numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_frames: Vec<SourceFrame>,
}

/// One cited frame of a merged capture set, located in its source file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFrame {
    /// The source capture's path, as given on the command line.
    pub file: String,
    /// Wireshark `frame.number` of the frame within that file (1-based).
    pub frame: u64,
}

impl Finding {
    /// Build a finding, normalising `frames` (sorted, deduplicated) and deriving
    /// both display filters from them.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        detector: &str,
        severity: Severity,
        summary: String,
        flow: Option<FlowRef>,
        tcp_stream: Option<u64>,
        mut frames: Vec<u64>,
        start_ts_ns: i64,
        end_ts_ns: i64,
        remedy: String,
        evidence: Evidence,
    ) -> Finding {
        frames.sort_unstable();
        frames.dedup();
        let wireshark_filter = frame_filter(&frames);
        Finding {
            detector: detector.to_string(),
            severity,
            summary,
            flow,
            tcp_stream,
            frames,
            start_ts_ns,
            end_ts_ns,
            wireshark_filter,
            stream_filter: tcp_stream.map(|s| format!("tcp.stream eq {s}")),
            remedy,
            evidence,
            source_frames: Vec::new(),
        }
    }
}

/// Wireshark display filter selecting exactly these frames. Wireshark 4's set
/// syntax wants commas and no spaces: `frame.number in {1,5,9}`.
pub fn frame_filter(frames: &[u64]) -> String {
    match frames {
        [] => String::new(),
        [one] => format!("frame.number == {one}"),
        many => {
            let mut s = String::from("frame.number in {");
            for (i, f) in many.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&f.to_string());
            }
            s.push('}');
            s
        }
    }
}

/// Sort findings into report order: by first cited frame, then detector id,
/// then summary (so output is byte-identical from run to run).
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        let fa = a.frames.first().copied().unwrap_or(u64::MAX);
        let fb = b.frames.first().copied().unwrap_or(u64::MAX);
        fa.cmp(&fb)
            .then_with(|| a.detector.cmp(&b.detector))
            .then_with(|| a.tcp_stream.cmp(&b.tcp_stream))
            .then_with(|| a.summary.cmp(&b.summary))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn filters() {
        assert_eq!(frame_filter(&[3]), "frame.number == 3");
        assert_eq!(frame_filter(&[1, 5, 9]), "frame.number in {1,5,9}");
        let f = Finding::new(
            "x",
            Severity::Info,
            "s".into(),
            None,
            Some(4),
            vec![9, 1, 9],
            0,
            0,
            String::new(),
            Evidence::new(),
        );
        assert_eq!(f.frames, vec![1, 9]);
        assert_eq!(f.stream_filter.as_deref(), Some("tcp.stream eq 4"));
    }
}
