//! Several capture files analysed as **one** capture set (`--merge`): e.g. the
//! per-interface captures of one incident (`tcpdump -i eth0 -w a.pcap` and
//! `tcpdump -i lo -w b.pcap`).
//!
//! Frames are interleaved exactly as `mergecap -w merged.pcapng a.pcap b.pcap`
//! (Wireshark 4.0 `ui/merge.c`, `merge_read_packet`) interleaves them, so the
//! set's frame numbers are the `frame.number`s of that mergecap output and a
//! finding's `wireshark_filter` works on it:
//!
//! - each file is read in its own order (files are not re-sorted);
//! - the next frame is the head frame with the earliest timestamp; on a tie
//!   the **later** file in input order wins (mergecap's `is_earlier()` is true
//!   for equal times and the scan goes from the first file to the last, so the
//!   last of the tied files is kept). Checked against mergecap 4.0.17 output
//!   by `tests/merge.rs`;
//! - interface ids: every file's interfaces follow those of the files before
//!   it (file 0's first), as `mergecap -I none` numbers them. Plain
//!   `mergecap` (`-I all`) would collapse identical interface lists of all
//!   files into one; frame numbers do not depend on that choice, and distinct
//!   ids keep two files' sightings of one packet apart in the flow table.
//!
//! Streaming: only the head frame of each file is kept (copied into a
//! per-file reusable buffer), plus a run-length map from merged frame numbers
//! to (file, frame) with one entry per switch between files.
//!
//! Known differences from mergecap (none occur in tcpdump/dumpcap output):
//! pcapng simple packet blocks (no timestamp) take the previous packet's time
//! here, whereas mergecap emits them as soon as they are read; non-packet
//! records that Wireshark numbers (custom, journal, sysdig blocks) are placed
//! right before the next packet of their file; `if_tsoffset` is applied here
//! before comparing times.

use crate::{empty_report, fill_report, format_name, interface_report, AnalyzeOptions, Driver};
use pcapsleuth_core::finding::SourceFrame;
use pcapsleuth_core::{FrameNo, InterfaceId, Timestamp};
use pcapsleuth_ingest::{CaptureReader, Frame, InterfaceInfo, LinkType};
use pcapsleuth_report::{CaptureReport, InterfaceReport, SourceReport, WarningReport};
use std::path::{Path, PathBuf};

/// A copy of one file's next frame.
#[derive(Debug)]
struct Head {
    number: FrameNo,
    ts: Timestamp,
    interface: InterfaceId,
    linktype: LinkType,
    orig_len: u32,
    data: Vec<u8>,
}

/// One input file of the set.
struct Source {
    path: PathBuf,
    reader: Option<CaptureReader>,
    head: Head,
    has_head: bool,
    error: Option<String>,
    /// Opening it failed for lack of file descriptors (EMFILE/ENFILE).
    no_descriptor: bool,
    /// Local interface id → merged id.
    iface_map: Vec<Option<InterfaceId>>,
    /// Source frame number of the last frame emitted from this file.
    last_number: FrameNo,
}

impl Source {
    /// Read the next frame of this file into `head` (`has_head` false at the end
    /// or on an error, which is recorded).
    fn fill(&mut self) {
        self.has_head = false;
        let Some(reader) = self.reader.as_mut() else {
            return;
        };
        match reader.next_frame() {
            Ok(Some(f)) => {
                self.head.number = f.number;
                self.head.ts = f.ts;
                self.head.interface = f.interface;
                self.head.linktype = f.linktype;
                self.head.orig_len = f.orig_len;
                self.head.data.clear();
                self.head.data.extend_from_slice(f.data);
                self.has_head = true;
            }
            Ok(None) => {}
            Err(e) => self.error = Some(e.to_string()),
        }
    }
}

/// A run of consecutive merged frames that all come from one file.
#[derive(Debug, Clone, Copy)]
struct Run {
    merged_start: FrameNo,
    src_start: FrameNo,
    file: usize,
}

