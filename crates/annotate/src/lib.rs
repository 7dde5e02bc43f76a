//! The Wireshark companion capture: `pcapsleuth annotate INPUT -o OUT.pcapng`.
//!
//! [`annotate`] re-reads the input capture with
//! [`pcapsleuth_ingest::CaptureReader`] and writes a pcapng copy in which every
//! frame cited by a finding carries one packet comment (`opt_comment`, pcapng
//! spec draft-ietf-opsawg-pcapng §3.5) per citing finding, worded
//! `pcapsleuth <detector>: <role>`, where the role says what that frame is in
//! the finding ("SYN retry 2 of 3, +1006 ms", "self-addressed frag-needed,
//! MTU 1400", "lost between cni0 and eth0", "DNS AAAA query re-sent after
//! 5000 ms"; see [`roles`]). The first cited frame of a finding also carries
//! its summary. Open it in Wireshark and filter with `frame.comment` (or
//! `pkt_comment` in older releases) to jump from one finding to the next.
//!
//! # What is preserved
//!
//! - **Frame numbers.** Exactly one Enhanced Packet Block per input packet, in
//!   input order. Wireshark 4.0 also numbers some non-packet records (pcapng
//!   custom, systemd-journal and sysdig blocks, see
//!   [`CaptureReader`]); the reader skips
//!   them, so for each number it skipped we write one placeholder Custom Block
//!   (type `0x00000BAD`, PEN 0, body `pcapsleuth: non-packet record not
//!   copied`) which Wireshark numbers as a frame too. Frame numbers cited by
//!   the report therefore still select the same packets.
//! - **Bytes, lengths, timestamps.** Captured bytes and `orig_len` are copied
//!   verbatim; every IDB says `if_tsresol = 9`, so the integer-ns timestamp of
//!   each frame (after the input's own `if_tsresol`/`if_tsoffset`) is written
//!   exactly. Legacy pcap (µs or ns) converts losslessly.
//! - **Comments and options of the input.** The section's comments,
//!   `shb_hardware` and `shb_os` (of the first section), every IDB's options
//!   (`if_description`, `if_filter`, `if_os`, comments, …) and every EPB's
//!   options (packet comments, `epb_flags` direction, drop count, hash, packet
//!   id, queue, verdict) are copied, converted to little-endian; the new
//!   comments come after the input's own.
//! - **Interfaces.** One IDB per input interface, same link type, snaplen and
//!   `if_name`, in the input's order. All are written into one section: for
//!   a multi-section input the interface ids are the file-wide ids used by
//!   pcapsleuth (tshark 4.0 prints section-local ids there).
//!
//! Timestamps before 1970 cannot be expressed as an unsigned pcapng timestamp
//! and are written as 0 (counted in [`AnnotateStats::clamped_timestamps`]).
//! A capture that ends in a truncated or malformed record is copied up to that
//! record, as the analysis saw it, and [`AnnotateStats::stopped`] says why
//! (the CLI prints it as a warning).
//!
//! # Why a hand-written writer
//!
//! `pcap-file` 2.x's `PcapNgWriter` writes EPB timestamps assuming the default
//! microsecond resolution regardless of the IDB's `if_tsresol`, which would
//! lose nanoseconds; its 3.0 line is still a release candidate. The subset
//! needed here (SHB, IDB, EPB and custom blocks with options, little-endian)
//! is about a hundred lines in [`writer`], so no dependency is taken.

pub mod options;
pub mod roles;
pub mod writer;

use pcapsleuth_core::Finding;
use pcapsleuth_decode::Decoder;
use pcapsleuth_ingest::{CaptureReader, IngestError};
use pcapsleuth_report::CaptureReport;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use writer::{Idb, NgWriter};

/// What [`annotate`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AnnotateStats {
    /// Enhanced Packet Blocks written (one per input packet).
    pub packets: u64,
    /// Placeholder custom blocks written for non-packet frames of the input.
    pub placeholders: u64,
    /// Interface Description Blocks written.
    pub interfaces: u64,
    /// Packets that carry at least one comment.
    pub annotated_packets: u64,
    /// Comments written (one per citing finding per packet).
    pub comments: u64,
    /// Frame numbers cited by the report that the input did not contain (they
    /// got no comment).
    pub missing_frames: u64,
    /// Packets whose timestamp was before 1970 and was written as 0.
    pub clamped_timestamps: u64,
    /// Packets whose own options (comments, `epb_flags`, …) were copied.
    pub kept_options_packets: u64,
    /// Why reading stopped before the end of the input (a truncated or
    /// malformed record), from the reader's stop warning; the copy ends
    /// there.
    pub stopped: Option<String>,
}

