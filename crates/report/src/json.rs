//! JSON and JSON Lines renderers (the machine-readable contract; see the crate
//! documentation for the field-by-field specification).

use crate::community_id;
use crate::model::{CaptureReport, Report, SourceReport, SCHEMA_VERSION, TOOL_VERSION};
use crate::wire::{CaptureQualityReport, FlowReport, WarningReport};
use pcapsleuth_core::Finding;
use pcapsleuth_ledger::{sum_cause_times, CauseTime};
use serde::Serialize;
use serde_json::{Map, Value};
use std::io::Write;

/// Serialize pretty-printed, falling back to a JSON error object. Serialization
/// of the report model cannot fail in practice (all map keys are strings and
/// there is no custom `Serialize`), but a renderer must never panic.
fn pretty<T: Serialize>(v: &T) -> String {
    let mut buf = Vec::new();
    match write_pretty(v, &mut buf) {
        Ok(()) => String::from_utf8(buf)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Err(e) => format!(
            "{{\"error\": {}}}\n",
            Value::String(format!("serialization failed: {e}"))
        ),
    }
}

/// Write `v` pretty-printed (two-space indent) and a trailing newline to
/// `w`, as it is serialised: no copy of the document in memory.
fn write_pretty<T: Serialize, W: Write>(v: &T, mut w: W) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut w, v)?;
    w.write_all(b"\n")
}

/// A finding as serialised: its own fields, then `community_id` (since 1.1)
/// when its flow is TCP or UDP ([`community_id::of_flow_ref`]).
#[derive(Serialize)]
struct FindingOut<'a> {
    #[serde(flatten)]
    finding: &'a Finding,
    #[serde(skip_serializing_if = "Option::is_none")]
    community_id: Option<String>,
}

impl<'a> FindingOut<'a> {
    fn new(finding: &'a Finding) -> Self {
        FindingOut {
            finding,
            community_id: finding.flow.as_ref().and_then(community_id::of_flow_ref),
        }
    }
}

/// `serialize_with` of [`CaptureReport::findings`]: every finding with its
/// `community_id`.
pub(crate) fn serialize_findings<S: serde::Serializer>(
    findings: &[Finding],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(findings.iter().map(FindingOut::new))
}

/// The whole document of [`render_json`]: the report with the version of
/// pcapsleuth that rendered it.
#[derive(Serialize)]
struct ReportDoc<'a> {
    schema_version: u32,
    pcapsleuth_version: &'a str,
    captures: &'a [CaptureReport],
}

/// Render the whole report as pretty-printed JSON (two-space indent) followed
/// by a trailing newline. Key order is the declaration order of the model, so
/// output is byte-identical from run to run. `flows` is omitted when empty.
/// `pcapsleuth_version` ([`TOOL_VERSION`], since 1.1) follows
/// `schema_version`.
pub fn render_json(report: &Report) -> String {
    pretty(&report_doc(report))
}

/// [`render_json`] written to `w` as it is serialised: the same bytes, but
/// no copy of the document in memory (a capture with a million findings
/// renders about 1.7 GB of JSON).
///
/// # Errors
/// The writer's I/O errors (a serialisation error, which the report model
/// cannot produce, comes as an I/O error too).
pub fn write_json<W: Write>(report: &Report, w: W) -> std::io::Result<()> {
    write_pretty(&report_doc(report), w)
}

fn report_doc(report: &Report) -> ReportDoc<'_> {
    ReportDoc {
        schema_version: report.schema_version,
        pcapsleuth_version: TOOL_VERSION,
        captures: &report.captures,
    }
}

