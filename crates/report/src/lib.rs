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
//!   "pcapsleuth_version": "0.1.0",
//!   "captures": [ CAPTURE, ... ]
//! }
//! ```
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `schema_version` | integer | always `1` for this format |
//! | `pcapsleuth_version` | string | since 1.1: the version of pcapsleuth that rendered the document ([`TOOL_VERSION`]); also in `flows --format json`, and as the last line of Markdown |
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
//! | `capture_quality` | CAPTURE_QUALITY \| null | since 1.1: what the capture itself lost, cut, doubled or reordered, and the verdict; `null` when the file could not be read at all |
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
//! ## CAPTURE_QUALITY ([`CaptureQualityReport`], 1.1)
//!
//! Judged before any diagnosis, from the frames and the TCP flows
//! (`pcapsleuth_analyze::quality`, rules in `pcapsleuth_detect::quality`).
//! Capture loss is told from network loss: bytes the receiver acknowledged
//! that no frame carried were lost **by the capture** (Wireshark's
//! `tcp.analysis.ack_lost_segment`); a sequence gap a later segment filled
//! was lost (or reordered) **before the capture point**. Detectors see the
//! same facts.
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `verdict` | `"trustworthy"` \| `"use_with_care"` \| `"not_trustworthy"` | the worst verdict of `reasons`; `trustworthy` without reasons |
//! | `reasons` | array of REASON | worst first |
//! | `frames` | integer | frames analysed |
//! | `tcp_flows` | integer | TCP flows (`tcp.stream`s) |
//! | `duplicates_same_interface` | integer | frames that were another sighting of a packet at the same place: same interface, for Linux `-i any` the same kernel interface index and direction, and the same link-layer source address (a routed packet seen on both sides of a router is two places) |
//! | `duplicates_other_interface` | integer | frames that were another sighting on another interface (several capture points: expected, not a reason) |
//! | `capture_lost_bytes` | integer | bytes acknowledged but never captured, all flows |
//! | `capture_loss_flows` | integer | flows with such bytes |
//! | `captured_payload_bytes` | integer | TCP payload bytes captured (duplicate sightings not counted) |
//! | `gap_bytes_filled_late` | integer | bytes of sequence gaps a later segment filled (network loss before the capture point, or reordering) |
//! | `payload_truncated_frames` | integer | frames cut by snaplen (`caplen < len`) in their payload only: **not a reason**, every detector reads headers and takes lengths from the IP header |
//! | `header_truncated_frames` | integer | frames cut by snaplen inside a link, IP, tunnel or transport header |
//! | `one_sided_flows` | integer | TCP flows captured one way only although the captured side acknowledges the other's bytes |
//! | `backwards_across_interfaces` | integer | frames older than the previous frame of the file when that one was captured on another interface (interfaces written unsorted: not a reason) |
//! | `max_backwards_across_ns` | integer | largest such step back, ns |
//! | `interfaces` | array of `{id, frames, if_drop, os_drop, if_recv, stats_start_ns, stats_end_ns, backwards_frames, max_backwards_ns}` | per interface in id order: frames captured, the pcapng Interface Statistics Block counters `isb_ifdrop`, `isb_osdrop`, `isb_ifrecv` (packets) and times `isb_starttime`, `isb_endtime` (ns; each `null` when not recorded; for each counter the last ISB carrying it), frames older than the previous frame on the interface and the largest such step, ns |
//!
//! A REASON ([`QualityReasonReport`]) is an object: `kind`, `verdict` (what
//! this reason alone makes of the capture), then its counts (new kinds may be
//! added):
//!
//! | `kind` | counts | verdict |
//! |---|---|---|
//! | `interface_drops` | `interface`, `dropped` (`isb_ifdrop` + `isb_osdrop`), `captured` (frames) | `not_trustworthy` when `dropped` ≥ 1 % of `dropped + captured`, else `use_with_care` |
//! | `capture_loss` | `flows`, `bytes`, `captured_bytes` | `not_trustworthy` when `bytes` ≥ 1 % of `bytes + captured_bytes`, else `use_with_care` |
//! | `headers_truncated` | `frames`, `of_frames` | `not_trustworthy` at ≥ 10 % of the frames, else `use_with_care` |
//! | `dns_truncated` | `frames` (DNS messages, UDP port 53, that snaplen cut before the end of their first question), `of_frames` (all DNS messages) | `use_with_care`: the DNS detectors cannot read those messages, so their lookups are not examined (since 1.2) |
//! | `icmp_quote_truncated` | `frames` (ICMP/ICMPv6 errors whose quoted packet snaplen cut before the quoted IP header or its ports), `of_frames` (all ICMP errors) | `use_with_care`: which flow those errors are about is unknown to `frag-needed` and `mss-blackhole` (since 1.2) |
//! | `one_sided_flows` | `flows`, `of_flows` | `use_with_care` |
//! | `timestamps_backwards` | `interface`, `frames`, `max_back_ns` | `use_with_care`; only when a step back on one interface exceeds 1 ms (per-CPU timestamping steps back by µs) |
//! | `same_interface_duplicates` | `frames` | `use_with_care` |
//! | `read_incomplete` | `frames` (read) | `use_with_care`: reading stopped early (`incomplete` or `error`) |
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
//! | `kind` | `"truncated_record"` \| `"malformed_record"` \| `"unknown_interface"` \| `"unacked_segment_cap"` \| `"flow_cap"` \| `"detector_limit"` | what happened (new kinds may be added). `unacked_segment_cap` (since 1.1) is about the analysis, not a record: the flow table's unacknowledged-segment cap was hit in the flows its `message` names (`offset` 0, `frame` null), so their retransmission and loss analysis is incomplete. `flow_cap` (since 1.2) likewise: the live-stream cap (`--max-flows`) was hit. `detector_limit` (since 1.2) likewise: a detector reached a capture-wide memory bound (`offset` 0, `frame` the frame where it did; the message names the detector, the bound, how many times it refused something after it, and what that costs its findings: for most, that they say nothing about what was refused) |
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
//! | `udp_stream` | integer | Wireshark `udp.stream` of a UDP finding; omitted otherwise (1.1) |
//! | `streams` | array of STREAMREF | every conversation of a finding that spans more than one (a connection and its NAT-rewritten twin, a query and its retry from another socket); omitted otherwise (1.1) |
//! | `hosts` | array of string | addresses a host-level finding is about (a dual-stack host's IPv4 and IPv6 addresses); omitted when empty (1.1) |
//! | `frames` | array of integer | `frame.number`s proving the finding, ascending, no duplicates |
//! | `start_ts_ns` | integer | timestamp of the earliest cited event, ns |
//! | `end_ts_ns` | integer | timestamp of the latest cited event, ns |
//! | `wireshark_filter` | string | display filter selecting exactly `frames` (`frame.number == 7` or `frame.number in {1,5,9}`) |
//! | `stream_filter` | string \| null | display filter for every conversation of the finding: `tcp.stream eq N`, `udp.stream eq N`, `tcp.stream in {a,b}`, `tcp.stream eq a \|\| udp.stream eq b`; null when none (ICMP) |
//! | `remedy` | string | what to change, one or two sentences |
//! | `evidence` | object | detector-specific facts; keys carry units in their names; key order is fixed per detector |
//! | `source_frames` | array of `{file, frame}` | only for a merged set: for each entry of `frames`, in the same order, the file (path as given) and its own `frame.number` there |
//! | `community_id` | string | since 1.1, last: the [Community ID](https://github.com/corelight/community-id-spec) (v1, seed 0, e.g. `"1:LQU9qZlK+B5F3KDmev6m5PMibrg="`) of `flow`, the id Zeek, Suricata and Elastic give the same connection ([`community_id`]); only for TCP and UDP flows, omitted otherwise |
//!
//! ## FLOWREF ([`pcapsleuth_core::FlowRef`])
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `protocol` | `"tcp"` \| `"udp"` \| `"icmp"` \| `"icmpv6"` | transport ([`pcapsleuth_core::Protocol`], a closed vocabulary; `icmpv6` since 1.1) |
//! | `client` | string | client address (IPv4 dotted quad, IPv6 RFC 5952); the client sent the first SYN, else the first packet seen |
//! | `client_port` | integer | client port |
//! | `server` | string | server address |
//! | `server_port` | integer | server port |
//!
//! ## STREAMREF ([`pcapsleuth_core::StreamRef`], 1.1)
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `protocol` | `"tcp"` \| `"udp"` | which Wireshark index |
//! | `id` | integer | the `tcp.stream` / `udp.stream` |
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
//! or `{"path":…,"record":"capture_incomplete","packets":N,"incomplete":WARNING}`;
//! and a capture whose analysis reached a bound has, after its findings and
//! before any status line, one limits line ([`capture_limits_line`], since
//! 1.2): `{"path":…,"record":"capture_limited","limits":[WARNING,…]}`, its
//! `flow_cap`, `unacked_segment_cap` and `detector_limit` warnings.
//! Finding lines never have a `record` key.
//!
//! # `flows --format json` ([`render_flows_json`])
//!
//! ```json
//! { "schema_version": 1, "captures": [ { "path": "...", "flows": [ FLOW, ... ] } ] }
//! ```
//!
//! Each capture has `path`, `flows` (always present, one FLOW per `tcp.stream`
//! in stream order), only when reading failed `error`, only when it was read
//! in part `incomplete` (as in CAPTURE, since 1.1), `capture_quality` (as in
//! CAPTURE, since 1.1; omitted when unreadable), and, only for a merged
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
//! each integer or null), `window_scale` (same), `unacked_capped`, and, last
//! (since 1.1), `community_id` (as in FINDING, for the TCP flow). Durations in
//! FLOW are floating-point **milliseconds** (the only floats in the format).
//!
//! Since 1.1, a FLOW that stalled also carries its **stall ledger**
//! (`pcapsleuth_ledger`, whose README specifies the vocabulary and the
//! rules): `stalls` (array of `{tcp_stream, dir, cause, start_frame,
//! end_frame, start_ns, end_ns, duration_ms, open_at_capture_end (only when
//! true), evidence: {timer, step, expected_ms, observed_ms, matches_timer,
//! trigger_frame, window_bytes, segment_bytes (each only when known), rule}}`),
//! `stalls_dropped` (only when > 0), `time_lost_by_cause` (array of `{cause,
//! stalls, duration_ms}`) and `stall_summary` (one sentence); all four are
//! omitted when the flow never stalled. A capture whose flows stalled has
//! `time_lost_by_cause` (after `flows`): the per-cause sum over its flows,
//! and `time_lost_by_service`: per server address and port whose connections
//! stalled, `{server, server_port, connections, stalled_connections,
//! duration_ms, time_lost_by_cause}`, by descending `duration_ms`.
//!
//! Since 1.1, a FLOW whose capture lost, cut or doubled something carries
//! `capture_quality` ([`FlowQualityReport`], last; omitted otherwise):
//! `{capture_lost_bytes, capture_loss_acks, first_capture_loss_frame
//! (integer or null), gap_bytes_filled_late, one_sided ("client_to_server" |
//! "server_to_client" | null: the only direction captured),
//! duplicates_same_interface, duplicates_other_interface,
//! payload_truncated_frames}`, with the meanings of CAPTURE_QUALITY for this
//! flow.
//!
//! # `check --format json`, `report merge`
//!
//! `check --format json` writes the `analyze --format json` document (the
//! findings selected by `--only`/`--exclude`/`--min-severity`), so CI shards
//! (`--shard K/N`) can be combined with `report merge` ([`parse_report`],
//! [`merge_reports`]): captures in argument order, everything else derived
//! again on output.
//!
//! # CI formats ([`render_junit`], [`render_github`])
//!
//! `check --format junit`: JUnit XML (valid against Jenkins' `junit-10.xsd`),
//! one `<testcase>` per capture, one `<failure type="DETECTOR">` per finding
//! at or above `--fail-on` (message: severity and summary; body: summary,
//! flow, Wireshark filter, stream filter, remedy), an `<error>` for a capture
//! not read (in full). `check --format github`: GitHub Actions workflow
//! commands, one `::error`/`::warning`/`::notice file=PATH,title=DETECTOR
//! (SEVERITY)::…` per such finding. Neither has times or host names.
//!
//! # Human-readable formats
//!
//! [`render_text`] / [`render_flows_text`] (terminal) and [`render_markdown`]
//! (tickets) are for people and may change between releases; scripts should
//! consume JSON or JSON Lines. Both show repeated findings of one detector on
//! one service or peer as one group with its members ([`group`]); text prints
//! each finding's remedy. Text prints one `capture quality:` line per
//! capture that is not trustworthy (its verdict and reasons); Markdown has a
//! `Capture quality` row in every capture's fact table.

pub mod check;
pub mod ci;
mod common;
pub mod community_id;
pub mod explain;
pub mod group;
pub mod json;
pub mod markdown;
pub mod merge;
pub mod model;
pub mod text;
pub mod time;
pub mod wire;

pub use check::{render_check_line, CheckGate};
pub use ci::{render_github, render_junit};
pub use explain::{render_detector_list, render_explain, DetectorDoc};
pub use json::{
    capture_limits_line, capture_status_line, render_capture_jsonl, render_flows_json, render_json,
    render_jsonl, write_flows_json, write_json,
};
pub use markdown::render_markdown;
pub use merge::{merge_reports, parse_report};
pub use model::*;
pub use text::{render_capture_text, render_flows_text, render_text, TextOptions};
pub use time::{format_duration_s, format_ts_utc};
pub use wire::{
    CaptureQualityReport, ConnStateReport, FlowQualityReport, FlowReport, InterfaceQualityReport,
    QualityReasonReport, QualityVerdictReport, RetransmissionsReport, RttReport, SightingReport,
    WarningKindReport, WarningReport,
};
