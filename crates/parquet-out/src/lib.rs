//! `--format parquet`: findings (`analyze`, `check`) and flows (`flows`) as
//! Apache Parquet files, one row per finding or flow, so pcapsleuth's results
//! join with Zeek `conn.log` and Suricata EVE records in DuckDB, Spark or
//! pandas on `community_id` (Corelight Community ID v1).
//!
//! Written with the `parquet` crate of arrow-rs (no Arrow, no compression
//! codecs: small to build, and every reader handles uncompressed pages).
//! Data flows one way: this crate reads the report model and writes bytes.
//!
//! # Findings table ([`write_findings`])
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `path` | string | the capture's path (as in JSON `path`) |
//! | `detector` | string | detector id |
//! | `severity` | string | `info`, `warning`, `error` |
//! | `summary` | string | one sentence |
//! | `protocol` | string, null | `tcp`, `udp`, `icmp`, `icmpv6`; null without a flow |
//! | `client`, `server` | string, null | addresses of the flow |
//! | `client_port`, `server_port` | int32, null | ports (0 for ICMP) |
//! | `tcp_stream`, `udp_stream` | int64, null | Wireshark stream ids |
//! | `community_id` | string, null | Community ID v1 of the flow (TCP and UDP) |
//! | `first_frame` | int64, null | first cited `frame.number` |
//! | `frame_count` | int64 | cited frames |
//! | `start_ts_ns`, `end_ts_ns` | int64 | ns since the Unix epoch |
//! | `wireshark_filter` | string | display filter of the cited frames |
//! | `stream_filter` | string, null | display filter of the conversations |
//! | `remedy` | string | what to change |
//! | `evidence` | string | the evidence object as compact JSON |
//!
//! # Flows table ([`write_flows`])
//!
//! `path`, `tcp_stream` (int64), `client`, `client_port` (int32), `server`,
//! `server_port` (int32), `community_id`, `state` (Zeek `conn_state`),
//! `packets`, `bytes`, `payload_bytes_c2s`, `payload_bytes_s2c`,
//! `first_frame`, `last_frame` (int64), `duration_ms` (double),
//! `retransmissions` (int64, all kinds), `zero_window_ms` (double),
//! `handshake_rtt_ms` (double, null), `longest_stall_ms` (double),
//! `stall_summary` (string, null): the FLOW fields of the JSON contract.

use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use pcapsleuth_report::community_id::{community_id_v1, of_flow_ref};
use pcapsleuth_report::{Report, TOOL_VERSION};
use std::io::Write;
use std::sync::Arc;

/// One column's values (`None` = null).
enum Values {
    Str(Vec<Option<String>>),
    I32(Vec<Option<i32>>),
    I64(Vec<Option<i64>>),
    F64(Vec<Option<f64>>),
}

/// A named column; `required` columns never hold null.
struct Column {
    name: &'static str,
    required: bool,
    values: Values,
}

impl Column {
    fn str(name: &'static str, required: bool, v: Vec<Option<String>>) -> Self {
        Column {
            name,
            required,
            values: Values::Str(v),
        }
    }
    fn i32(name: &'static str, v: Vec<Option<i32>>) -> Self {
        Column {
            name,
            required: false,
            values: Values::I32(v),
        }
    }
    fn i64(name: &'static str, required: bool, v: Vec<Option<i64>>) -> Self {
        Column {
            name,
            required,
            values: Values::I64(v),
        }
    }
    fn f64(name: &'static str, required: bool, v: Vec<Option<f64>>) -> Self {
        Column {
            name,
            required,
            values: Values::F64(v),
        }
    }

    fn schema_line(&self) -> String {
        let rep = if self.required {
            "REQUIRED"
        } else {
            "OPTIONAL"
        };
        let ty = match self.values {
            Values::Str(_) => "BYTE_ARRAY",
            Values::I32(_) => "INT32",
            Values::I64(_) => "INT64",
            Values::F64(_) => "DOUBLE",
        };
        let logical = if matches!(self.values, Values::Str(_)) {
            " (STRING)"
        } else {
            ""
        };
        format!("  {rep} {ty} {}{logical};\n", self.name)
    }
}

/// Values and definition levels (1 present, 0 null) of one column.
fn split<T: Clone>(v: &[Option<T>]) -> (Vec<T>, Vec<i16>) {
    let vals = v.iter().flatten().cloned().collect();
    let defs = v.iter().map(|x| i16::from(x.is_some())).collect();
    (vals, defs)
}

