//! Print one line per frame in the layout of
//! `tshark -T fields -e frame.number -e frame.time_epoch -e frame.interface_id -e frame.len -e frame.cap_len`,
//! then the reader's warnings on stderr. Usage: `ingest_dump FILE...` (`-` = stdin).

use pcapsleuth_ingest::CaptureReader;
use std::io::Write;

fn main() {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for arg in std::env::args_os().skip(1) {
        let path = std::path::PathBuf::from(arg);
        let mut r = match CaptureReader::open(&path) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                continue;
            }
        };
        loop {
            match r.next_frame() {
                Ok(Some(f)) => {
                    let (s, ns) = (
                        f.ts.0.div_euclid(1_000_000_000),
                        f.ts.0.rem_euclid(1_000_000_000),
                    );
                    let _ = writeln!(
                        out,
                        "{}\t{s}.{ns:09}\t{}\t{}\t{}",
                        f.number,
                        f.interface,
                        f.orig_len,
                        f.data.len()
                    );
                }
                Ok(None) => break,
                Err(e) => {
                    eprintln!("error: {e}");
                    break;
                }
            }
        }
        let _ = out.flush();
        eprintln!(
            "{}: {} frames, {:?}",
            path.display(),
            r.frame_count(),
            r.format()
        );
        for w in r.warnings() {
            eprintln!(
                "  warning {:?} at {} frame {:?}: {}",
                w.kind, w.offset, w.frame, w.message
            );
        }
    }
}
