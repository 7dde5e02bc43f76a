//! `pcapsleuth report merge`: several JSON reports into one.

use crate::model::{Report, SCHEMA_VERSION};

/// Read one `analyze --format json` (or `check --format json`) document.
/// Fails on invalid JSON, a document that is not a report, or a
/// `schema_version` other than [`SCHEMA_VERSION`]. Keys this version does
/// not know are ignored (as the contract asks of every consumer);
/// `community_id` and `pcapsleuth_version` are derived again on output.
pub fn parse_report(json: &str) -> Result<Report, String> {
    let r: Report =
        serde_json::from_str(json).map_err(|e| format!("not a pcapsleuth JSON report: {e}"))?;
    if r.schema_version != SCHEMA_VERSION {
        return Err(format!(
            "schema_version {} is not supported (this pcapsleuth reads {SCHEMA_VERSION})",
            r.schema_version
        ));
    }
    Ok(r)
}

/// One report holding every capture of `reports`, in the order given (the
/// captures of the first report first). Captures are kept as they are, so
/// a capture analysed by two shards appears twice.
pub fn merge_reports(reports: Vec<Report>) -> Report {
    Report {
        schema_version: SCHEMA_VERSION,
        captures: reports.into_iter().flat_map(|r| r.captures).collect(),
    }
}