/// One frame of a merged set.
#[derive(Debug, Clone, Copy)]
pub struct MergedFrame<'a> {
    /// The frame, with `number` the merged (mergecap output) `frame.number`
    /// and `interface` the merged interface id.
    pub frame: Frame<'a>,
    /// Index of the file it came from, in input order.
    pub source: usize,
    /// Its `frame.number` within that file.
    pub source_frame: FrameNo,
}

/// Streaming k-way merge of several captures in mergecap order (see the
/// module documentation). A lending iterator, like [`CaptureReader`].
pub struct MergeReader {
    sources: Vec<Source>,
    next_iface: InterfaceId,
    /// Merged frame number of the last frame returned.
    number: FrameNo,
    /// File whose head was handed out last and must be refilled.
    refill: Option<usize>,
    last_source: Option<usize>,
    runs: Vec<Run>,
}

impl MergeReader {
    /// Open every file and read its first frame. Never fails: a file that
    /// cannot be opened is recorded (see [`MergeReader::errors`]) and
    /// contributes no frames, so frame numbers are then those of mergecap over
    /// the readable files.
    pub fn open(paths: &[PathBuf]) -> MergeReader {
        let mut sources: Vec<Source> = paths
            .iter()
            .map(|p| {
                let (reader, error, no_descriptor) = match CaptureReader::open(p) {
                    Ok(r) => (Some(r), None, false),
                    Err(e) => {
                        // EMFILE (24) / ENFILE (23): out of descriptors.
                        let fds = matches!(&e, pcapsleuth_ingest::IngestError::Io { source, .. }
                            if matches!(source.raw_os_error(), Some(23 | 24)));
                        (None, Some(e.to_string()), fds)
                    }
                };
                Source {
                    path: p.clone(),
                    reader,
                    head: Head {
                        number: FrameNo(0),
                        ts: Timestamp(0),
                        interface: InterfaceId(0),
                        linktype: LinkType(0),
                        orig_len: 0,
                        data: Vec::new(),
                    },
                    has_head: false,
                    error,
                    no_descriptor,
                    iface_map: Vec::new(),
                    last_number: FrameNo(0),
                }
            })
            .collect();
        let mut next_iface = InterfaceId(0);
        for s in &mut sources {
            s.fill();
            // Interfaces described before the first packet (all of them for
            // tcpdump/dumpcap output) are numbered now, file by file.
            let n = s.reader.as_ref().map_or(0, |r| r.interfaces().len());
            for _ in 0..n {
                s.iface_map.push(Some(next_iface));
                next_iface = InterfaceId(next_iface.0.saturating_add(1));
            }
        }
        MergeReader {
            sources,
            next_iface,
            number: FrameNo(0),
            refill: None,
            last_source: None,
            runs: Vec::new(),
        }
    }

    /// Merged id of `local` interface of file `i`, numbering interfaces first
    /// described after the file's first packet after all others.
    fn merged_iface(&mut self, i: usize, local: InterfaceId) -> InterfaceId {
        let next = &mut self.next_iface;
        let Some(s) = self.sources.get_mut(i) else {
            return local;
        };
        let idx = local.index();
        if s.iface_map.len() <= idx {
            s.iface_map.resize(idx + 1, None);
        }
        match s.iface_map.get_mut(idx) {
            Some(Some(id)) => *id,
            Some(slot) => {
                let id = *next;
                *next = InterfaceId(next.0.saturating_add(1));
                *slot = Some(id);
                id
            }
            None => local,
        }
    }

