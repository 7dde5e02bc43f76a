//! The report model and its renderers: JSON, JSON Lines, text and Markdown.
//!
//! This documentation **is the specification** of pcapsleuth's machine-readable
//! output. A hand-maintained JSON Schema (draft 2020-12) of the same contract is
//! kept in `docs/report.schema.json`; the test suite validates every JSON
//! snapshot against it, so the two cannot drift apart silently.
//!
//! # Stability
//!
//! The wire format carries `schema_version` (currently `1`,
//! [`SCHEMA_VERSION`]). Within a schema version fields may be **added** (and
//! consumers must ignore keys they do not know); no field is ever renamed,
//! removed or changes type. Output is deterministic: the same inputs give
//! byte-identical output whatever the thread count or run.
//!
//! Conventions used below:
//! - timestamps are integers, **nanoseconds since the Unix epoch** (UTC), named
//!   `*_ts_ns`;
//! - frame numbers are Wireshark's 1-based `frame.number`; stream ids are
//!   Wireshark's 0-based `tcp.stream`, so every number can be pasted into
//!   Wireshark as is;
//! - evidence keys carry their unit in the name (`delay_ms`, `mtu`,
//!   `size_bytes`, `count`…).
//!
//! # `analyze --format json` ([`render_json`])
//!
//! One pretty-printed JSON object (two-space indent, trailing newline):
//!
//! ```json
//! {
//!   "schema_version": 1,
//!   "captures": [ CAPTURE, ... ]
//! }
//! ```
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `schema_version` | integer | always `1` for this format |
//! | `captures` | array of CAPTURE | one per input capture, **in input order** (directories expand to their capture files sorted by path) |
//!
//! ## CAPTURE ([`CaptureReport`])
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `path` | string | path as given on the command line (or found under a directory given on it); `-` for stdin |
//! | `format` | `"pcap"` \| `"pcapng"` \| null | container format (gzip is transparent); `null` when the file could not be opened or is not a capture |
//! | `packets` | integer | packet records read (the last `frame.number`) |
//! | `first_ts_ns` | integer | timestamp of frame 1, ns (0 if no packet) |
//! | `last_ts_ns` | integer | timestamp of the last frame, ns (0 if no packet) |
//! | `interfaces` | array of INTERFACE | capture interfaces, in IDB order |
//! | `tcp_streams` | integer | number of `tcp.stream` ids assigned (streams are `0..tcp_streams`) |
//! | `warnings` | array of WARNING | facts about the file that did not stop reading |
//! | `error` | string \| null | fatal error that stopped reading this file; findings from the frames before it are kept. A non-null `error` makes the CLI exit with status 2 |
//! | `incomplete` | WARNING, omitted when absent | since 1.1, only when reading stopped before the end of the input without an `error` (a record cut short, also a gzip stream without its end, or a malformed record): the warning (also in `warnings`) saying what and where; frames after it were not analysed. `check` then says `INCOMPLETE` and exits with status 2 |
//! | `findings` | array of FINDING | sorted by first cited frame, then detector id, then `tcp_stream`, then summary |
//! | `flows` | array of FLOW | only present in `pcapsleuth flows` output (see below); absent from `analyze` |
//! | `sources` | array of SOURCE | only present for a merged set (`analyze --merge a.pcap b.pcap`): the files merged, in input order |
//!
//! A **merged set** is several files analysed as one capture: frames are
//! interleaved by timestamp exactly as `mergecap -w merged.pcapng a.pcap b.pcap`
//! does (ties go to the later file), so `frames`, `wireshark_filter` and every
//! other frame number are those of that mergecap output. Its `path` is the
//! inputs joined with `+`, `format` is `"pcapng"`, `interfaces` lists every
//! file's interfaces (file 0's first, as `mergecap -I none` numbers them),
//! `warnings` are the files' warnings with the file's path prefixed to
//! `message`, and each FINDING has `source_frames`.
//!
//! ## SOURCE ([`SourceReport`])
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `path` | string | the file, as given on the command line |
//! | `format` | `"pcap"` \| `"pcapng"` \| null | its container format; `null` when unreadable |
//! | `packets` | integer | its own frame count |
//! | `interfaces` | array of INTERFACE | its interfaces, `id` being the id **in the merged set** |
//! | `warnings` | array of WARNING | its warnings (`offset`, `frame` relative to this file) |
//! | `error` | string \| null | fatal error reading this file |
//! | `incomplete` | WARNING, omitted when absent | since 1.1: as in CAPTURE, for this file (the set's `incomplete` is the first file's, its path prefixed to `message`) |
//!
//! ## INTERFACE ([`InterfaceReport`])
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `id` | integer | interface id (pcapng IDB index across sections; 0 for pcap) |
//! | `name` | string \| null | pcapng `if_name`, when recorded |
//! | `linktype` | string | link-layer type name, e.g. `"ETHERNET"`, `"LINUX_SLL2"`, `"RAW"` |
//!
//! ## WARNING ([`WarningReport`])
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `kind` | `"truncated_record"` \| `"malformed_record"` \| `"unknown_interface"` \| `"unacked_segment_cap"` | what happened (new kinds may be added). `unacked_segment_cap` (since 1.1) is about the analysis, not a record: the flow table's unacknowledged-segment cap was hit in the flows its `message` names (`offset` 0, `frame` null), so their retransmission and loss analysis is incomplete |
//! | `offset` | integer | byte offset of the record concerned, from the start of the decompressed file |
//! | `frame` | integer \| null | the frame number the record would have had, if known |
//! | `message` | string | human-readable detail |
//!
//! ## FINDING ([`pcapsleuth_core::Finding`])
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `detector` | string | detector id, e.g. `"syn-retransmit"` (`pcapsleuth explain` lists them) |
//! | `severity` | `"info"` \| `"warning"` \| `"error"` | ordered `info < warning < error` |
//! | `summary` | string | one sentence a network engineer understands |
//! | `flow` | FLOWREF \| null | the flow concerned, oriented client → server |
//! | `tcp_stream` | integer \| null | Wireshark `tcp.stream` of that flow |
//! | `frames` | array of integer | `frame.number`s proving the finding, ascending, no duplicates |
//! | `start_ts_ns` | integer | timestamp of the earliest cited event, ns |
//! | `end_ts_ns` | integer | timestamp of the latest cited event, ns |
//! | `wireshark_filter` | string | display filter selecting exactly `frames` (`frame.number == 7` or `frame.number in {1,5,9}`) |
//! | `stream_filter` | string \| null | display filter for the whole flow (`tcp.stream eq N`) |
//! | `remedy` | string | what to change, one or two sentences |
//! | `evidence` | object | detector-specific facts; keys carry units in their names; key order is fixed per detector |
//! | `source_frames` | array of `{file, frame}` | only for a merged set: for each entry of `frames`, in the same order, the file (path as given) and its own `frame.number` there |
//!
//! ## FLOWREF ([`pcapsleuth_core::FlowRef`])
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `protocol` | `"tcp"` \| `"udp"` \| `"icmp"` | transport |
//! | `client` | string | client address (IPv4 dotted quad, IPv6 RFC 5952); the client sent the first SYN, else the first packet seen |
//! | `client_port` | integer | client port |
//! | `server` | string | server address |
//! | `server_port` | integer | server port |
//!
//! # `analyze --format jsonl` ([`render_jsonl`], [`render_capture_jsonl`])
//!
//! One line per finding and nothing else: a compact JSON object whose first key
//! is `path` (the CAPTURE's `path`), followed by every FINDING field above, in
//! the same order. Lines come in capture input order, then finding order; the
//! CLI prints a capture's lines as soon as it (and every capture before it) is
//! finished. Capture facts and warnings are not part of this stream (errors
//! also go to stderr and the exit status), except that a capture not analysed
//! at all or only in part ends with one status line ([`capture_status_line`],
//! since 1.1): `{"path":…,"record":"capture_error","packets":N,"error":"…"}`
//! or `{"path":…,"record":"capture_incomplete","packets":N,"incomplete":WARNING}`.
//! Finding lines never have a `record` key.
//!
//! # `flows --format json` ([`render_flows_json`])
//!
//! ```json
//! { "schema_version": 1, "captures": [ { "path": "...", "flows": [ FLOW, ... ] } ] }
//! ```
//!
//! Each capture has `path`, `flows` (always present, one FLOW per `tcp.stream`
//! in stream order), only when reading failed `error`, and, only for a merged
//! set (`flows --merge`), `sources` (before `flows`, as in CAPTURE). FLOW is
//! [`FlowReport`]: `tcp_stream`, `client`, `client_port`,
//! `server`, `server_port`, `packets`, `bytes` (IP bytes), `packets_c2s`,
//! `packets_s2c`, `payload_bytes_c2s`, `payload_bytes_s2c`, `first_frame`,
//! `last_frame`, `duration_ms`, `state` (Zeek `conn_state`: `S0`, `S1`, `SF`,
//! `REJ`, `RSTO`, `RSTR`, `RSTOS0`, `RSTRH`, `SH`, `SHR`, `S2`, `S3`, `OTH`),
//! `retransmissions` (`{total, rto, fast, spurious}`), `duplicate_sightings`,
//! `sightings` (`[{frame, interface, ts_ns}]`), `sightings_capped`,
//! `zero_window_ms`, `zero_window_episodes`, `handshake_rtt_ms` (number or
//! null), `rtt_ms` (`{min, avg, max}` or null), `longest_stall_ms`,
//! `longest_stall_frames` (`[start, end]` or null), `mss` (`[client, server]`,
//! each integer or null), `window_scale` (same), `unacked_capped`. Durations in
//! FLOW are floating-point **milliseconds** (the only floats in the format).
//!
//! # Human-readable formats
//!
//! [`render_text`] / [`render_flows_text`] (terminal) and [`render_markdown`]
//! (tickets) are for people and may change between releases; scripts should
//! consume JSON or JSON Lines.

pub mod check;
mod common;
pub mod explain;
pub mod json;
pub mod markdown;
pub mod model;
pub mod text;
pub mod time;
pub mod wire;

pub use check::render_check_line;
pub use explain::{render_detector_list, render_explain, DetectorDoc};
pub use json::{
    capture_status_line, render_capture_jsonl, render_flows_json, render_json, render_jsonl,
};
pub use markdown::render_markdown;
pub use model::*;
pub use text::{render_capture_text, render_flows_text, render_text, TextOptions};
pub use time::{format_duration_s, format_ts_utc};
pub use wire::{
    ConnStateReport, FlowReport, RetransmissionsReport, RttReport, SightingReport,
    WarningKindReport, WarningReport,
};