impl AnnotateStats {
    /// One line for the user: `wrote OUT: 12 frames, 3 annotated frames, 4
    /// comments from 2 findings`, followed by the placeholders, missing
    /// cited frames and clamped timestamps when there are any. `findings` is
    /// the number of findings of the report that was applied.
    pub fn summary(&self, output: &Path, findings: u64) -> String {
        let frames = self.packets + self.placeholders;
        let mut line = format!(
            "wrote {}: {}, {}, {} from {}",
            output.display(),
            count(frames, "frame"),
            count(self.annotated_packets, "annotated frame"),
            count(self.comments, "comment"),
            count(findings, "finding"),
        );
        if self.placeholders > 0 {
            line.push_str(&format!(
                "; {} kept as placeholders",
                count(self.placeholders, "non-packet record")
            ));
        }
        if self.missing_frames > 0 {
            line.push_str(&format!(
                "; {} not in the input",
                count(self.missing_frames, "cited frame")
            ));
        }
        if self.clamped_timestamps > 0 {
            line.push_str(&format!(
                "; {} written as 0",
                count(self.clamped_timestamps, "pre-1970 timestamp")
            ));
        }
        if let Some(why) = &self.stopped {
            line.push_str(&format!(
                "\nwarning: the input is truncated or damaged, the copy ends where reading stopped: {why}"
            ));
        }
        line
    }
}

/// `1 frame` / `2 frames`.
fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Why [`annotate`] failed.
#[derive(Debug, thiserror::Error)]
pub enum AnnotateError {
    /// Reading the input capture failed.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// Writing the output failed.
    #[error("{path}: {source}")]
    Write {
        /// Output file.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The report is of a merged capture set (`analyze --merge`): its frame
    /// numbers are those of the merged set, not of any one input file.
    /// Merge the files with `mergecap` first and analyse that file instead.
    #[error("the report is of a merged capture set ({0} files); annotate a single capture (mergecap the files first)")]
    MergedReport(usize),
    /// The output path names the input file.
    #[error("{0}: refusing to overwrite the input capture")]
    SameFile(PathBuf),
}

/// The comment text for one finding: `pcapsleuth <detector>: <summary>`.
/// Line breaks in the summary are replaced by spaces so the comment stays on
/// one line in Wireshark's packet list.
pub fn comment_for(f: &Finding) -> String {
    let summary: String = f
        .summary
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    format!("pcapsleuth {}: {}", f.detector, summary)
}

/// Indices (into `report.findings`) of the findings citing each frame number,
/// in report (finding) order.
pub fn findings_by_frame(report: &CaptureReport) -> BTreeMap<u64, Vec<usize>> {
    let mut map: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, f) in report.findings.iter().enumerate() {
        for &n in &f.frames {
            let v = map.entry(n).or_default();
            if !v.contains(&i) {
                v.push(i);
            }
        }
    }
    map
}

/// The whole-finding comments ([`comment_for`]) per cited frame number, in
/// report (finding) order. [`annotate`] writes per-frame roles instead; this
/// is the one-line form for other tools.
pub fn comments_by_frame(report: &CaptureReport) -> BTreeMap<u64, Vec<String>> {
    let mut map: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for f in &report.findings {
        let text = comment_for(f);
        for &n in &f.frames {
            let v = map.entry(n).or_default();
            if !v.contains(&text) {
                v.push(text.clone());
            }
        }
    }
    map
}

/// Write `out` (pcapng): the capture `input` with one packet comment per
/// finding of `report` on every frame that finding cites. See the crate
/// documentation for what is preserved.
///
/// # Errors
/// [`AnnotateError::Ingest`] if `input` cannot be opened or read (a truncated
/// tail is not an error: the frames before it are written),
/// [`AnnotateError::Write`] if `out` cannot be created or written,
/// [`AnnotateError::SameFile`] if `out` is `input`.
pub fn annotate(
    input: &Path,
    report: &CaptureReport,
    out: &Path,
) -> Result<AnnotateStats, AnnotateError> {
    if let (Ok(a), Ok(b)) = (input.canonicalize(), out.canonicalize()) {
        if a == b {
            return Err(AnnotateError::SameFile(out.to_path_buf()));
        }
    }
    let mut reader = CaptureReader::open(input)?;
    let werr = |source| AnnotateError::Write {
        path: out.to_path_buf(),
        source,
    };
    let file = File::create(out).map_err(werr)?;
    let mut w = NgWriter::new(BufWriter::with_capacity(256 * 1024, file));
    let shb_options = reader
        .header_blocks()
        .first()
        .map(|b| options::section_options(b))
        .unwrap_or_default();
    w.section_header("pcapsleuth-annotate", &shb_options)
        .map_err(werr)?;
    let citing = findings_by_frame(report);
    let mut states = vec![roles::RoleState::default(); report.findings.len()];
    let mut decoder = Decoder::new();
    let mut stats = AnnotateStats::default();
    let mut idbs_written: usize = 0;
    let mut expected: u64 = 1;
    let mut cited_seen: u64 = 0;
    let mut data: Vec<u8> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    loop {
        // `Frame` borrows the reader (lending iterator): copy what we need so
        // that `interfaces()` can be consulted afterwards.
        let (number, ts, iface, orig_len, linktype) = match reader.next_frame()? {
            None => break,
            Some(frame) => {
                data.clear();
                data.extend_from_slice(frame.data);
                (
                    frame.number.get(),
                    frame.ts.0,
                    frame.interface.index(),
                    frame.orig_len,
                    frame.linktype.0,
                )
            }
        };
        let kept = options::packet_options(reader.record_bytes());
        // Non-packet frames skipped by the reader: keep numbering aligned.
        while expected < number {
            w.placeholder().map_err(werr)?;
            stats.placeholders += 1;
            expected += 1;
        }
        expected = number.saturating_add(1);
        // Interfaces are announced by the reader as it meets their IDBs;
        // write every IDB up to the one this packet needs.
        idbs_written =
            write_idbs(&mut w, &reader, idbs_written, iface + 1, Some(linktype)).map_err(werr)?;
        notes.clear();
        if let Some(idx) = citing.get(&number) {
            let facts = roles::FrameFacts::of(&mut decoder, linktype, &data, ts);
            frame_notes(report, idx, number, &facts, &mut states, &mut notes);
            stats.annotated_packets += 1;
            stats.comments += notes.len() as u64;
            cited_seen += 1;
        }
        let ts = u64::try_from(ts).unwrap_or_else(|_| {
            stats.clamped_timestamps += 1;
            0
        });
        if !kept.is_empty() {
            stats.kept_options_packets += 1;
        }
        let if_id = u32::try_from(iface).unwrap_or(u32::MAX);
        w.packet(if_id, ts, orig_len, &data, &kept, &notes)
            .map_err(werr)?;
        stats.packets += 1;
    }
    // Interfaces without packets are kept too.
    let total = reader.interfaces().len();
    idbs_written = write_idbs(&mut w, &reader, idbs_written, total, None).map_err(werr)?;
    // Non-packet frames after the last packet.
    while expected <= reader.frame_count().get() {
        w.placeholder().map_err(werr)?;
        stats.placeholders += 1;
        expected += 1;
    }
    stats.interfaces = idbs_written as u64;
    stats.missing_frames = (citing.len() as u64).saturating_sub(cited_seen);
    stats.stopped = reader.stop_warning().map(|w| w.message.clone());
    w.finish().map_err(werr)?;
    Ok(stats)
}