    /// The next frame of the set, `None` when every file has ended (or failed;
    /// see [`MergeReader::errors`]).
    pub fn next_frame(&mut self) -> Option<MergedFrame<'_>> {
        if let Some(i) = self.refill.take() {
            if let Some(s) = self.sources.get_mut(i) {
                s.fill();
            }
        }
        // mergecap's linear scan: strictly later times lose, equal times go to
        // the later file.
        let mut best: Option<(usize, i64)> = None;
        for (i, s) in self.sources.iter().enumerate() {
            let earlier = match best {
                None => true,
                Some((_, t)) => s.head.ts.0 <= t,
            };
            if s.has_head && earlier {
                best = Some((i, s.head.ts.0));
            }
        }
        let (i, _) = best?;
        let (number, last, local) = {
            let s = self.sources.get(i)?;
            (s.head.number.0, s.last_number.0, s.head.interface)
        };
        // Records numbered by Wireshark but not returned by the reader
        // (non-packet blocks) sit right before this packet.
        let gap = number.saturating_sub(last).max(1);
        self.number = FrameNo(self.number.0.saturating_add(gap));
        if self.last_source != Some(i) {
            self.runs.push(Run {
                merged_start: FrameNo(self.number.0.saturating_sub(gap - 1)),
                src_start: FrameNo(number.saturating_sub(gap - 1)),
                file: i,
            });
            self.last_source = Some(i);
        }
        let interface = self.merged_iface(i, local);
        self.refill = Some(i);
        let merged = self.number;
        let s = self.sources.get_mut(i)?;
        s.last_number = FrameNo(number);
        let h = &s.head;
        Some(MergedFrame {
            frame: Frame {
                number: merged,
                ts: h.ts,
                interface,
                linktype: h.linktype,
                orig_len: h.orig_len,
                data: &h.data,
            },
            source: i,
            source_frame: FrameNo(number),
        })
    }

    /// Where merged frame `merged` (returned earlier) came from:
    /// `(file index, frame.number in that file)`. `None` for 0 or a number
    /// not yet returned.
    pub fn locate(&self, merged: FrameNo) -> Option<(usize, FrameNo)> {
        if merged == 0 || merged > self.number {
            return None;
        }
        let k = self
            .runs
            .partition_point(|r| r.merged_start <= merged)
            .checked_sub(1)?;
        let r = self.runs.get(k)?;
        Some((
            r.file,
            FrameNo(r.src_start.0 + (merged.0 - r.merged_start.0)),
        ))
    }

    /// When some files could not be opened because the process or system ran
    /// out of file descriptors (`EMFILE`/`ENFILE`: the set holds every file
    /// open at once), the error for the whole set: merging the others would
    /// silently cover a subset.
    pub fn out_of_descriptors(&self) -> Option<String> {
        let failed = self.sources.iter().filter(|s| s.no_descriptor).count();
        (failed > 0).then(|| {
            format!(
                "--merge holds every input open at once, and {failed} of {} inputs could not be opened for lack of file descriptors (too many open files); nothing was analysed: raise the limit (`ulimit -n`, at least {} here) or merge fewer files",
                self.sources.len(),
                self.sources.len() + 16
            )
        })
    }

    /// Errors so far, one per file that could not be opened or read to the end
    /// (each message names its file).
    pub fn errors(&self) -> Vec<String> {
        self.sources
            .iter()
            .filter_map(|s| s.error.clone())
            .collect()
    }

    /// File `i`'s interfaces, with their merged ids.
    fn file_interfaces(&mut self, i: usize) -> Vec<InterfaceInfo> {
        let locals: Vec<InterfaceInfo> = self
            .sources
            .get(i)
            .and_then(|s| s.reader.as_ref())
            .map(|r| r.interfaces().to_vec())
            .unwrap_or_default();
        locals
            .into_iter()
            .map(|mut info| {
                info.id = self.merged_iface(i, info.id);
                info
            })
            .collect()
    }

    /// Every file's interfaces with their merged ids, in merged id order.
    /// Call after the last frame.
    pub fn interfaces(&mut self) -> Vec<InterfaceInfo> {
        let mut out: Vec<InterfaceInfo> = (0..self.sources.len())
            .flat_map(|i| self.file_interfaces(i))
            .collect();
        out.sort_by_key(|i| i.id);
        out
    }

    /// Per-file facts for the report: format, frame count, interfaces (with
    /// merged ids), warnings and error. Call after the last frame.
    pub fn source_reports(&mut self) -> Vec<SourceReport> {
        let mut out = Vec::with_capacity(self.sources.len());
        for i in 0..self.sources.len() {
            let interfaces = self
                .file_interfaces(i)
                .iter()
                .map(interface_report)
                .collect();
            let Some(s) = self.sources.get(i) else {
                continue;
            };
            out.push(SourceReport {
                path: s.path.display().to_string(),
                format: s.reader.as_ref().map(|r| format_name(r.format())),
                packets: s.reader.as_ref().map_or(0, |r| r.frame_count().get()),
                interfaces,
                warnings: s
                    .reader
                    .as_ref()
                    .map(|r| r.warnings().iter().map(WarningReport::from).collect())
                    .unwrap_or_default(),
                error: s.error.clone(),
                incomplete: match (&s.error, &s.reader) {
                    (None, Some(r)) => r.stop_warning().map(WarningReport::from),
                    _ => None,
                },
            });
        }
        out
    }
}

