//! The streaming reader. (Skeleton: to be implemented.)

use crate::{CaptureFormat, CaptureWarning, Frame, IngestError, InterfaceInfo};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Streaming reader over one capture file. Use it as a lending iterator:
///
/// ```no_run
/// # use pcapsleuth_ingest::CaptureReader;
/// let mut r = CaptureReader::open("x.pcap".as_ref()).unwrap();
/// while let Some(frame) = r.next_frame().unwrap() {
///     let _ = frame.number;
/// }
/// for w in r.warnings() { eprintln!("{}", w.message); }
/// ```
pub struct CaptureReader {
    path: PathBuf,
    _inner: Box<dyn Read + Send>,
    interfaces: Vec<InterfaceInfo>,
    warnings: Vec<crate::CaptureWarning>,
    format: CaptureFormat,
}

impl CaptureReader {
    /// Open a file (`-` means stdin). Detects gzip, pcap and pcapng by magic.
    ///
    /// # Errors
    /// [`IngestError::Io`] if it cannot be opened, [`IngestError::NotACapture`]
    /// if the magic is wrong, [`IngestError::Malformed`] if the header is unreadable.
    pub fn open(path: &Path) -> Result<CaptureReader, IngestError> {
        let f = std::fs::File::open(path).map_err(|source| IngestError::Io { path: path.to_path_buf(), source })?;
        Self::from_reader(path, Box::new(f))
    }

    /// Read a capture from any reader; `path` is only used in messages.
    ///
    /// # Errors
    /// As [`CaptureReader::open`].
    pub fn from_reader(path: &Path, inner: Box<dyn Read + Send>) -> Result<CaptureReader, IngestError> {
        Ok(CaptureReader { path: path.to_path_buf(), _inner: inner, interfaces: Vec::new(), warnings: Vec::new(), format: CaptureFormat::Pcap })
    }

    /// The next packet record, `Ok(None)` at the end of the capture (including
    /// a truncated end, which adds a warning).
    ///
    /// # Errors
    /// Only I/O errors of the underlying reader.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, IngestError> {
        Ok(None)
    }

    /// Interfaces described so far (all of them once the stream has ended).
    pub fn interfaces(&self) -> &[InterfaceInfo] {
        &self.interfaces
    }

    /// Facts about the file recorded while reading (truncation, bad records).
    pub fn warnings(&self) -> &[CaptureWarning] {
        &self.warnings
    }

    /// pcap or pcapng.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// The path given at open.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