/// The comments of one cited frame: per citing finding (`idx`), `pcapsleuth
/// <detector>: <role>` ([`roles::role`]), followed on the finding's first
/// cited frame by its summary; identical texts are written once.
fn frame_notes(
    report: &CaptureReport,
    idx: &[usize],
    number: u64,
    facts: &roles::FrameFacts,
    states: &mut [roles::RoleState],
    notes: &mut Vec<String>,
) {
    for &i in idx {
        let (Some(f), Some(st)) = (report.findings.get(i), states.get_mut(i)) else {
            continue;
        };
        let role = one_line(&roles::role(f, number, facts, st));
        let text = if f.frames.iter().min() == Some(&number) {
            format!(
                "pcapsleuth {}: {role}. {}",
                f.detector,
                one_line(&f.summary)
            )
        } else {
            format!("pcapsleuth {}: {role}", f.detector)
        };
        if !notes.contains(&text) {
            notes.push(text);
        }
    }
}

/// `s` with line breaks replaced by spaces, so a comment stays on one line
/// in Wireshark's packet list.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect()
}

/// Write the IDBs `from..to` of the reader's interface list; returns how many
/// IDBs have been written in total. An interface the reader does not know (a
/// packet naming a missing IDB, reported by the reader as a warning) gets an
/// IDB with the packet's link type (`fallback`) and no snaplen, so that every
/// EPB refers to an existing IDB; with `fallback` `None` writing stops there.
fn write_idbs<W: Write>(
    w: &mut NgWriter<W>,
    reader: &CaptureReader,
    from: usize,
    to: usize,
    fallback: Option<u32>,
) -> std::io::Result<usize> {
    let ifaces = reader.interfaces();
    // The n-th IDB of the file is interface n (ids are file-wide).
    let idb_blocks: Vec<Vec<options::RawOption>> = reader
        .header_blocks()
        .iter()
        .filter_map(|b| options::interface_options(b))
        .collect();
    let mut n = from;
    while n < to {
        let idb = match (ifaces.get(n), fallback) {
            (Some(i), _) => Idb {
                linktype: i.linktype.0,
                snaplen: i.snaplen,
                name: i.name.clone(),
                options: idb_blocks.get(n).cloned().unwrap_or_default(),
            },
            (None, Some(lt)) => Idb {
                linktype: lt,
                snaplen: 0,
                name: None,
                options: Vec::new(),
            },
            (None, None) => break,
        };
        w.interface(&idb)?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line() {
        let st = AnnotateStats {
            packets: 11,
            placeholders: 1,
            interfaces: 1,
            annotated_packets: 1,
            comments: 2,
            missing_frames: 0,
            clamped_timestamps: 1,
            kept_options_packets: 0,
            stopped: None,
        };
        assert_eq!(
            st.summary(Path::new("o.pcapng"), 1),
            "wrote o.pcapng: 12 frames, 1 annotated frame, 2 comments from 1 finding; \
             1 non-packet record kept as placeholders; 1 pre-1970 timestamp written as 0"
        );
    }
}
