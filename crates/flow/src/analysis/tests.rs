//! Table tests for the analyzer. Every conversation starts from a template
//! whose initial sequence numbers sit just below 2^32 (smoltcp style), so
//! every test crosses the sequence-number wrap: the client's first 1000 data
//! bytes end exactly at raw sequence 0, the server's data wraps after 10 bytes.

use super::*;
use pcapsleuth_core::SeqNum;
use pcapsleuth_decode::{SackBlocks, TcpFlags, TcpOptions, TcpSegment};

const ISN_C: u32 = u32::MAX - 1000;
const ISN_S: u32 = u32::MAX - 10;
const T0: i64 = 1_700_000_000_000_000_000;
const MS: i64 = 1_000_000;

const SYN: u16 = TcpFlags::SYN;
const ACK: u16 = TcpFlags::ACK;
const FIN: u16 = TcpFlags::FIN;
const RST: u16 = TcpFlags::RST;
const PA: u16 = TcpFlags::ACK | TcpFlags::PSH;

/// One test conversation: relative sequence numbers in, verdicts out.
struct Conv {
    an: StreamAnalyzer,
    frame: FrameNo,
    now: i64,
}

#[derive(Clone, Copy, Default)]
struct Opts {
    wscale: Option<u8>,
    sack: Option<(u32, u32)>,
    dup_of: Option<FrameNo>,
}

impl Conv {
    fn new() -> Self {
        Conv {
            an: StreamAnalyzer::new(),
            frame: FrameNo(0),
            now: T0,
        }
    }

    /// Send a segment after `dt_ms` milliseconds. `rel_seq`/`rel_ack` are
    /// relative to the sender's / receiver's ISN.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        dir: Direction,
        dt_ms: i64,
        flags: u16,
        rel_seq: u32,
        rel_ack: u32,
        len: u32,
        win: u16,
        o: Opts,
    ) -> SegmentVerdict {
        let (isn_tx, isn_rx) = match dir {
            Direction::ClientToServer => (ISN_C, ISN_S),
            Direction::ServerToClient => (ISN_S, ISN_C),
        };
        let mut sack = SackBlocks::default();
        if let Some((l, r)) = o.sack {
            sack.blocks[0] = (
                SeqNum(isn_rx.wrapping_add(l)),
                SeqNum(isn_rx.wrapping_add(r)),
            );
            sack.len = 1;
        }
        let seg = TcpSegment {
            src_port: if dir == Direction::ClientToServer {
                40000
            } else {
                80
            },
            dst_port: if dir == Direction::ClientToServer {
                80
            } else {
                40000
            },
            seq: SeqNum(isn_tx.wrapping_add(rel_seq)),
            ack: SeqNum(if flags & ACK != 0 {
                isn_rx.wrapping_add(rel_ack)
            } else {
                0
            }),
            flags: TcpFlags(flags),
            window: win,
            urgent: 0,
            header_len: 20,
            payload_len: len,
            payload: &[],
            options: TcpOptions {
                window_scale: o.wscale,
                sack,
                ..TcpOptions::default()
            },
        };
        self.frame = self.frame.next();
        self.now += dt_ms * MS;
        self.an.on_segment(&SegmentInput {
            frame: self.frame,
            ts: Timestamp(self.now),
            dir,
            seg: &seg,
            duplicate_of: o.dup_of,
            new_stream_on_syn: false,
        })
    }
    #[allow(clippy::too_many_arguments)]
    fn c(
        &mut self,
        dt_ms: i64,
        flags: u16,
        seq: u32,
        ack: u32,
        len: u32,
        win: u16,
    ) -> SegmentVerdict {
        self.send(
            Direction::ClientToServer,
            dt_ms,
            flags,
            seq,
            ack,
            len,
            win,
            Opts::default(),
        )
    }
    #[allow(clippy::too_many_arguments)]
    fn s(
        &mut self,
        dt_ms: i64,
        flags: u16,
        seq: u32,
        ack: u32,
        len: u32,
        win: u16,
    ) -> SegmentVerdict {
        self.send(
            Direction::ServerToClient,
            dt_ms,
            flags,
            seq,
            ack,
            len,
            win,
            Opts::default(),
        )
    }

    /// SYN (WS 7) / SYN-ACK (WS 7) / ACK with a 10 ms handshake RTT.
    fn handshake() -> Self {
        Conv::handshake_on(StreamAnalyzer::new())
    }

    /// [`Conv::handshake`] through analyzer `an`.
    fn handshake_on(an: StreamAnalyzer) -> Self {
        let mut c = Conv { an, ..Conv::new() };
        let ws = Opts {
            wscale: Some(7),
            ..Opts::default()
        };
        // (Windows equal to the later unscaled values, so that the first ACKs
        // are not window updates.)
        assert_eq!(
            c.send(Direction::ClientToServer, 0, SYN, 0, 0, 0, 502, ws)
                .wireshark,
            SegmentAnalysis::default()
        );
        assert_eq!(
            c.send(Direction::ServerToClient, 5, SYN | ACK, 0, 1, 0, 509, ws)
                .wireshark,
            SegmentAnalysis::default()
        );
        assert_eq!(
            c.c(5, ACK, 1, 1, 0, 502).wireshark,
            SegmentAnalysis::default()
        );
        c
    }
}

