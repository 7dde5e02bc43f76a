// TEMPORARY debug helper (removed before hand-off).
use pcapsleuth_decode::{Decoder, Transport};
use pcapsleuth_flow::{FlowConfig, FlowEvent, FlowTable, PacketMeta};
use pcapsleuth_ingest::CaptureReader;

#[test]
fn dbg_dump() {
    let Ok(p) = std::env::var("DBG_FILE") else {
        return;
    };
    let lo: u64 = std::env::var("DBG_LO")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let hi: u64 = std::env::var("DBG_HI")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX);
    let evmode = std::env::var("DBG_EV").is_ok();
    let mut r = CaptureReader::open(std::path::Path::new(&p)).unwrap();
    let mut dec = Decoder::new();
    let mut ft = FlowTable::new(FlowConfig::default());
    let mut ev = Vec::new();
    while let Ok(Some(f)) = r.next_frame() {
        let meta = PacketMeta {
            frame: f.number,
            ts: f.ts,
            interface: f.interface,
        };
        let d = dec.decode(f.linktype.0, f.data);
        ev.clear();
        let info = ft.on_packet(&meta, &d, &mut ev);
        if evmode {
            for e in &ev {
                match e {
                    FlowEvent::Segment(_)
                    | FlowEvent::WindowChange(_)
                    | FlowEvent::FlowStarted(_) => {}
                    other => println!("EV {other:?}"),
                }
            }
            continue;
        }
        if f.number < lo || f.number > hi {
            continue;
        }
        let t = match &d.transport {
            Transport::Tcp(s) => format!(
                "TCP {}->{} seq={} ack={} fl={:#x} len={} hl={}",
                s.src_port, s.dst_port, s.seq, s.ack, s.flags.0, s.payload_len, s.header_len
            ),
            Transport::Icmp(m) => format!(
                "ICMP {:?} t={} q={:?}",
                m.kind,
                m.icmp_type,
                m.quoted.map(|q| (
                    q.ip.src,
                    q.ip.dst,
                    q.src_port,
                    q.dst_port,
                    q.transport_bytes,
                    q.tcp_flags,
                    q.ip.fragment
                ))
            ),
            o => format!("{o:?}"),
        };
        println!(
            "{} lt={} stream={:?} ip={:?} {} stop={:?} frag={:?} ev={}",
            f.number,
            f.linktype.0,
            info.stream,
            d.ip.map(|i| (i.src, i.dst, i.total_len, i.header_len)),
            t,
            d.stop,
            d.ip.and_then(|i| i.fragment),
            ev.len()
        );
    }
    ev.clear();
    ft.finish(&mut ev);
    for e in &ev {
        println!("EV {e:?}");
    }
    for s in ft.summaries() {
        println!(
            "SUM {} {}:{} -> {}:{} {:?} pk={} stall={} {:?} zw={} rtt={:?} hs={:?} dup={} rx={:?}",
            s.tcp_stream,
            s.client,
            s.client_port,
            s.server,
            s.server_port,
            s.state,
            s.packets,
            s.longest_stall_ms,
            s.longest_stall_frames,
            s.zero_window_ms,
            s.rtt_ms,
            s.handshake_rtt_ms,
            s.duplicate_sightings,
            s.retransmissions
        );
    }
}