/// Write `columns` (all of one length) as a Parquet file with one row group.
fn write_table<W: Write + Send>(columns: &[Column], out: W) -> Result<(), String> {
    let e = |e: parquet::errors::ParquetError| format!("parquet: {e}");
    let mut msg = String::from("message pcapsleuth {\n");
    for c in columns {
        msg.push_str(&c.schema_line());
    }
    msg.push('}');
    let schema = Arc::new(parse_message_type(&msg).map_err(e)?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_created_by(format!("pcapsleuth {TOOL_VERSION}"))
            .build(),
    );
    let mut writer = SerializedFileWriter::new(out, schema, props).map_err(e)?;
    let mut rg = writer.next_row_group().map_err(e)?;
    for c in columns {
        let Some(mut col) = rg.next_column().map_err(e)? else {
            return Err("parquet: fewer columns than the schema".into());
        };
        let defs_for = |d: Vec<i16>| if c.required { None } else { Some(d) };
        match &c.values {
            Values::Str(v) => {
                let (vals, d) = split(v);
                let vals: Vec<ByteArray> = vals
                    .into_iter()
                    .map(|s| ByteArray::from(s.into_bytes()))
                    .collect();
                let d = defs_for(d);
                col.typed::<ByteArrayType>()
                    .write_batch(&vals, d.as_deref(), None)
                    .map_err(e)?;
            }
            Values::I32(v) => {
                let (vals, d) = split(v);
                let d = defs_for(d);
                col.typed::<Int32Type>()
                    .write_batch(&vals, d.as_deref(), None)
                    .map_err(e)?;
            }
            Values::I64(v) => {
                let (vals, d) = split(v);
                let d = defs_for(d);
                col.typed::<Int64Type>()
                    .write_batch(&vals, d.as_deref(), None)
                    .map_err(e)?;
            }
            Values::F64(v) => {
                let (vals, d) = split(v);
                let d = defs_for(d);
                col.typed::<DoubleType>()
                    .write_batch(&vals, d.as_deref(), None)
                    .map_err(e)?;
            }
        }
        col.close().map_err(e)?;
    }
    rg.close().map_err(e)?;
    writer.close().map_err(e)?;
    Ok(())
}

fn i64_of(v: u64) -> Option<i64> {
    Some(i64::try_from(v).unwrap_or(i64::MAX))
}

/// Write every finding of `report` (all captures, in report order) as one
/// Parquet table (columns in the crate documentation).
pub fn write_findings<W: Write + Send>(report: &Report, out: W) -> Result<(), String> {
    let rows: Vec<(&str, &pcapsleuth_core::Finding)> = report
        .captures
        .iter()
        .flat_map(|c| c.findings.iter().map(move |f| (c.path.as_str(), f)))
        .collect();
    let s = |g: &dyn Fn(&(&str, &pcapsleuth_core::Finding)) -> Option<String>| {
        rows.iter().map(g).collect::<Vec<_>>()
    };
    let columns = vec![
        Column::str("path", true, s(&|r| Some(r.0.to_string()))),
        Column::str("detector", true, s(&|r| Some(r.1.detector.clone()))),
        Column::str(
            "severity",
            true,
            s(&|r| Some(r.1.severity.as_str().to_string())),
        ),
        Column::str("summary", true, s(&|r| Some(r.1.summary.clone()))),
        Column::str(
            "protocol",
            false,
            s(&|r| r.1.flow.as_ref().map(|f| f.protocol.to_string())),
        ),
        Column::str(
            "client",
            false,
            s(&|r| r.1.flow.as_ref().map(|f| f.client.clone())),
        ),
        Column::i32(
            "client_port",
            rows.iter()
                .map(|r| r.1.flow.as_ref().map(|f| i32::from(f.client_port)))
                .collect(),
        ),
        Column::str(
            "server",
            false,
            s(&|r| r.1.flow.as_ref().map(|f| f.server.clone())),
        ),
        Column::i32(
            "server_port",
            rows.iter()
                .map(|r| r.1.flow.as_ref().map(|f| i32::from(f.server_port)))
                .collect(),
        ),
        Column::i64(
            "tcp_stream",
            false,
            rows.iter()
                .map(|r| r.1.tcp_stream.and_then(i64_of))
                .collect(),
        ),
        Column::i64(
            "udp_stream",
            false,
            rows.iter()
                .map(|r| r.1.udp_stream.and_then(i64_of))
                .collect(),
        ),
        Column::str(
            "community_id",
            false,
            s(&|r| r.1.flow.as_ref().and_then(of_flow_ref)),
        ),
        Column::i64(
            "first_frame",
            false,
            rows.iter()
                .map(|r| r.1.frames.first().and_then(|&v| i64_of(v)))
                .collect(),
        ),
        Column::i64(
            "frame_count",
            true,
            rows.iter()
                .map(|r| i64_of(r.1.frames.len() as u64))
                .collect(),
        ),
        Column::i64(
            "start_ts_ns",
            true,
            rows.iter().map(|r| Some(r.1.start_ts_ns)).collect(),
        ),
        Column::i64(
            "end_ts_ns",
            true,
            rows.iter().map(|r| Some(r.1.end_ts_ns)).collect(),
        ),
        Column::str(
            "wireshark_filter",
            true,
            s(&|r| Some(r.1.wireshark_filter.clone())),
        ),
        Column::str("stream_filter", false, s(&|r| r.1.stream_filter.clone())),
        Column::str("remedy", true, s(&|r| Some(r.1.remedy.clone()))),
        Column::str(
            "evidence",
            true,
            s(&|r| Some(serde_json::Value::Object(r.1.evidence.clone()).to_string())),
        ),
    ];
    write_table(&columns, out)
}