/// The set flag names of a verdict, for readable assertions.
fn flags(a: &SegmentAnalysis) -> Vec<&'static str> {
    let all = [
        (a.retransmission, "retransmission"),
        (a.fast_retransmission, "fast_retransmission"),
        (a.spurious_retransmission, "spurious_retransmission"),
        (a.out_of_order, "out_of_order"),
        (a.lost_segment, "lost_segment"),
        (a.ack_lost_segment, "ack_lost_segment"),
        (a.duplicate_ack, "duplicate_ack"),
        (a.zero_window, "zero_window"),
        (a.zero_window_probe, "zero_window_probe"),
        (a.zero_window_probe_ack, "zero_window_probe_ack"),
        (a.keep_alive, "keep_alive"),
        (a.keep_alive_ack, "keep_alive_ack"),
        (a.window_full, "window_full"),
        (a.window_update, "window_update"),
        (a.reused_ports, "reused_ports"),
    ];
    all.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect()
}

#[test]
fn clean_transfer_across_the_wrap_has_no_flags() {
    let mut c = Conv::handshake();
    assert_eq!(c.an.window_scale(Direction::ClientToServer), Some(7));
    // Client data 1..1001 ends exactly at raw 0; server data wraps too.
    let v = c.c(1, PA, 1, 1, 500, 502);
    assert!(flags(&v.wireshark).is_empty());
    assert_eq!(v.bytes_in_flight, Some(500));
    let v = c.c(0, PA, 501, 1, 500, 502);
    assert!(flags(&v.wireshark).is_empty());
    assert_eq!(v.bytes_in_flight, Some(1000));
    let v = c.s(10, PA, 1, 1001, 100, 509);
    assert!(flags(&v.wireshark).is_empty(), "{:?}", flags(&v.wireshark));
    assert_eq!(v.ack_rtt_ns, Some(10 * MS));
    assert_eq!(v.wireshark_ack_rtt_ns, Some(10 * MS));
    let v = c.c(10, PA, 1001, 101, 200, 502);
    assert!(flags(&v.wireshark).is_empty(), "{:?}", flags(&v.wireshark));
    assert_eq!(v.ack_rtt_ns, Some(10 * MS));
    let v = c.c(0, FIN | ACK, 1201, 101, 0, 502);
    assert!(flags(&v.wireshark).is_empty());
    let v = c.s(1, FIN | ACK, 101, 1202, 0, 509);
    assert!(flags(&v.wireshark).is_empty());
    assert_eq!(v.wireshark, v.analysis);
}

#[test]
fn rto_retransmission_measures_time_since_first_transmission() {
    let mut c = Conv::handshake();
    c.c(1, PA, 1, 1, 1200, 502);
    let v = c.c(300, PA, 1, 1, 1200, 502);
    assert_eq!(flags(&v.wireshark), ["retransmission"]);
    assert_eq!(v.analysis, v.wireshark);
    assert_eq!(v.since_first_tx_ns, Some(300 * MS));
    // Karn: the ACK of a retransmitted segment gives no RTT sample in our
    // verdict; Wireshark measures from the oldest transmission.
    let v = c.s(10, ACK, 1, 1201, 0, 509);
    assert_eq!(v.ack_rtt_ns, None);
    assert_eq!(v.wireshark_ack_rtt_ns, Some(310 * MS));
}