/// One JSON Lines line per finding of one capture: each line is a compact JSON
/// object whose first key is `path` (the capture's path, as in
/// [`CaptureReport::path`]) followed by every field of the finding, and ends
/// with `\n`. Capture facts and warnings are not part of JSON Lines output,
/// except two records that follow the findings: a capture whose analysis
/// reached a bound (a flow, unacknowledged-segment or detector limit) has
/// one [`capture_limits_line`], and a capture not read at all (`error`) or
/// only in part (`incomplete`) ends with one [`capture_status_line`]. A
/// capture read and analysed in full without findings renders as the empty
/// string.
///
/// The CLI calls this per capture as soon as that capture is finished.
pub fn render_capture_jsonl(capture: &CaptureReport) -> String {
    let mut out = render_findings_jsonl(capture);
    for line in [capture_limits_line(capture), capture_status_line(capture)]
        .into_iter()
        .flatten()
    {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The JSON Lines record of a capture whose analysis reached a bound, without
/// its newline: `{"path":…,"record":"capture_limited","limits":[WARNING,…]}`,
/// where `limits` lists, in report order, the capture's warnings that are
/// about the analysis rather than a record of the file (`flow_cap`,
/// `unacked_segment_cap`, `detector_limit`; see
/// [`crate::WarningKindReport::is_about_a_record`]): the findings may miss
/// what those bounds refused. `None` when there is none. Since contract 1.2.
pub fn capture_limits_line(capture: &CaptureReport) -> Option<String> {
    let limits: Vec<Value> = capture
        .warnings
        .iter()
        .filter(|w| !w.kind.is_about_a_record())
        .map(|w| serde_json::to_value(w).unwrap_or(Value::Null))
        .collect();
    if limits.is_empty() {
        return None;
    }
    let mut obj = Map::new();
    obj.insert("path".to_string(), Value::String(capture.path.clone()));
    obj.insert(
        "record".to_string(),
        Value::String("capture_limited".to_string()),
    );
    obj.insert("limits".to_string(), Value::Array(limits));
    Some(Value::Object(obj).to_string())
}

/// The JSON Lines record of a capture that was not analysed in full, without
/// its newline: `{"path":…,"record":"capture_error","packets":N,"error":"…"}`
/// when reading failed (`packets` frames were analysed before), or
/// `{"path":…,"record":"capture_incomplete","packets":N,"incomplete":WARNING}`
/// when reading stopped early on a cut or malformed record. Finding lines
/// never have a `record` key. `None` for a complete read.
pub fn capture_status_line(capture: &CaptureReport) -> Option<String> {
    let mut obj = Map::new();
    obj.insert("path".to_string(), Value::String(capture.path.clone()));
    let record = |s: &str| Value::String(s.to_string());
    if let Some(e) = &capture.error {
        obj.insert("record".to_string(), record("capture_error"));
        obj.insert("packets".to_string(), Value::from(capture.packets));
        obj.insert("error".to_string(), Value::String(e.clone()));
    } else if let Some(w) = &capture.incomplete {
        obj.insert("record".to_string(), record("capture_incomplete"));
        obj.insert("packets".to_string(), Value::from(capture.packets));
        obj.insert(
            "incomplete".to_string(),
            serde_json::to_value(w).unwrap_or(Value::Null),
        );
    } else {
        return None;
    }
    Some(Value::Object(obj).to_string())
}

/// One line per finding (see [`render_capture_jsonl`]).
fn render_findings_jsonl(capture: &CaptureReport) -> String {
    let mut out = String::new();
    for f in &capture.findings {
        let mut obj = Map::new();
        obj.insert("path".to_string(), Value::String(capture.path.clone()));
        match serde_json::to_value(FindingOut::new(f)) {
            Ok(Value::Object(fields)) => {
                for (k, v) in fields {
                    obj.insert(k, v);
                }
            }
            Ok(other) => {
                obj.insert("finding".to_string(), other);
            }
            Err(e) => {
                obj.insert(
                    "error".to_string(),
                    Value::String(format!("serialization failed: {e}")),
                );
            }
        }
        out.push_str(&Value::Object(obj).to_string());
        out.push('\n');
    }
    out
}

/// JSON Lines for every capture, in report order: the concatenation of
/// [`render_capture_jsonl`] over [`Report::captures`].
pub fn render_jsonl(report: &Report) -> String {
    report.captures.iter().map(render_capture_jsonl).collect()
}

/// Per-capture entry of [`render_flows_json`].
#[derive(Serialize)]
struct FlowsCapture<'a> {
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    incomplete: Option<&'a WarningReport>,
    /// As in `analyze` JSON (contract 1.1; omitted when the file could not
    /// be read at all).
    #[serde(skip_serializing_if = "Option::is_none")]
    capture_quality: Option<&'a CaptureQualityReport>,
    #[serde(skip_serializing_if = "<[SourceReport]>::is_empty")]
    sources: &'a [SourceReport],
    /// Each with its `community_id`, made as it is written
    /// ([`serialize_flows`]).
    #[serde(serialize_with = "serialize_flows")]
    flows: &'a [FlowReport],
    /// The capture's latency budget: every flow's `time_lost_by_cause`
    /// summed per cause (contract 1.1; omitted when no flow stalled).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    time_lost_by_cause: Vec<CauseTime>,
    /// The latency budget per service (server address and port), by
    /// descending time lost (contract 1.1; omitted when no flow stalled).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    time_lost_by_service: Vec<ServiceTime>,
}

/// Time lost to stalls on connections to one service (`$defs.service_time`).
#[derive(Serialize)]
struct ServiceTime {
    /// Server address.
    server: String,
    /// Server port.
    server_port: u16,
    /// TCP connections to it in the capture.
    connections: u64,
    /// Of those, connections with at least one stall.
    stalled_connections: u64,
    /// Summed stall time, ms.
    duration_ms: f64,
    /// Per cause, in the ledger's cause order.
    time_lost_by_cause: Vec<CauseTime>,
}

/// Roll the flows' stall ledgers up per service, by descending time lost
/// (ties: server address, then port). Services whose connections never
/// stalled are left out.
fn time_lost_by_service(flows: &[FlowReport]) -> Vec<ServiceTime> {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<(&str, u16), Vec<&FlowReport>> = BTreeMap::new();
    for f in flows {
        by.entry((f.server.as_str(), f.server_port))
            .or_default()
            .push(f);
    }
    let mut out: Vec<ServiceTime> = by
        .into_iter()
        .filter_map(|((server, server_port), fl)| {
            let causes = sum_cause_times(fl.iter().flat_map(|f| f.time_lost_by_cause.iter()));
            if causes.is_empty() {
                return None;
            }
            let ms: f64 = causes.iter().map(|c| c.duration_ms).sum();
            Some(ServiceTime {
                server: server.to_string(),
                server_port,
                connections: fl.len() as u64,
                stalled_connections: fl
                    .iter()
                    .filter(|f| !f.time_lost_by_cause.is_empty())
                    .count() as u64,
                duration_ms: (ms * 1000.0).round() / 1000.0,
                time_lost_by_cause: causes,
            })
        })
        .collect();
    out.sort_by(|a, b| b.duration_ms.total_cmp(&a.duration_ms));
    out
}

/// A FLOW as serialised: its own fields, then `community_id` (since 1.1).
#[derive(Serialize)]
struct FlowOut<'a> {
    #[serde(flatten)]
    flow: &'a FlowReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    community_id: Option<String>,
}

