//! Helpers shared by the ingest integration tests.
#![allow(dead_code)]

use pcapsleuth_ingest::{CaptureReader, CaptureWarning, IngestError};
use std::io::Read;
use std::path::{Path, PathBuf};

/// An owned copy of one [`pcapsleuth_ingest::Frame`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedFrame {
    pub number: u64,
    pub ts: i64,
    pub interface: u32,
    pub linktype: u32,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// Everything a reader produced for one input.
#[derive(Debug)]
pub struct ReadAll {
    pub frames: Vec<OwnedFrame>,
    pub warnings: Vec<CaptureWarning>,
    pub frame_count: u64,
    pub interface_names: Vec<Option<String>>,
}

/// Drain a reader.
pub fn drain(mut r: CaptureReader) -> Result<ReadAll, IngestError> {
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame()? {
        frames.push(OwnedFrame {
            number: f.number.get(),
            ts: f.ts.0,
            interface: f.interface.get(),
            linktype: f.linktype.0,
            orig_len: f.orig_len,
            data: f.data.to_vec(),
        });
    }
    Ok(ReadAll {
        frames,
        warnings: r.warnings().to_vec(),
        frame_count: r.frame_count().get(),
        interface_names: r.interfaces().iter().map(|i| i.name.clone()).collect(),
    })
}

/// Open and drain a file.
pub fn read_path(path: &Path) -> Result<ReadAll, IngestError> {
    drain(CaptureReader::open(path)?)
}

/// Drain a reader built over in-memory bytes.
pub fn read_bytes(bytes: Vec<u8>) -> Result<ReadAll, IngestError> {
    drain(CaptureReader::from_reader(
        Path::new("mem"),
        Box::new(std::io::Cursor::new(bytes)),
    )?)
}

/// The shared corpus, or `None` after printing SKIP (panics under CI).
pub fn shared_or_skip(what: &str) -> Option<PathBuf> {
    match pcapsleuth_testkit::shared_dir() {
        Some(d) => Some(d),
        None => {
            assert!(
                !pcapsleuth_testkit::in_ci(),
                "{what}: ../shared is missing under CI"
            );
            println!("SKIP: {what}: ../shared not found");
            None
        }
    }
}

/// A `Read` that hands out at most 1..=7 bytes per call (a fixed cycle), to
/// check that results do not depend on how the input is chunked.
pub struct Dribble<R> {
    pub inner: R,
    pub n: usize,
}

impl<R: Read> Read for Dribble<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.n = self.n % 7 + 1;
        let k = self.n.min(buf.len());
        self.inner.read(&mut buf[..k])
    }
}
