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

/// The transport of a finding's flow: a closed vocabulary (JSON: lowercase).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP (IP protocol 6); conversations are Wireshark's `tcp.stream`.
    Tcp,
    /// UDP (IP protocol 17); conversations are Wireshark's `udp.stream`.
    Udp,
    /// ICMP for IPv4 (IP protocol 1).
    Icmp,
    /// ICMPv6 (IPv6 next header 58).
    Icmpv6,
}

impl Protocol {
    /// The lowercase name used in JSON and in text (`"tcp"`, `"udp"`, `"icmp"`, `"icmpv6"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Icmp => "icmp",
            Protocol::Icmpv6 => "icmpv6",
        }
    }

    /// The protocol of an IP protocol / IPv6 next-header number, if it is one of ours.
    pub const fn from_ip_protocol(n: u8) -> Option<Protocol> {
        match n {
            crate::ip_protocol::TCP => Some(Protocol::Tcp),
            crate::ip_protocol::UDP => Some(Protocol::Udp),
            crate::ip_protocol::ICMP => Some(Protocol::Icmp),
            crate::ip_protocol::ICMPV6 => Some(Protocol::Icmpv6),
            _ => None,
        }
    }

    /// Wireshark's conversation-index field for this protocol (`tcp.stream`,
    /// `udp.stream`); `None` for ICMP, which Wireshark does not number.
    pub const fn stream_field(self) -> Option<&'static str> {
        match self {
            Protocol::Tcp => Some("tcp.stream"),
            Protocol::Udp => Some("udp.stream"),
            Protocol::Icmp | Protocol::Icmpv6 => None,
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The flow a finding is about, oriented client → server. `client` is the side
/// that sent the first SYN, else the first sender seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRef {
    /// Transport.
    pub protocol: Protocol,
    /// Client address (IPv4 dotted quad or RFC 5952 IPv6).
    pub client: String,
    /// Client port (0 for ICMP).
    pub client_port: u16,
    /// Server address.
    pub server: String,
    /// Server port (0 for ICMP).
    pub server_port: u16,
}

/// One conversation a finding spans: Wireshark's `tcp.stream` or `udp.stream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StreamRef {
    /// `tcp` or `udp`.
    pub protocol: Protocol,
    /// The `tcp.stream` / `udp.stream` index (0-based, first-seen order).
    pub id: u64,
}

impl StreamRef {
    /// A `tcp.stream` (a [`StreamId`](crate::StreamId) or its raw `u64`).
    pub fn tcp(id: impl Into<u64>) -> StreamRef {
        StreamRef {
            protocol: Protocol::Tcp,
            id: id.into(),
        }
    }
    /// A `udp.stream` (a [`StreamId`](crate::StreamId) or its raw `u64`).
    pub fn udp(id: impl Into<u64>) -> StreamRef {
        StreamRef {
            protocol: Protocol::Udp,
            id: id.into(),
        }
    }
}

/// Detector-specific evidence: a JSON object whose keys carry their unit in the
/// name (`delay_ms`, `mtu`, `size_bytes`, `count`…). Keys are kept in insertion
/// order so output is byte-identical from run to run.
pub type Evidence = serde_json::Map<String, serde_json::Value>;