/// Write every flow of `report` (filled by `pcapsleuth flows`) as one Parquet
/// table (columns in the crate documentation).
pub fn write_flows<W: Write + Send>(report: &Report, out: W) -> Result<(), String> {
    let rows: Vec<(&str, &pcapsleuth_report::FlowReport)> = report
        .captures
        .iter()
        .flat_map(|c| c.flows.iter().map(move |f| (c.path.as_str(), f)))
        .collect();
    type Row<'a> = (&'a str, &'a pcapsleuth_report::FlowReport);
    let s = |g: &dyn Fn(&Row<'_>) -> Option<String>| rows.iter().map(g).collect::<Vec<_>>();
    let n = |g: &dyn Fn(&Row<'_>) -> u64| rows.iter().map(|r| i64_of(g(r))).collect::<Vec<_>>();
    let d = |g: &dyn Fn(&Row<'_>) -> Option<f64>| rows.iter().map(g).collect::<Vec<_>>();
    let columns = vec![
        Column::str("path", true, s(&|r| Some(r.0.to_string()))),
        Column::i64("tcp_stream", true, n(&|r| r.1.tcp_stream)),
        Column::str("client", true, s(&|r| Some(r.1.client.clone()))),
        Column::i32(
            "client_port",
            rows.iter()
                .map(|r| Some(i32::from(r.1.client_port)))
                .collect(),
        ),
        Column::str("server", true, s(&|r| Some(r.1.server.clone()))),
        Column::i32(
            "server_port",
            rows.iter()
                .map(|r| Some(i32::from(r.1.server_port)))
                .collect(),
        ),
        Column::str(
            "community_id",
            false,
            s(&|r| {
                community_id_v1(
                    &r.1.client,
                    r.1.client_port,
                    &r.1.server,
                    r.1.server_port,
                    pcapsleuth_core::ip_protocol::TCP,
                )
            }),
        ),
        Column::str("state", true, s(&|r| Some(r.1.state.as_str().to_string()))),
        Column::i64("packets", true, n(&|r| r.1.packets)),
        Column::i64("bytes", true, n(&|r| r.1.bytes)),
        Column::i64("payload_bytes_c2s", true, n(&|r| r.1.payload_bytes_c2s)),
        Column::i64("payload_bytes_s2c", true, n(&|r| r.1.payload_bytes_s2c)),
        Column::i64("first_frame", true, n(&|r| r.1.first_frame)),
        Column::i64("last_frame", true, n(&|r| r.1.last_frame)),
        Column::f64("duration_ms", true, d(&|r| Some(r.1.duration_ms))),
        Column::i64("retransmissions", true, n(&|r| r.1.retransmissions.total)),
        Column::f64("zero_window_ms", true, d(&|r| Some(r.1.zero_window_ms))),
        Column::f64("handshake_rtt_ms", false, d(&|r| r.1.handshake_rtt_ms)),
        Column::f64("longest_stall_ms", true, d(&|r| Some(r.1.longest_stall_ms))),
        Column::str("stall_summary", false, s(&|r| r.1.stall_summary.clone())),
    ];
    write_table(&columns, out)
}
