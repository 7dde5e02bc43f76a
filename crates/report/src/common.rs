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
    let proto = if f.protocol == "tcp" || f.protocol.is_empty() {
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