/// One diagnosis: which detector, how bad, what flow, which frames prove it.
///
/// Build one with [`Finding::builder`]; the builder normalises `frames` and
/// derives both display filters, so a detector never writes a filter by hand.
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
    /// Wireshark `udp.stream` of that flow, if UDP (omitted from JSON when
    /// absent; added in schema 1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_stream: Option<u64>,
    /// Every conversation the finding spans, when it spans more than one (a
    /// connection and its NAT-rewritten twin, a DNS query and its retry from
    /// another socket). Empty (and omitted from JSON) when `tcp_stream` /
    /// `udp_stream` say it all. Added in schema 1.1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamRef>,
    /// Hosts (IP addresses) a host-level finding is about, when it is about
    /// hosts rather than one flow (a dual-stack host's IPv4 and IPv6
    /// addresses). Empty (and omitted from JSON) otherwise. Added in schema 1.1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Wireshark frame numbers proving the finding, ascending, deduplicated.
    pub frames: Vec<u64>,
    /// Timestamp of the earliest cited event, ns since the Unix epoch.
    pub start_ts_ns: i64,
    /// Timestamp of the latest cited event, ns since the Unix epoch.
    pub end_ts_ns: i64,
    /// Wireshark display filter selecting exactly `frames`
    /// (`frame.number in {a,b,c}`).
    pub wireshark_filter: String,
    /// Display filter for the whole conversation: `tcp.stream eq N`,
    /// `udp.stream eq N`, or for several conversations
    /// `tcp.stream in {a,b} || udp.stream eq c`; `null` when none is known.
    pub stream_filter: Option<String>,
    /// What to change; one or two sentences.
    pub remedy: String,
    /// Detector-specific facts, units in the key names. Detectors fill it
    /// from a typed, serde-serialisable evidence struct
    /// ([`FindingBuilder::evidence`]), never key by key.
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
    /// Start a finding of `detector` (its id) at `severity`. Every other field
    /// is set by name on the returned [`FindingBuilder`].
    pub fn builder(detector: &str, severity: Severity) -> FindingBuilder {
        FindingBuilder {
            detector: detector.to_string(),
            severity,
            summary: String::new(),
            flow: None,
            streams: Vec::new(),
            hosts: Vec::new(),
            frames: Vec::new(),
            span: None,
            remedy: String::new(),
            evidence: Evidence::new(),
        }
    }

    /// Transitional positional constructor, kept only until every detector
    /// uses [`Finding::builder`]; do not use in new code.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        detector: &str,
        severity: Severity,
        summary: String,
        flow: Option<FlowRef>,
        tcp_stream: Option<u64>,
        frames: Vec<u64>,
        start_ts_ns: i64,
        end_ts_ns: i64,
        remedy: String,
        evidence: Evidence,
    ) -> Finding {
        let mut b = Finding::builder(detector, severity)
            .summary(summary)
            .flow(flow)
            .frames(frames)
            .span(start_ts_ns, end_ts_ns)
            .remedy(remedy);
        if let Some(s) = tcp_stream {
            b = b.tcp_stream(s);
        }
        let mut f = b.build();
        f.evidence = evidence;
        f
    }

    /// All conversations of this finding: `streams` when set, else the one
    /// named by `tcp_stream` / `udp_stream`.
    pub fn all_streams(&self) -> Vec<StreamRef> {
        if !self.streams.is_empty() {
            return self.streams.clone();
        }
        let mut v = Vec::new();
        if let Some(id) = self.tcp_stream {
            v.push(StreamRef::tcp(id));
        }
        if let Some(id) = self.udp_stream {
            v.push(StreamRef::udp(id));
        }
        v
    }
}

/// Named-field builder for a [`Finding`] (see [`Finding::builder`]).
#[derive(Debug, Clone)]
#[must_use = "a FindingBuilder does nothing until .build()"]
pub struct FindingBuilder {
    detector: String,
    severity: Severity,
    summary: String,
    flow: Option<FlowRef>,
    streams: Vec<StreamRef>,
    hosts: Vec<String>,
    frames: Vec<u64>,
    span: Option<(i64, i64)>,
    remedy: String,
    evidence: Evidence,
}

impl FindingBuilder {
    /// The one-sentence summary.
    pub fn summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = summary.into();
        self
    }
    /// The flow concerned (client → server).
    pub fn flow(mut self, flow: Option<FlowRef>) -> Self {
        self.flow = flow;
        self
    }
    /// The finding's `tcp.stream` (its first conversation).
    pub fn tcp_stream(self, id: impl Into<u64>) -> Self {
        self.stream(StreamRef::tcp(id))
    }
    /// The finding's `udp.stream` (its first conversation).
    pub fn udp_stream(self, id: impl Into<u64>) -> Self {
        self.stream(StreamRef::udp(id))
    }
    /// Add one conversation the finding spans. The first one added is the
    /// finding's own (`tcp_stream` / `udp_stream`); adding more than one
    /// fills `streams`. Duplicates are ignored.
    pub fn stream(mut self, s: StreamRef) -> Self {
        if !self.streams.contains(&s) {
            self.streams.push(s);
        }
        self
    }
    /// Hosts of a host-level finding (IP addresses as text).
    pub fn hosts(mut self, hosts: Vec<String>) -> Self {
        self.hosts = hosts;
        self
    }
    /// Frames proving the finding (any order, duplicates allowed): raw
    /// `u64` frame numbers or [`FrameNo`](crate::FrameNo)s.
    pub fn frames<F: Into<u64>>(mut self, frames: impl IntoIterator<Item = F>) -> Self {
        self.frames = frames.into_iter().map(Into::into).collect();
        self
    }
    /// Timestamps (ns since the Unix epoch) of the earliest and latest cited events.
    pub fn span(mut self, start_ts_ns: i64, end_ts_ns: i64) -> Self {
        self.span = Some((start_ts_ns, end_ts_ns));
        self
    }
    /// What to change.
    pub fn remedy(mut self, remedy: impl Into<String>) -> Self {
        self.remedy = remedy.into();
        self
    }
    /// The detector's typed evidence, serialised field by field in declaration
    /// order (a struct deriving `Serialize`; `None` fields are kept as `null`
    /// unless the struct skips them). Anything that does not serialise to a
    /// JSON object is stored under the key `value`.
    pub fn evidence<T: Serialize>(mut self, evidence: &T) -> Self {
        self.evidence = match serde_json::to_value(evidence) {
            Ok(serde_json::Value::Object(m)) => m,
            Ok(serde_json::Value::Null) | Err(_) => Evidence::new(),
            Ok(other) => {
                let mut m = Evidence::new();
                m.insert("value".to_string(), other);
                m
            }
        };
        self
    }

    /// The finding: frames sorted and deduplicated, filters derived.
    pub fn build(self) -> Finding {
        let mut frames = self.frames;
        frames.sort_unstable();
        frames.dedup();
        let wireshark_filter = frame_filter(&frames);
        let (start_ts_ns, end_ts_ns) = self.span.unwrap_or((0, 0));
        let first = self.streams.first().copied();
        let tcp_stream = first.filter(|s| s.protocol == Protocol::Tcp).map(|s| s.id);
        let udp_stream = first.filter(|s| s.protocol == Protocol::Udp).map(|s| s.id);
        let stream_filter = stream_filter(&self.streams);
        let streams = if self.streams.len() > 1 {
            self.streams
        } else {
            Vec::new()
        };
        Finding {
            detector: self.detector,
            severity: self.severity,
            summary: self.summary,
            flow: self.flow,
            tcp_stream,
            udp_stream,
            streams,
            hosts: self.hosts,
            frames,
            start_ts_ns,
            end_ts_ns,
            wireshark_filter,
            stream_filter,
            remedy: self.remedy,
            evidence: self.evidence,
            source_frames: Vec::new(),
        }
    }
}