#[test]
fn dup_acks_then_fast_retransmission() {
    let mut c = Conv::handshake();
    for i in 0..5u32 {
        c.c(0, PA, 1 + i * 100, 1, 100, 502);
    }
    // Segment 1..101 lost: the server repeats its SYN/ACK's ACK of 1 with SACK.
    let first_ack = FrameNo(2);
    for n in 1..=3u32 {
        let dt = if n == 1 { 0 } else { 1 };
        let v = c.send(
            Direction::ServerToClient,
            dt,
            ACK,
            1,
            1,
            0,
            509,
            Opts {
                sack: Some((101, 101 + n * 100)),
                ..Opts::default()
            },
        );
        assert_eq!(flags(&v.wireshark), ["duplicate_ack"]);
        assert_eq!(v.wireshark.duplicate_ack_num, n);
        assert_eq!(v.wireshark_dup_ack_frame, Some(first_ack));
        assert_eq!(v.dup_ack_frame, Some(first_ack));
    }
    let v = c.c(2, PA, 1, 1, 100, 502);
    assert_eq!(
        flags(&v.wireshark),
        ["retransmission", "fast_retransmission"]
    );
    assert_eq!(v.since_first_tx_ns, Some(4 * MS));
    // Bytes in flight: 500 sent minus the 300 SACKed.
    assert_eq!(v.wireshark_bytes_in_flight, Some(200));
}

#[test]
fn spurious_retransmission_of_acked_data() {
    let mut c = Conv::handshake();
    c.c(1, PA, 1, 1, 1200, 502);
    c.s(10, ACK, 1, 1201, 0, 509);
    let v = c.c(200, PA, 1, 1, 1200, 502);
    assert_eq!(
        flags(&v.wireshark),
        ["retransmission", "spurious_retransmission"]
    );
    assert_eq!(v.since_first_tx_ns, Some(210 * MS));
}

#[test]
fn out_of_order_within_first_rtt_and_lost_segment() {
    let mut c = Conv::handshake(); // first RTT 10 ms
    let v = c.c(1, PA, 101, 1, 100, 502);
    assert_eq!(flags(&v.wireshark), ["lost_segment"]);
    let v = c.c(2, PA, 1, 1, 100, 502);
    assert_eq!(flags(&v.wireshark), ["out_of_order"]);
    // The same late arrival after more than the first RTT is a retransmission.
    let mut c = Conv::handshake();
    c.c(1, PA, 101, 1, 100, 502);
    let v = c.c(11, PA, 1, 1, 100, 502);
    assert_eq!(flags(&v.wireshark), ["retransmission"]);
}

#[test]
fn ack_of_unseen_segment() {
    let mut c = Conv::handshake();
    c.c(1, PA, 1, 1, 100, 502);
    let v = c.s(10, ACK, 1, 301, 0, 509);
    assert_eq!(flags(&v.wireshark), ["ack_lost_segment"]);
    // Repeating that ACK is a duplicate ACK, not another unseen-segment report.
    let v = c.s(1, ACK, 1, 301, 0, 509);
    assert_eq!(flags(&v.wireshark), ["duplicate_ack"]);
}

#[test]
fn keep_alive_and_its_ack() {
    let mut c = Conv::handshake();
    c.c(1, PA, 1, 1, 100, 502);
    c.s(10, ACK, 1, 101, 0, 509);
    let v = c.c(7_200_000, ACK, 100, 1, 0, 502);
    assert_eq!(flags(&v.wireshark), ["keep_alive"]);
    assert_eq!(
        v.analysis, v.wireshark,
        "window open: a keep-alive for us too"
    );
    let v = c.s(1, ACK, 1, 101, 0, 509);
    assert_eq!(flags(&v.wireshark), ["keep_alive_ack"]);
}

#[test]
fn linux_zero_window_probe_is_a_probe_for_us_and_keep_alive_for_wireshark() {
    let mut c = Conv::handshake();
    c.c(1, PA, 1, 1, 1200, 502);
    let v = c.s(10, ACK, 1, 1201, 0, 0);
    assert_eq!(flags(&v.wireshark), ["zero_window"]);
    assert!(
        c.an.ours.is_none(),
        "our machine copy equals Wireshark's so far"
    );
    // tcp_xmit_probe_skb: empty, seq = SND.UNA - 1 (raw 199 here, past the wrap).
    let v = c.c(200, ACK, 1200, 1, 0, 502);
    assert_eq!(flags(&v.wireshark), ["keep_alive"]);
    assert_eq!(flags(&v.analysis), ["zero_window_probe"]);
    assert!(c.an.ours.is_some(), "forked before the first difference");
    let v = c.s(1, ACK, 1, 1201, 0, 0);
    assert_eq!(flags(&v.wireshark), ["zero_window"]);
    assert_eq!(flags(&v.analysis), ["zero_window", "zero_window_probe_ack"]);
    // The window opens: a window update in both verdicts.
    let v = c.s(100, ACK, 1, 1201, 0, 509);
    assert_eq!(flags(&v.wireshark), ["window_update"]);
    assert_eq!(v.analysis, v.wireshark);
}