/// The `path` of a merged set: the inputs joined with `+` (`a.pcap+b.pcap`).
pub fn merged_path(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join("+")
}

/// Analyse several captures as one merged set (see the module documentation).
/// Never fails: files that cannot be read are named in `error` (joined with
/// `; `) and in their `sources` entry; the others are still analysed.
///
/// The report's `path` is [`merged_path`], `format` is `"pcapng"` (the
/// format of the mergecap output its frame numbers refer to; each file's own
/// format is in `sources`), `interfaces` lists every file's interfaces with
/// merged ids, `warnings` holds every file's warnings with the file's path
/// prefixed to the message (`offset` and `frame` stay relative to that file),
/// `packets` is the sum of the files' frame counts, and every finding's
/// `source_frames` maps its `frames` back to (file, frame).
pub fn analyze_merged(paths: &[PathBuf], opts: &AnalyzeOptions) -> CaptureReport {
    let mut report = empty_report(Path::new(""));
    report.path = merged_path(paths);
    let mut merge = MergeReader::open(paths);
    if let Some(e) = merge.out_of_descriptors() {
        // Merging a subset would be silently wrong: refuse the whole set.
        report.error = Some(e);
        report.sources = merge.source_reports();
        return report;
    }
    let mut pipe = Driver::new(opts);
    while let Some(mf) = merge.next_frame() {
        pipe.push(&mf.frame);
    }
    let out = pipe.finish(&merge.interfaces());
    let flow_cap = crate::flow_cap_warning(&out.flow_stats, opts);
    let limits = crate::detector_limit_warnings(&out.detector_limits);
    fill_report(&mut report, out, opts);
    for f in &mut report.findings {
        f.source_frames = f
            .frames
            .iter()
            .filter_map(|&n| merge.locate(FrameNo(n)))
            .filter_map(|(file, frame)| {
                let path = paths.get(file)?;
                Some(SourceFrame {
                    file: path.display().to_string(),
                    frame: frame.get(),
                })
            })
            .collect();
    }
    let sources = merge.source_reports();
    // As for one file: every numbered record counts, including non-packet
    // blocks at the end of a file (see `analyze_path`).
    report.packets = sources.iter().map(|s| s.packets).sum();
    if sources.iter().any(|s| s.format.is_some()) {
        report.format = Some("pcapng".to_string());
    }
    report.incomplete = sources.iter().find_map(|s| {
        s.incomplete.clone().map(|mut w| {
            w.message = format!("{}: {}", s.path, w.message);
            w
        })
    });
    let mut interfaces: Vec<InterfaceReport> = sources
        .iter()
        .flat_map(|s| s.interfaces.iter().cloned())
        .collect();
    interfaces.sort_by_key(|i| i.id);
    report.interfaces = interfaces;
    for s in &sources {
        for w in &s.warnings {
            let mut w = w.clone();
            w.message = format!("{}: {}", s.path, w.message);
            report.warnings.push(w);
        }
    }
    report.warnings.extend(flow_cap);
    report.warnings.extend(limits);
    let errors = merge.errors();
    if !errors.is_empty() {
        report.error = Some(errors.join("; "));
    }
    if report.format.is_none() {
        report.capture_quality = None;
    }
    crate::note_read_incomplete(&mut report);
    report.sources = sources;
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A legacy pcap (ns resolution, Ethernet) with one frame per
    /// (timestamp ns, first data byte).
    fn pcap(frames: &[(i64, u8)]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        v.extend_from_slice(&2u16.to_le_bytes());
        v.extend_from_slice(&4u16.to_le_bytes());
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(&65535u32.to_le_bytes());
        v.extend_from_slice(&1u32.to_le_bytes());
        for &(ts, tag) in frames {
            let secs = (ts / 1_000_000_000) as u32;
            let ns = (ts % 1_000_000_000) as u32;
            v.extend_from_slice(&secs.to_le_bytes());
            v.extend_from_slice(&ns.to_le_bytes());
            v.extend_from_slice(&14u32.to_le_bytes());
            v.extend_from_slice(&14u32.to_le_bytes());
            let mut data = [0u8; 14];
            data[0] = tag;
            v.extend_from_slice(&data);
        }
        v
    }

    /// `files` written to `0.pcap`, `1.pcap`, … in a scratch directory
    /// (removed when the returned guard is dropped).
    fn scratch(name: &str, files: &[Vec<u8>]) -> (pcapsleuth_testkit::Scratch, Vec<PathBuf>) {
        let d = pcapsleuth_testkit::scratch(&format!("merge-{name}"));
        let paths = files
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let p = d.join(format!("{i}.pcap"));
                std::fs::write(&p, bytes).expect("write scratch capture");
                p
            })
            .collect();
        (d, paths)
    }

    /// (merged number, tag byte, source, source frame, interface) for every frame.
    fn order(paths: &[PathBuf]) -> Vec<(u64, u8, usize, u64, u32)> {
        let mut m = MergeReader::open(paths);
        let mut out = Vec::new();
        while let Some(f) = m.next_frame() {
            let tag = f.frame.data.first().copied().unwrap_or(0);
            out.push((
                f.frame.number.get(),
                tag,
                f.source,
                f.source_frame.get(),
                f.frame.interface.get(),
            ));
        }
        for &(n, _, src, sf, _) in &out {
            assert_eq!(
                m.locate(FrameNo(n)),
                Some((src, FrameNo(sf))),
                "locate({n})"
            );
        }
        assert_eq!(m.locate(FrameNo(0)), None);
        assert_eq!(m.locate(FrameNo(out.len() as u64 + 1)), None);
        out
    }

    #[test]
    fn interleaves_by_time_and_ties_go_to_the_later_file() {
        let a = pcap(&[(10, 0xa1), (20, 0xa2), (30, 0xa3), (50, 0xa4)]);
        let b = pcap(&[(20, 0xb1), (20, 0xb2), (40, 0xb3)]);
        let c = pcap(&[(20, 0xc1)]);
        let (_dir, paths) = scratch("ties", &[a, b, c]);
        let got: Vec<(u64, u8, usize, u64, u32)> = order(&paths);
        assert_eq!(
            got,
            vec![
                (1, 0xa1, 0, 1, 0),
                (2, 0xc1, 2, 1, 2),
                (3, 0xb1, 1, 1, 1),
                (4, 0xb2, 1, 2, 1),
                (5, 0xa2, 0, 2, 0),
                (6, 0xa3, 0, 3, 0),
                (7, 0xb3, 1, 3, 1),
                (8, 0xa4, 0, 4, 0),
            ]
        );
    }

    #[test]
    fn unreadable_file_is_reported_and_others_merged() {
        let a = pcap(&[(5, 1), (7, 2)]);
        let (_dir, mut paths) = scratch("bad", &[a, b"not a capture".to_vec()]);
        paths.push(PathBuf::from("/nonexistent/pcapsleuth/x.pcap"));
        let got = order(&paths);
        assert_eq!(got.len(), 2);
        let r = analyze_merged(&paths, &AnalyzeOptions::default());
        assert_eq!(r.packets, 2);
        assert_eq!(r.sources.len(), 3);
        assert_eq!(r.sources[0].packets, 2);
        assert!(r.sources[1].error.is_some() && r.sources[2].error.is_some());
        let err = r.error.expect("error set");
        assert!(err.contains("1.pcap") && err.contains("x.pcap"), "{err}");
        assert_eq!(r.path, merged_path(&paths));
        assert!(r.path.contains('+'));
    }

    #[test]
    fn empty_set_has_no_frames() {
        let mut m = MergeReader::open(&[]);
        assert!(m.next_frame().is_none());
        assert!(m.source_reports().is_empty());
    }
}