/// Whole document of [`render_flows_json`].
#[derive(Serialize)]
struct FlowsDoc<'a> {
    schema_version: u32,
    pcapsleuth_version: &'a str,
    captures: Vec<FlowsCapture<'a>>,
}

/// Render the `pcapsleuth flows` JSON document:
/// `{"schema_version":1,"captures":[{"path":…,"flows":[FLOW…]}]}`,
/// pretty-printed with a trailing newline. `error` is present on a capture
/// only when it could not be read to the end, `sources` only for a merged
/// set (the files merged, as in `analyze` JSON). `flows` is always present
/// (possibly empty); each flow carries its stall ledger (`stalls`,
/// `time_lost_by_cause`, `stall_summary`) when it stalled, and the capture
/// its `time_lost_by_cause` (the latency budget) when any flow did.
pub fn render_flows_json(report: &Report) -> String {
    pretty(&flows_doc(report))
}

/// [`render_flows_json`] written to `w` as it is serialised: the same
/// bytes, no copy of the document in memory.
///
/// # Errors
/// As [`write_json`].
pub fn write_flows_json<W: Write>(report: &Report, w: W) -> std::io::Result<()> {
    write_pretty(&flows_doc(report), w)
}

/// `serialize_with` of [`FlowsCapture::flows`]: every flow with its
/// `community_id`.
fn serialize_flows<S: serde::Serializer>(flows: &&[FlowReport], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(flows.iter().map(|flow| FlowOut {
        flow,
        community_id: community_id::community_id_v1(
            &flow.client,
            flow.client_port,
            &flow.server,
            flow.server_port,
            pcapsleuth_core::ip_protocol::TCP,
        ),
    }))
}

fn flows_doc(report: &Report) -> FlowsDoc<'_> {
    FlowsDoc {
        schema_version: SCHEMA_VERSION,
        pcapsleuth_version: TOOL_VERSION,
        captures: report
            .captures
            .iter()
            .map(|c| FlowsCapture {
                path: &c.path,
                error: c.error.as_deref(),
                incomplete: c.incomplete.as_ref(),
                capture_quality: c.capture_quality.as_ref(),
                sources: &c.sources,
                flows: &c.flows,
                time_lost_by_cause: sum_cause_times(
                    c.flows.iter().flat_map(|f| f.time_lost_by_cause.iter()),
                ),
                time_lost_by_service: time_lost_by_service(&c.flows),
            })
            .collect(),
    }
}