#[test]
fn wireshark_one_byte_zero_window_probe() {
    let mut c = Conv::handshake();
    c.c(1, PA, 1, 1, 1200, 502);
    c.s(10, ACK, 1, 1201, 0, 0);
    let v = c.c(200, PA, 1201, 1, 1, 502);
    assert_eq!(flags(&v.wireshark), ["zero_window_probe"]);
    assert_eq!(v.analysis, v.wireshark);
    let v = c.s(1, ACK, 1, 1201, 0, 0);
    assert_eq!(
        flags(&v.wireshark),
        ["zero_window", "zero_window_probe_ack"]
    );
}

#[test]
fn window_full_uses_the_scaled_window() {
    let mut c = Conv::handshake();
    // Server window 8 << 7 = 1024 bytes from its last ACK (1).
    c.s(1, ACK, 1, 1, 0, 8);
    let v = c.c(1, PA, 1, 1, 1000, 502);
    assert!(flags(&v.wireshark).is_empty());
    let v = c.c(0, PA, 1001, 1, 24, 502);
    assert_eq!(flags(&v.wireshark), ["window_full"]);
}

#[test]
fn window_scale_unknown_without_handshake() {
    // Mid-stream: the server's raw window 8 would end at client byte 9 ...
    let mut c = Conv::new();
    c.s(0, ACK, 1, 1, 0, 8);
    assert_eq!(c.an.window_scale(Direction::ServerToClient), None);
    let v = c.c(1, PA, 1, 1, 8, 502);
    assert!(
        !v.wireshark.window_full,
        "scale unknown (-1): never window full"
    );
    // ... and with a handshake without window scaling (-2) it is window full.
    let mut c = Conv::new();
    c.c(0, SYN, 0, 0, 0, 502);
    c.s(1, SYN | ACK, 0, 1, 0, 8);
    c.c(1, ACK, 1, 1, 0, 502);
    assert_eq!(c.an.window_scale(Direction::ServerToClient), Some(0));
    let v = c.c(1, PA, 1, 1, 8, 502);
    assert_eq!(flags(&v.wireshark), ["window_full"]);
}

#[test]
fn raw_nextseq_zero_counts_as_unset() {
    let mut c = Conv::handshake();
    // Ends at raw sequence 0: Wireshark's nextseq becomes 0, i.e. "unset".
    c.c(1, PA, 1, 1, 1000, 502);
    let v = c.c(1, PA, 1501, 1, 100, 502);
    assert!(
        !v.wireshark.lost_segment,
        "Wireshark quirk: gap after raw nextseq 0 not reported"
    );
    let v = c.c(1, PA, 1701, 1, 100, 502);
    assert_eq!(flags(&v.wireshark), ["lost_segment"]);
}

#[test]
fn duplicate_sighting_copies_the_original_and_changes_nothing() {
    let mut c = Conv::handshake();
    c.c(1, PA, 1, 1, 100, 502);
    let orig = c.c(1, PA, 101, 1, 100, 502);
    let orig_frame = c.frame;
    let v = c.send(
        Direction::ClientToServer,
        0,
        PA,
        101,
        1,
        100,
        502,
        Opts {
            dup_of: Some(orig_frame),
            ..Opts::default()
        },
    );
    assert_eq!(
        flags(&v.wireshark),
        ["retransmission"],
        "Wireshark: the same packet again"
    );
    assert_eq!(v.analysis, orig.analysis);
    assert!(flags(&v.analysis).is_empty());
    assert_eq!(v.since_first_tx_ns, None);
    // A duplicated ACK: Wireshark's dup-ack count moves, ours does not.
    c.s(10, ACK, 1, 201, 0, 509);
    let f = c.frame;
    let v = c.send(
        Direction::ServerToClient,
        0,
        ACK,
        1,
        201,
        0,
        509,
        Opts {
            dup_of: Some(f),
            ..Opts::default()
        },
    );
    assert_eq!(flags(&v.wireshark), ["duplicate_ack"]);
    assert!(flags(&v.analysis).is_empty());
    let v = c.s(5, ACK, 1, 201, 0, 509);
    assert_eq!(v.wireshark.duplicate_ack_num, 2);
    assert_eq!(v.analysis.duplicate_ack_num, 1);
}