/// Display filter selecting every conversation in `streams`:
/// `tcp.stream eq 3`, `tcp.stream in {3,7}`, `tcp.stream eq 3 || udp.stream eq 1`.
/// `None` when no stream is given (ICMP has no Wireshark stream index).
pub fn stream_filter(streams: &[StreamRef]) -> Option<String> {
    let mut parts = Vec::new();
    for proto in [Protocol::Tcp, Protocol::Udp] {
        let Some(field) = proto.stream_field() else {
            continue;
        };
        let mut ids: Vec<u64> = streams
            .iter()
            .filter(|s| s.protocol == proto)
            .map(|s| s.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        match ids.as_slice() {
            [] => {}
            [one] => parts.push(format!("{field} eq {one}")),
            many => {
                let list: Vec<String> = many.iter().map(u64::to_string).collect();
                parts.push(format!("{field} in {{{}}}", list.join(",")));
            }
        }
    }
    if parts.is_empty() {
        None
    } else {
        Some(parts.join(" || "))
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
        let f = Finding::builder("x", Severity::Info)
            .tcp_stream(4u64)
            .frames(vec![9u64, 1, 9])
            .build();
        assert_eq!(f.frames, vec![1, 9]);
        assert_eq!(f.stream_filter.as_deref(), Some("tcp.stream eq 4"));
        assert!(
            f.streams.is_empty(),
            "one stream is said by tcp_stream alone"
        );
    }

    #[test]
    fn several_streams() {
        let f = Finding::builder("x", Severity::Warning)
            .udp_stream(2u64)
            .stream(StreamRef::tcp(7u64))
            .stream(StreamRef::udp(1u64))
            .stream(StreamRef::udp(2u64))
            .build();
        assert_eq!(f.tcp_stream, None);
        assert_eq!(f.udp_stream, Some(2));
        assert_eq!(f.streams.len(), 3);
        assert_eq!(
            f.stream_filter.as_deref(),
            Some("tcp.stream eq 7 || udp.stream in {1,2}")
        );
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["streams"][1]["protocol"], "tcp");
    }

    #[test]
    fn typed_evidence_keeps_field_order() {
        #[derive(Serialize)]
        struct Ev {
            zeta_ms: f64,
            alpha: u32,
        }
        let f = Finding::builder("x", Severity::Info)
            .evidence(&Ev {
                zeta_ms: 1.5,
                alpha: 2,
            })
            .build();
        let keys: Vec<&String> = f.evidence.keys().collect();
        assert_eq!(keys, ["zeta_ms", "alpha"]);
        assert_eq!(
            serde_json::to_string(&f.evidence).unwrap(),
            r#"{"zeta_ms":1.5,"alpha":2}"#
        );
    }

    #[test]
    fn protocol_is_closed_and_lowercase() {
        assert_eq!(
            serde_json::to_string(&Protocol::Icmpv6).unwrap(),
            "\"icmpv6\""
        );
        assert_eq!(Protocol::from_ip_protocol(58), Some(Protocol::Icmpv6));
        assert_eq!(Protocol::from_ip_protocol(47), None);
        assert_eq!(Protocol::Icmp.stream_field(), None);
    }
}
