//! Property: adding a constant to every sequence and acknowledgement number of
//! a real capture (so that ISNs straddle 2^32) changes nothing the flow table
//! reports except the raw numbers: same `tcp.stream` ids, relative offsets,
//! stalls, window changes, ICMP matches and classifications.

use pcapsleuth_core::SeqNum;
use pcapsleuth_decode::{Decoded, Decoder, Transport};
use pcapsleuth_flow::{FlowConfig, FlowEvent, FlowTable, L4Fingerprint, PacketMeta};
use pcapsleuth_ingest::CaptureReader;
use pcapsleuth_testkit::{in_ci, shared_dir};
use std::path::Path;

fn shift_decoded<'a>(d: &Decoded<'a>, k: u32) -> Decoded<'a> {
    let mut d = *d;
    match &mut d.transport {
        Transport::Tcp(t) => {
            t.seq = t.seq.add(k);
            t.ack = t.ack.add(k);
            let n = t.options.sack.len as usize;
            for b in t.options.sack.blocks.iter_mut().take(n) {
                *b = (b.0.add(k), b.1.add(k));
            }
        }
        Transport::Icmp(m) => {
            if let Some(q) = m.quoted.as_mut() {
                q.tcp_seq = q.tcp_seq.map(|s| s.add(k));
                q.tcp_ack = q.tcp_ack.map(|s| s.add(k));
            }
        }
        _ => {}
    }
    d
}

/// Everything but the raw sequence numbers, one line per event, plus per-frame stream ids.
fn run(path: &Path, k: u32) -> (Vec<String>, Option<u32>) {
    let mut reader = CaptureReader::open(path).expect("lab capture opens");
    let mut dec = Decoder::new();
    let mut table = FlowTable::new(FlowConfig::default());
    let mut events = Vec::new();
    let mut lines = Vec::new();
    let mut first_isn = None;
    while let Ok(Some(f)) = reader.next_frame() {
        let meta = PacketMeta {
            frame: f.number,
            ts: f.ts,
            interface: f.interface,
        };
        let d = dec.decode(f.linktype.0, f.data);
        if let Transport::Tcp(t) = &d.transport {
            if t.flags.syn() && first_isn.is_none() {
                first_isn = Some(t.seq.0);
            }
        }
        let d = shift_decoded(&d, k);
        events.clear();
        let info = table.on_packet(&meta, &d, &mut events);
        lines.push(format!("{} {:?} {:?}", f.number, info.stream, info.dir));
        for e in &events {
            lines.push(match e {
                FlowEvent::Segment(s) => {
                    let mut s = *s;
                    s.seq = SeqNum(0);
                    s.ack = SeqNum(0);
                    if let L4Fingerprint::Tcp(t) = &mut s.fingerprint.l4 {
                        t.seq = SeqNum(0);
                        t.ack = SeqNum(0);
                        t.sack0 = None;
                    }
                    format!("{s:?}")
                }
                FlowEvent::IcmpError(i) => {
                    let mut i = *i;
                    i.quoted_seq = None;
                    format!("{i:?}")
                }
                other => format!("{other:?}"),
            });
        }
    }
    events.clear();
    table.finish(&mut events);
    lines.extend(events.iter().map(|e| format!("{e:?}")));
    lines.extend(table.summaries().iter().map(|s| format!("{s:?}")));
    (lines, first_isn)
}

#[test]
fn lab_captures_are_invariant_under_sequence_shift() {
    let Some(shared) = shared_dir() else {
        assert!(!in_ci(), "../shared is required in CI");
        println!("SKIP: ../shared not found");
        return;
    };
    for name in [
        "syn-retransmit.pcap",
        "mss-blackhole.pcap",
        "icmp-frag-needed.pcapng",
        "probe-timer-200ms.pcapng",
    ] {
        let path = shared.join("lab").join(name);
        if !path.exists() {
            assert!(!in_ci(), "{name} missing");
            println!("SKIP: {name} missing");
            continue;
        }
        let (base, isn) = run(&path, 0);
        assert!(base.len() > 10, "{name}: nothing decoded");
        let isn = isn.expect("lab captures contain SYNs");
        // Put the first ISN 1000 bytes, 1 byte and 2^31 before the wrap, and one random-ish shift.
        for k in [
            0u32.wrapping_sub(isn).wrapping_sub(1000),
            0u32.wrapping_sub(isn).wrapping_sub(1),
            0x8000_0000,
            0x9e37_79b9,
        ] {
            let (shifted, _) = run(&path, k);
            assert_eq!(shifted.len(), base.len(), "{name} shift {k}");
            for (a, b) in base.iter().zip(&shifted) {
                assert_eq!(a, b, "{name} shift {k}");
            }
        }
    }
}
