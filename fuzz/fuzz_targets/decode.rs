//! First byte selects a link type, the rest is one frame for
//! `pcapsleuth_decode::Decoder::decode`. Two frames are decoded with the same
//! decoder so IP reassembly state is exercised too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pcapsleuth_decode::Decoder;

/// LINKTYPE_* values the decoder is expected to handle, plus one it is not.
const LINKTYPES: [u32; 10] = [0, 1, 12, 101, 108, 113, 228, 229, 276, 147];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let linktype = LINKTYPES[usize::from(sel) % LINKTYPES.len()];
    let mut decoder = Decoder::new();
    let (a, b) = rest.split_at(rest.len() / 2);
    let _ = decoder.decode(linktype, a);
    let _ = decoder.decode(linktype, b);
    let _ = decoder.decode(linktype, rest);
});
