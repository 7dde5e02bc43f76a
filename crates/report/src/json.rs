//! JSON and JSON Lines renderers (the machine-readable contract; see the crate
//! documentation for the field-by-field specification).

use crate::model::{CaptureReport, Report, SCHEMA_VERSION};
use pcapsleuth_flow::FlowSummary;
use serde::Serialize;
use serde_json::{Map, Value};

/// Serialize pretty-printed, falling back to a JSON error object. Serialization
/// of the report model cannot fail in practice (all map keys are strings and
/// there is no custom `Serialize`), but a renderer must never panic.
fn pretty<T: Serialize>(v: &T) -> String {
    match serde_json::to_string_pretty(v) {
        Ok(mut s) => {
            s.push('\n');
            s
        }
        Err(e) => format!(
            "{{\"error\": {}}}\n",
            Value::String(format!("serialization failed: {e}"))
        ),
    }
}

/// Render the whole report as pretty-printed JSON (two-space indent) followed
/// by a trailing newline. Key order is the declaration order of the model, so
/// output is byte-identical from run to run. `flows` is omitted when empty.
pub fn render_json(report: &Report) -> String {
    pretty(report)
}

/// One JSON Lines line per finding of one capture: each line is a compact JSON
/// object whose first key is `path` (the capture's path, as in
/// [`CaptureReport::path`]) followed by every field of the finding, and ends
/// with `\n`. A capture without findings renders as the empty string; capture
/// facts, warnings and errors are not part of JSON Lines output.
///
/// The CLI calls this per capture as soon as that capture is finished.
pub fn render_capture_jsonl(capture: &CaptureReport) -> String {
    let mut out = String::new();
    for f in &capture.findings {
        let mut obj = Map::new();
        obj.insert("path".to_string(), Value::String(capture.path.clone()));
        match serde_json::to_value(f) {
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
    flows: &'a [FlowSummary],
}

/// Whole document of [`render_flows_json`].
#[derive(Serialize)]
struct FlowsDoc<'a> {
    schema_version: u32,
    captures: Vec<FlowsCapture<'a>>,
}

/// Render the `pcapsleuth flows` JSON document:
/// `{"schema_version":1,"captures":[{"path":…,"flows":[FlowSummary…]}]}`,
/// pretty-printed with a trailing newline. `error` is present on a capture
/// only when it could not be read to the end. `flows` is always present
/// (possibly empty).
pub fn render_flows_json(report: &Report) -> String {
    let doc = FlowsDoc {
        schema_version: SCHEMA_VERSION,
        captures: report
            .captures
            .iter()
            .map(|c| FlowsCapture {
                path: &c.path,
                error: c.error.as_deref(),
                flows: &c.flows,
            })
            .collect(),
    };
    pretty(&doc)
}
