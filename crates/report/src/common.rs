//! Helpers shared by the human-readable renderers.

use pcapsleuth_core::{Finding, FlowRef, Severity};

/// `addr:port`, with IPv6 addresses bracketed (`[2001:db8::1]:443`, RFC 3986).
pub(crate) fn endpoint(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

/// `client:port -> server:port` (protocol omitted when it is `tcp`).
pub(crate) fn flow(f: &FlowRef) -> String {
    let proto = if f.protocol == pcapsleuth_core::Protocol::Tcp {
        String::new()
    } else {
        format!("{} ", f.protocol)
    };
    format!(
        "{proto}{} -> {}",
        endpoint(&f.client, f.client_port),
        endpoint(&f.server, f.server_port)
    )
}

/// Findings per severity: `[error, warning, info]`.
pub(crate) fn severity_counts(findings: &[Finding]) -> [usize; 3] {
    let mut c = [0usize; 3];
    for f in findings {
        match f.severity {
            Severity::Error => c[0] += 1,
            Severity::Warning => c[1] += 1,
            Severity::Info => c[2] += 1,
        }
    }
    c
}

/// `1 packet` / `2 packets`.
pub(crate) fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Render a JSON evidence value for humans: strings bare, everything else as
/// compact JSON.
pub(crate) fn evidence_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The cited frames of a merged set as `file#frame`, in the order of
/// `frames`, with runs of consecutive frames of one file shortened to
/// `file#first-last` (`a.pcap#12-32, b.pcap#1, a.pcap#705`); `None` for a
/// single capture.
pub(crate) fn source_frames(f: &Finding) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(&str, u64, u64)> = None;
    let flush = |parts: &mut Vec<String>, (file, a, b): (&str, u64, u64)| {
        parts.push(if a == b {
            format!("{file}#{a}")
        } else {
            format!("{file}#{a}-{b}")
        });
    };
    for s in &f.source_frames {
        run = match run {
            Some((file, a, b)) if file == s.file && b.checked_add(1) == Some(s.frame) => {
                Some((file, a, s.frame))
            }
            Some(r) => {
                flush(&mut parts, r);
                Some((s.file.as_str(), s.frame, s.frame))
            }
            None => Some((s.file.as_str(), s.frame, s.frame)),
        };
    }
    let r = run?;
    flush(&mut parts, r);
    Some(parts.join(", "))
}

/// The files of a merged set: `a.pcap (pcap, 846 frames), b.pcap (…)`;
/// `None` for a single capture.
pub(crate) fn merged_from(c: &crate::model::CaptureReport) -> Option<String> {
    if c.sources.is_empty() {
        return None;
    }
    Some(
        c.sources
            .iter()
            .map(|s| match &s.format {
                Some(fmt) => format!("{} ({fmt}, {})", s.path, plural(s.packets, "frame")),
                None => format!("{} (unreadable)", s.path),
            })
            .collect::<Vec<_>>()
            .join(", "),
    )
}
