//! Stable-toolchain stand-in for the `fuzz/` ingest target: thousands of
//! deterministic mutations of real capture prefixes (byte flips, hostile
//! length fields, cuts, splices), each read to the end. The reader must
//! never panic, must terminate, must number frames strictly increasingly and
//! must end with at most one warning.

mod common;

use common::{drain, shared_or_skip, Dribble};
use pcapsleuth_ingest::CaptureReader;
use std::path::Path;

/// xorshift64*: deterministic, so a failure names a reproducible case.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: [u32; 10] = [
    0,
    1,
    3,
    11,
    12,
    16,
    0x7fff_ffff,
    0xffff_fff0,
    0xffff_ffff,
    0x0004_0001,
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..=rng.below(4) {
        if b.is_empty() {
            break;
        }
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = rng.next() as u8,
            2 => {
                // Hostile 32-bit value (length fields, interface ids, versions), either byte order.
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let bytes = if rng.below(2) == 0 {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                };
                for (i, x) in bytes.iter().enumerate() {
                    if let Some(slot) = b.get_mut(at + i) {
                        *slot = *x;
                    }
                }
            }
            3 => b.truncate(at),
            4 => {
                let len = rng.below(64).min(b.len() - at);
                let chunk = b[at..at + len].to_vec();
                let to = rng.below(b.len());
                b.splice(to..to, chunk);
            }
            _ => {
                let len = rng.below(32).min(b.len() - at);
                b.drain(at..at + len);
            }
        }
    }
    b
}

fn check(input: Vec<u8>, dribble: bool, case: &str) {
    let gz = input.starts_with(&[0x1f, 0x8b]);
    let len = input.len() as u64;
    let reader = if dribble {
        CaptureReader::from_reader(
            Path::new("m"),
            Box::new(Dribble {
                inner: std::io::Cursor::new(input),
                n: 0,
            }),
        )
    } else {
        CaptureReader::from_reader(Path::new("m"), Box::new(std::io::Cursor::new(input)))
    };
    let Ok(reader) = reader else { return };
    let r = drain(reader).unwrap_or_else(|e| panic!("{case}: in-memory read failed: {e}"));
    assert!(
        r.frames.windows(2).all(|w| w[0].number < w[1].number),
        "{case}: frame numbers not increasing"
    );
    assert!(
        r.frames.last().map_or(0, |f| f.number) <= r.frame_count,
        "{case}: frame_count below last frame"
    );
    // One warning ends the stream; only non-fatal notes (bad if_tsresol) may precede it.
    let terminal = r
        .warnings
        .iter()
        .filter(|w| !w.message.starts_with("if_tsresol"))
        .count();
    assert!(terminal <= 1, "{case}: {:?}", r.warnings);
    assert!(
        gz || r.warnings.iter().all(|w| w.offset <= len),
        "{case}: warning offset past the input: {:?}",
        r.warnings
    );
}

#[test]
fn mutated_captures_never_panic() {
    let Some(shared) = shared_or_skip("mutation robustness") else {
        return;
    };
    let seeds: Vec<Vec<u8>> = [
        "lab/syn-retransmit.pcap",
        "lab/probe-timer-200ms.pcapng",
        "captures/google__gopacket/pcapgo/tests/be/test202.pcapng",
    ]
    .iter()
    .map(|p| {
        let b = std::fs::read(shared.join(p)).expect("seed capture");
        b[..b.len().min(6000)].to_vec()
    })
    .collect();
    let mut rng = Rng(0x5EED_CAFE_F00D_1234);
    let mut read = 0;
    for i in 0..3000 {
        let seed = &seeds[i % seeds.len()];
        let input = mutate(&mut rng, seed);
        let dribble = i % 10 == 0;
        check(input, dribble, &format!("case {i}"));
        read += 1;
    }
    assert_eq!(read, 3000);
}

#[test]
fn random_bytes_after_valid_magics_never_panic() {
    let magics: [&[u8]; 6] = [
        &[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0],
        &[0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4],
        &[0x34, 0xcd, 0xb2, 0xa1, 2, 0, 4, 0],
        &[
            0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0,
        ],
        &[
            0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0x1c, 0x1a, 0x2b, 0x3c, 0x4d, 0, 1, 0, 0,
        ],
        &[0x1f, 0x8b],
    ];
    let mut rng = Rng(42);
    for i in 0..2000 {
        let mut b = magics[i % magics.len()].to_vec();
        let n = rng.below(400);
        b.extend((0..n).map(|_| rng.next() as u8));
        check(b, i % 7 == 0, &format!("random case {i}"));
    }
}