#[test]
fn duplicate_of_a_retransmission_keeps_the_retransmission_flag() {
    let mut c = Conv::handshake();
    c.c(1, PA, 1, 1, 100, 502);
    let r = c.c(300, PA, 1, 1, 100, 502);
    assert!(r.analysis.retransmission);
    let f = c.frame;
    let v = c.send(
        Direction::ClientToServer,
        0,
        PA,
        1,
        1,
        100,
        502,
        Opts {
            dup_of: Some(f),
            ..Opts::default()
        },
    );
    assert_eq!(v.analysis, r.analysis);
}

#[test]
fn an_analyzer_without_recent_verdicts_leaves_a_duplicate_to_its_caller() {
    // The same conversation through both kinds: equal verdicts for first
    // sightings; on a duplicate the ring-less analyzer gives the default
    // verdict (the flow table fills it from the sighting) and holds no ring.
    let mut with = Conv::handshake();
    let mut without = Conv::handshake_on(StreamAnalyzer::without_recent_verdicts());
    for c in [&mut with, &mut without] {
        c.c(1, PA, 1, 1, 100, 502);
    }
    let r1 = with.c(300, PA, 1, 1, 100, 502);
    let r2 = without.c(300, PA, 1, 1, 100, 502);
    assert!(r1.analysis.retransmission);
    assert_eq!(r1, r2);
    let dup = Opts {
        dup_of: Some(with.frame),
        ..Opts::default()
    };
    let d1 = with.send(Direction::ClientToServer, 0, PA, 1, 1, 100, 502, dup);
    let d2 = without.send(Direction::ClientToServer, 0, PA, 1, 1, 100, 502, dup);
    assert!(d1.analysis.retransmission);
    assert_eq!(d2.analysis, SegmentAnalysis::default());
    assert_eq!(d2.bytes_in_flight, None);
    assert_eq!(d1.wireshark, d2.wireshark);
    assert!(with.an.recent.capacity() > 0);
    assert_eq!(without.an.recent.capacity(), 0);
}

#[test]
fn port_reuse_rules() {
    let mut c = Conv::handshake();
    c.c(1, RST | ACK, 1, 1, 0, 0);
    let syn = |seq: u32| TcpSegment {
        src_port: 40000,
        dst_port: 80,
        seq: SeqNum(seq),
        ack: SeqNum(0),
        flags: TcpFlags(SYN),
        window: 64240,
        urgent: 0,
        header_len: 20,
        payload_len: 0,
        payload: &[],
        options: TcpOptions::default(),
    };
    assert!(
        !c.an
            .syn_opens_new_stream(Direction::ClientToServer, &syn(ISN_C)),
        "same ISN: a retransmission"
    );
    assert!(c
        .an
        .syn_opens_new_stream(Direction::ClientToServer, &syn(ISN_C.wrapping_add(5000))));
    let mut fresh = StreamAnalyzer::new();
    let s = syn(ISN_C.wrapping_add(5000));
    let v = fresh.on_segment(&SegmentInput {
        frame: FrameNo(99),
        ts: Timestamp(T0),
        dir: Direction::ClientToServer,
        seg: &s,
        duplicate_of: None,
        new_stream_on_syn: true,
    });
    assert_eq!(flags(&v.wireshark), ["reused_ports"]);
    assert_eq!(v.analysis, v.wireshark);
    let mut fresh = StreamAnalyzer::new_after_port_reuse();
    let v = fresh.on_segment(&SegmentInput {
        frame: FrameNo(99),
        ts: Timestamp(T0),
        dir: Direction::ClientToServer,
        seg: &s,
        duplicate_of: None,
        new_stream_on_syn: false,
    });
    assert!(v.wireshark.reused_ports);
    // A SYN/ACK with another ISN on a known stream.
    let mut c = Conv::handshake();
    let v = c.send(
        Direction::ServerToClient,
        1000,
        SYN | ACK,
        77,
        1,
        0,
        65160,
        Opts::default(),
    );
    assert!(v.wireshark.reused_ports);
}

#[test]
fn syn_retransmission() {
    let mut c = Conv::new();
    c.c(0, SYN, 0, 0, 0, 64240);
    let v = c.c(1000, SYN, 0, 0, 0, 64240);
    assert_eq!(flags(&v.wireshark), ["retransmission"]);
    assert_eq!(v.since_first_tx_ns, Some(1000 * MS));
    let v = c.s(1, SYN | ACK, 0, 1, 0, 65160);
    assert!(flags(&v.wireshark).is_empty());
    assert_eq!(v.ack_rtt_ns, None, "Karn: the SYN was sent twice");
}
