//! Bytes → `CaptureReader::from_reader` → every frame. Must never panic; the
//! reader must always end (no spinning on a truncated tail).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcapsleuth_ingest::CaptureReader;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = CaptureReader::from_reader(
        Path::new("fuzz"),
        Box::new(std::io::Cursor::new(data.to_vec())),
    ) else {
        return;
    };
    let mut last = 0;
    while let Ok(Some(f)) = r.next_frame() {
        // Frame numbers strictly increase; a packet never exceeds the
        // largest captured length Wireshark accepts (128 MiB, D-Bus/USBPcap).
        assert!(f.number.get() > last);
        assert!(f.data.len() <= 128 * 1024 * 1024);
        last = f.number.get();
    }
    assert!(r.frame_count().get() >= last);
});
