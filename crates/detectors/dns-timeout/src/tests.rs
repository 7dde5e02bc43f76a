//! Table tests: synthetic DNS messages → lookups → diagnoses.

use crate::diagnose::{diagnose, Diagnosis, Shape};
use crate::lookup::build;
use crate::Msg;
use pcapsleuth_core::StreamId;
use pcapsleuth_core::{Endpoint, Severity};

const A: u16 = 1;
const AAAA: u16 = 28;

fn ep(s: &str) -> Endpoint {
    let sa: std::net::SocketAddr = s.parse().unwrap();
    Endpoint {
        addr: sa.ip(),
        port: sa.port(),
    }
}

/// A message: frame, time (µs), src, dst, id, response, qtype, interface.
#[allow(clippy::too_many_arguments)]
fn m(
    frame: u64,
    us: i64,
    src: &str,
    dst: &str,
    id: u16,
    resp: bool,
    qtype: u16,
    iface: u32,
) -> Msg {
    Msg {
        frame,
        ts: us * 1000,
        interface: iface,
        tcp: false,
        stream: Some(StreamId(u64::from(ep(if resp { dst } else { src }).port))),
        src: ep(src),
        dst: ep(dst),
        id,
        response: resp,
        truncated: false,
        rcode: 0,
        answers: u16::from(resp),
        name: 0,
        qtype,
        qclass: 1,
        // The same query bytes hash the same; answers differ from queries.
        hash: u64::from(id) << 1 | u64::from(resp),
    }
}

const C: &str = "192.0.2.50:49937";
const R: &str = "198.51.100.53:53";

fn run(msgs: Vec<Msg>, end_us: i64) -> Vec<Diagnosis> {
    diagnose(&build(msgs), &["api.lab.test".to_string()], end_us * 1000)
}

/// dns-timeout.pcap frames 1-9: the AAAA query lost, glibc re-sends the pair.
fn pair_lost() -> Vec<Msg> {
    vec![
        m(1, 0, C, R, 0x682d, false, A, 0),
        m(2, 272, C, R, 0x4c28, false, AAAA, 0),
        m(3, 572, R, C, 0x682d, true, A, 0),
        m(6, 5_000_484, C, R, 0x682d, false, A, 0),
        m(7, 5_000_843, R, C, 0x682d, true, A, 0),
        m(8, 5_000_911, C, R, 0x4c28, false, AAAA, 0),
        m(9, 5_000_982, R, C, 0x4c28, true, AAAA, 0),
    ]
}

#[test]
fn pair_resent_collateral_is_not_a_loss() {
    let d = run(pair_lost(), 24_000_000);
    assert_eq!(d.len(), 1, "{d:#?}");
    let d = &d[0];
    assert_eq!(d.shape, Shape::PairResent);
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.evidence.unanswered_frames, vec![2]);
    assert_eq!(d.evidence.retry_frames, vec![8]);
    assert_eq!(d.evidence.collateral_resend_frames, vec![6]);
    assert_eq!(d.evidence.answer_frame, Some(9));
    assert!(d.evidence.ladder.starts_with("glibc default"));
    assert_eq!(d.evidence.timeout_ms, 5000.0);
    assert!((d.evidence.time_lost_ms - 5000.639).abs() < 0.001);
    assert!(d.evidence.same_socket);
    assert_eq!(d.flow.client_port, 49937);
    assert!([2, 8].iter().all(|f| d.frames.contains(f)));
}

#[test]
fn single_request_reopen_lost_query_is_the_only_evidence() {
    let a = "192.0.2.50:43051";
    let b = "192.0.2.50:51325";
    let msgs = vec![
        m(25, 0, a, R, 0x1cb7, false, A, 0),
        m(26, 2_482, R, a, 0x1cb7, true, A, 0),
        m(27, 2_557, b, R, 0x75ab, false, AAAA, 0),
    ];
    let d = run(msgs, 12_000_000);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].shape, Shape::UnansweredNotResent);
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].evidence.sibling_other_socket);
    assert_eq!(d[0].evidence.unanswered_frames, vec![27]);
    assert_eq!(d[0].evidence.time_lost_ms, 5000.0);
    assert_eq!(d[0].flow.client_port, 51325);
}

#[test]
fn censoring_table() {
    // (capture end after the query in ms, expected shape, severity)
    let table: &[(i64, Shape, Severity)] = &[
        (300, Shape::Censored, Severity::Info),
        (4_900, Shape::Censored, Severity::Info),
        (6_000, Shape::NeverAnswered, Severity::Warning),
        (20_000, Shape::NeverAnswered, Severity::Warning),
    ];
    for &(after, shape, sev) in table {
        let msgs = vec![
            m(1, 0, C, R, 1, false, A, 0),
            m(2, 100, R, C, 1, true, A, 0),
            m(3, 1_500_000, "192.0.2.50:40000", R, 2, false, AAAA, 0),
        ];
        // The AAAA is 1.5 s after the A: no pair, a plain unanswered query.
        let d = run(msgs, 1_500_000 + after * 1000);
        assert_eq!(d.len(), 1, "{after}");
        assert_eq!((d[0].shape, d[0].severity), (shape, sev), "{after}");
        if shape == Shape::Censored {
            assert_eq!(d[0].evidence.capture_end_after_query_ms, Some(after as f64));
            assert!(d[0].evidence.unanswered_frames.is_empty());
        }
    }
}

#[test]
fn node_capture_copies_count_once_out_of_frame_order() {
    // Client side (interface 0) and after DNAT (interface 1, resolver
    // 203.0.113.53); the uplink copy of the re-send has the lower frame number.
    let up = "203.0.113.53:53";
    let msgs = vec![
        m(1, 0, C, R, 0x682d, false, A, 0),
        m(2, 158, C, R, 0x4c28, false, AAAA, 0),
        m(3, 453, R, C, 0x682d, true, A, 0),
        m(4, 99, C, up, 0x682d, false, A, 1),
        m(5, 420, up, C, 0x682d, true, A, 1),
        m(14, 5_000_526, C, up, 0x682d, false, A, 1),
        m(15, 5_000_711, up, C, 0x682d, true, A, 1),
        m(16, 5_000_807, C, up, 0x4c28, false, AAAA, 1),
        m(17, 5_000_860, up, C, 0x4c28, true, AAAA, 1),
        m(10, 5_000_493, C, R, 0x682d, false, A, 0),
        m(11, 5_000_727, R, C, 0x682d, true, A, 0),
        m(12, 5_000_798, C, R, 0x4c28, false, AAAA, 0),
        m(13, 5_000_866, R, C, 0x4c28, true, AAAA, 0),
    ];
    let d = run(msgs, 24_000_000);
    assert_eq!(d.len(), 1, "{d:#?}");
    let d = &d[0];
    assert_eq!(d.shape, Shape::PairResent);
    assert_eq!(d.evidence.transmissions, 2);
    assert_eq!(d.evidence.unanswered_frames, vec![2]);
    assert_eq!(d.evidence.retry_frames, vec![12]);
    assert_eq!(d.evidence.other_sightings, 1);
    assert_eq!(d.flow.server, "198.51.100.53");
}

#[test]
fn ladders_and_failures_table() {
    // (gaps between transmissions in ms, answered last, shape, severity, ladder prefix)
    let table: &[(&[i64], bool, Shape, Severity, &str)] = &[
        (
            &[2_000],
            true,
            Shape::Resent,
            Severity::Warning,
            "glibc options timeout:2",
        ),
        (
            &[2_500],
            true,
            Shape::Resent,
            Severity::Warning,
            "musl default",
        ),
        (
            &[5_000, 5_000],
            true,
            Shape::Resent,
            Severity::Warning,
            "glibc default",
        ),
        (
            &[5_000],
            false,
            Shape::NeverAnswered,
            Severity::Error,
            "glibc default",
        ),
    ];
    for &(gaps, answered, shape, sev, ladder) in table {
        let c6 = "[2001:db8::50]:40001";
        let r6 = "[2001:db8:53::53]:53";
        let mut msgs = vec![m(1, 0, c6, r6, 7, false, AAAA, 0)];
        let mut t = 0;
        for (k, g) in gaps.iter().enumerate() {
            t += g * 1000;
            msgs.push(m(2 + k as u64 * 2, t, c6, r6, 7, false, AAAA, 0));
        }
        if answered {
            msgs.push(m(99, t + 300, r6, c6, 7, true, AAAA, 0));
        }
        // Another lookup answered by the resolver: the capture sees both directions.
        msgs.push(m(100, t + 1_000_000, c6, r6, 9, false, A, 0));
        msgs.push(m(101, t + 1_000_300, r6, c6, 9, true, A, 0));
        let d = run(msgs, t + 30_000_000);
        assert_eq!(d.len(), 1, "{gaps:?}");
        assert_eq!((d[0].shape, d[0].severity), (shape, sev), "{gaps:?}");
        assert!(
            d[0].evidence.ladder.starts_with(ladder),
            "{gaps:?}: {}",
            d[0].evidence.ladder
        );
        assert_eq!(d[0].evidence.resolver, "[2001:db8:53::53]:53");
    }
}

#[test]
fn one_direction_capture_is_info() {
    let msgs = vec![
        m(1, 0, C, R, 1, false, A, 0),
        m(2, 5_000_000, C, R, 1, false, A, 0),
    ];
    let d = run(msgs, 30_000_000);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Info);
    assert_eq!(d[0].evidence.resolver_answers, 0);
}

#[test]
fn clean_lookups_are_not_diagnosed() {
    let msgs = vec![
        m(1, 0, C, R, 1, false, A, 0),
        m(2, 0, C, R, 2, false, AAAA, 0),
        m(3, 300, R, C, 1, true, A, 0),
        m(4, 400, R, C, 2, true, AAAA, 0),
        // An exact duplicate of the answer 10 µs later (another interface).
        m(5, 410, R, C, 2, true, AAAA, 1),
    ];
    assert!(run(msgs, 30_000_000).is_empty());
}

#[test]
fn render_names_collateral_and_censoring() {
    let d = run(pair_lost(), 24_000_000);
    let f = crate::render::render(&d[0]);
    assert!(f.summary.contains("collateral"), "{}", f.summary);
    assert_eq!(f.udp_stream, Some(49937));
    let censored = run(vec![m(1, 0, C, R, 1, false, A, 0)], 1_000);
    let f = crate::render::render(&censored[0]);
    assert!(f
        .summary
        .contains("still unanswered when the capture ended 1.0 ms after the query"));
}

#[test]
fn burst_loss_shape_needs_a_pair_loss_among_many() {
    // (the lost lookup is the glibc pair?, clean lookups to the resolver, expected shape)
    let table: &[(bool, usize, bool)] = &[(true, 4, true), (true, 0, false), (false, 4, false)];
    for &(pair, clean, want) in table {
        let mut msgs = if pair {
            pair_lost()
        } else {
            vec![
                m(2, 272, C, R, 0x4c28, false, AAAA, 0),
                m(8, 1_000_911, C, R, 0x4c28, false, AAAA, 0),
                m(9, 1_000_982, R, C, 0x4c28, true, AAAA, 0),
            ]
        };
        for k in 0..clean as u64 {
            let c = format!("192.0.2.50:{}", 40000 + k);
            let t = 10_000_000 + k as i64 * 1_000_000;
            msgs.push(m(100 + 2 * k, t, &c, R, 100 + k as u16, false, A, 0));
            msgs.push(m(101 + 2 * k, t + 300, R, &c, 100 + k as u16, true, A, 0));
        }
        let d = run(msgs, 30_000_000);
        assert_eq!(d.len(), 1, "{pair} {clean}");
        assert_eq!(d[0].evidence.burst_loss_shape, want, "{pair} {clean}");
    }
}

#[test]
fn hostile_timestamps_and_orders_do_not_panic() {
    let extremes = [i64::MIN, -1, 0, 1, i64::MAX / 2, i64::MAX];
    let mut msgs = Vec::new();
    let mut frame = 0;
    for &ts in &extremes {
        for (resp, qtype) in [(false, A), (false, AAAA), (true, A), (true, AAAA)] {
            frame += 1;
            let mut x = m(frame, 0, C, R, 7, resp, qtype, 0);
            if resp {
                x.src = ep(R);
                x.dst = ep(C);
            }
            x.ts = ts;
            msgs.push(x);
        }
    }
    for end in extremes {
        for d in diagnose(&build(msgs.clone()), &[], end) {
            let _ = crate::render::render(&d);
        }
        // Concluded in chunks of 2 and 5, in frame order and reversed.
        for chunk in [2, 5] {
            for reversed in [false, true] {
                let mut c = crate::chunk::Chunker::with_chunk(chunk);
                let order: Vec<Msg> = if reversed {
                    msgs.iter().rev().copied().collect()
                } else {
                    msgs.clone()
                };
                for x in order {
                    c.push(x);
                }
                assert!(c.held() <= chunk);
                for d in c.diagnose(&[], end) {
                    let _ = crate::render::render(&d);
                }
            }
        }
    }
}

#[test]
fn new_id_resend_after_a_timeout_is_linked_once() {
    // (gap s, first lookup re-sent with its own id too, linked)
    let table: &[(i64, bool, bool)] = &[
        (5, false, true),
        (2, false, false), // 2 s: an application asking again
        (0, false, false), // 0.7 s: no resolver timeout
        (5, true, false),  // glibc-style lookup (same id twice) then an application retry
    ];
    for &(gap, same_id_twice, linked) in table {
        let a = "192.0.2.50:40000";
        let b = "192.0.2.50:40001";
        let mut msgs = vec![m(1, 0, a, R, 1, false, AAAA, 0)];
        let mut t = 0;
        if same_id_twice {
            t = 5_000_000;
            msgs.push(m(2, t, a, R, 1, false, AAAA, 0));
        }
        t += if gap == 0 { 700_000 } else { gap * 1_000_000 };
        msgs.push(m(3, t, b, R, 2, false, AAAA, 0));
        msgs.push(m(4, t + 300, R, b, 2, true, AAAA, 0));
        let d = run(msgs, t + 30_000_000);
        let first: Vec<&Diagnosis> = d.iter().filter(|d| d.flow.client_port == 40000).collect();
        assert_eq!(first.len(), 1, "{gap} {same_id_twice}: {d:#?}");
        assert_eq!(
            first[0].evidence.new_id_resends,
            u32::from(linked),
            "{gap} {same_id_twice}"
        );
        if linked {
            assert_eq!(first[0].shape, Shape::Resent);
            assert!(!first[0].evidence.same_socket);
            assert_eq!(first[0].evidence.answer_frame, Some(4));
        }
    }
}

#[test]
fn uplink_view_names_the_sibling_lost_before_the_capture() {
    // dns-timeout.node.pcapng interface 1 only (after the DNAT): the first
    // AAAA never got there; the A is answered, then re-sent with the AAAA.
    let up = "203.0.113.53:53";
    let msgs = vec![
        m(4, 99, C, up, 0x682d, false, A, 1),
        m(5, 420, up, C, 0x682d, true, A, 1),
        m(14, 5_000_526, C, up, 0x682d, false, A, 1),
        m(15, 5_000_711, up, C, 0x682d, true, A, 1),
        m(16, 5_000_807, C, up, 0x4c28, false, AAAA, 1),
        m(17, 5_000_860, up, C, 0x4c28, true, AAAA, 1),
    ];
    let d = run(msgs, 24_000_000);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].shape, Shape::SiblingLostBeforeCapture);
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].evidence.unanswered_frames.is_empty());
    assert_eq!(d[0].evidence.sibling_frames, vec![16]);
    assert!((d[0].evidence.time_lost_ms - 5000.427).abs() < 0.001);
}

#[test]
fn one_id_reused_for_many_lookups_stays_linear() {
    // An embedded stub asking the same name every second with id 0: 50,000
    // lookups, each answered, one lost (re-sent after 5 s, answered).
    let mut msgs = Vec::new();
    let mut frame = 0;
    for k in 0..50_000i64 {
        let t = k * 1_000_000;
        frame += 1;
        msgs.push(m(frame, t, C, R, 0, false, A, 0));
        if k != 100 {
            frame += 1;
            msgs.push(m(frame, t + 300, R, C, 0, true, A, 0));
        }
    }
    let start = std::time::Instant::now();
    let d = run(msgs, 50_001_000_000);
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    // Lookup 100 is unanswered; id 0 comes back every second, so the next
    // query (same id, name, type) is read as its re-send after 1 s.
    assert_eq!(d.len(), 1, "{:#?}", d.first());
    assert_eq!(d[0].evidence.unanswered_frames.len(), 1);
    assert!(d[0].frames.len() < 40, "{}", d[0].frames.len());
    assert!(d[0].evidence.gaps_ms.len() <= 16);
}

/// A deterministic generator of hours of DNS traffic (xorshift64*): three
/// clients asking five names, at a few seconds' intervals, in every shape
/// the diagnosis knows: clean A/AAAA pairs, a lost query re-sent, a pair
/// re-sent for one loss, never answered, Go's new-id re-send, a truncated
/// answer and its TCP fallback; a quarter of the queries also seen on a
/// second interface and written up to half a second late (frame order is
/// not time order).
fn long_traffic(seed: u64, events: usize) -> Vec<Msg> {
    let mut x = seed | 1;
    let mut rnd = move |n: u64| {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    };
    const S: i64 = 1_000_000_000;
    const MS: i64 = 1_000_000;
    let clients = ["192.0.2.10", "192.0.2.11", "2001:db8::12"];
    let mut out: Vec<(i64, Msg)> = Vec::new();
    let mut t = 0i64;
    for _ in 0..events {
        t += S + rnd(5) as i64 * S + rnd(1000) as i64 * MS;
        let ci = rnd(3) as usize;
        let client = clients[ci];
        let resolver = if ci == 2 {
            "2001:db8::53"
        } else {
            "198.51.100.53"
        };
        let name = rnd(5) as u32;
        let port = 30_000 + rnd(30_000) as u16;
        let c = |p: u16| {
            if client.contains(':') {
                format!("[{client}]:{p}")
            } else {
                format!("{client}:{p}")
            }
        };
        let r = if resolver.contains(':') {
            format!("[{resolver}]:53")
        } else {
            format!("{resolver}:53")
        };
        let copy = rnd(4) == 0;
        let mut emit = |ts: i64,
                        src: &str,
                        dst: &str,
                        id: u16,
                        resp: bool,
                        qtype: u16,
                        tc: bool,
                        tcp: bool| {
            let mut msg = m(0, 0, src, dst, id, resp, qtype, 0);
            msg.ts = ts;
            msg.name = name;
            msg.truncated = tc;
            msg.tcp = tcp;
            msg.hash = (u64::from(id) << 24)
                | (u64::from(name) << 16)
                | (u64::from(qtype) << 2)
                | (u64::from(resp) << 1)
                | u64::from(tc);
            out.push((ts, msg));
            if copy && !resp {
                let mut c2 = msg;
                c2.ts = ts + 50_000;
                c2.interface = 1;
                out.push((ts + 500 * MS, c2));
            }
        };
        let (id1, id2) = (rnd(65_536) as u16, rnd(65_536) as u16);
        let (cs, cs2) = (c(port), c(port + 1));
        match rnd(10) {
            0..=4 => {
                emit(t, &cs, &r, id1, false, A, false, false);
                emit(t + MS / 10, &cs, &r, id2, false, AAAA, false, false);
                emit(t + 20 * MS, &r, &cs, id1, true, A, false, false);
                emit(t + 21 * MS, &r, &cs, id2, true, AAAA, false, false);
            }
            5 => {
                emit(t, &cs, &r, id1, false, A, false, false);
                emit(t + MS / 10, &cs, &r, id2, false, AAAA, false, false);
                emit(t + 20 * MS, &r, &cs, id1, true, A, false, false);
                emit(t + 5 * S, &cs, &r, id1, false, A, false, false);
                emit(t + 5 * S + MS, &cs, &r, id2, false, AAAA, false, false);
                emit(t + 5 * S + 20 * MS, &r, &cs, id1, true, A, false, false);
                emit(t + 5 * S + 21 * MS, &r, &cs, id2, true, AAAA, false, false);
            }
            6 => {
                emit(t, &cs, &r, id1, false, A, false, false);
                emit(t + 5 * S, &cs, &r, id1, false, A, false, false);
                emit(t + 5 * S + 20 * MS, &r, &cs, id1, true, A, false, false);
            }
            7 => {
                for k in 0..3 {
                    emit(t + k * 5 * S, &cs, &r, id1, false, AAAA, false, false);
                }
            }
            8 => {
                emit(t, &cs, &r, id1, false, A, false, false);
                emit(t + 5 * S, &cs2, &r, id2, false, A, false, false);
                emit(t + 5 * S + 20 * MS, &r, &cs2, id2, true, A, false, false);
            }
            _ => {
                emit(t, &cs, &r, id1, false, A, false, false);
                emit(t + 5 * S, &cs, &r, id1, false, A, false, false);
                emit(t + 5 * S + 10 * MS, &r, &cs, id1, true, A, true, false);
                emit(t + 5 * S + 20 * MS, &cs, &r, id1, false, A, false, true);
                emit(t + 5 * S + 40 * MS, &r, &cs, id1, true, A, false, true);
            }
        }
    }
    out.sort_by_key(|(written, _)| *written);
    out.into_iter()
        .enumerate()
        .map(|(k, (_, mut msg))| {
            msg.frame = k as u64 + 1;
            msg
        })
        .collect()
}

#[test]
fn chunks_conclude_as_one_pass_would() {
    use crate::chunk::Chunker;
    let names: Vec<String> = (0..5).map(|i| format!("host{i}.lab.test")).collect();
    for seed in [1u64, 7, 42] {
        let msgs = long_traffic(seed, 3000);
        let end = msgs.iter().map(|x| x.ts).max().unwrap() + 2_000_000_000;
        let whole = diagnose(&build(msgs.clone()), &names, end);
        // Every shape is in the traffic.
        for shape in [Shape::Resent, Shape::PairResent, Shape::NeverAnswered] {
            assert!(whole.iter().any(|d| d.shape == shape), "{shape:?}");
        }
        assert!(whole.iter().any(|d| d.evidence.truncated_tcp_fallback));
        assert!(whole.iter().any(|d| d.evidence.new_id_resends > 0));
        assert!(whole.iter().any(|d| d.evidence.sibling_qtype.is_some()));
        assert!(whole.iter().any(|d| d.evidence.other_sightings > 0));
        for chunk in [400usize, 1000, 5000] {
            let mut c = Chunker::with_chunk(chunk);
            for m in &msgs {
                c.push(*m);
            }
            assert!(
                !c.early.reached(),
                "seed {seed} chunk {chunk}: {:?}",
                c.early
            );
            // Memory follows the lookups in progress: never more than the
            // chunk held, and far fewer candidates than lookups.
            assert!(c.held() < chunk, "{}", c.held());
            let got = c.diagnose(&names, end);
            assert_eq!(got.len(), whole.len(), "seed {seed} chunk {chunk}");
            assert_eq!(got, whole, "seed {seed} chunk {chunk}");
        }
        // A chunk smaller than the lookups in progress concludes some early,
        // says so, and still diagnoses.
        let mut c = Chunker::with_chunk(16);
        for m in &msgs {
            c.push(*m);
        }
        assert!(c.early.reached());
        assert!(c.held() <= 16);
        assert!(!c.diagnose(&names, end).is_empty());
    }
}

/// Answers that match no query (a capture of one direction, a reflection
/// flood) are not held from chunk to chunk: concluding stays linear.
#[test]
fn unmatched_answers_do_not_pile_up() {
    let mut c = crate::chunk::Chunker::with_chunk(64);
    for k in 0..100_000u64 {
        let mut x = m(k + 1, k as i64, R, C, (k % 65_536) as u16, true, A, 0);
        x.hash = k;
        c.push(x);
        assert!(c.held() < 64, "{k}: {}", c.held());
    }
    assert!(c.diagnose(&[], 200_000).is_empty());
}

/// A random-subdomain flood (every query its own name, answered at once)
/// with a lost and re-sent query of one name among it: the collector
/// releases the names nothing names after each chunk and gives their ids to
/// new names, so with the per-name totals capped it holds about the cap
/// plus a chunk of names, not the capture's; the findings are the one-pass
/// diagnosis's, qnames and per-name totals included.
#[test]
fn a_random_subdomain_flood_keeps_only_the_names_in_use() {
    use crate::chunk::Chunker;
    use crate::collect::Collector;
    const LOOKUPS: u64 = 20_000;
    const CHUNK: usize = 2048;
    const CAP: usize = 1000;
    // (time µs, message, qname); a lookup every 100 ms.
    let mut events: Vec<(i64, Msg, String)> = Vec::new();
    for k in 0..LOOKUPS {
        let t = k as i64 * 100_000;
        let client = format!("192.0.2.{}:{}", 10 + k % 200, 20_000 + k % 40_000);
        let id = k as u16;
        if k % 500 == 7 {
            // Lost, re-sent after glibc's 5 s, answered.
            let name = "victim.lab.test".to_string();
            let q = m(0, t, &client, R, id, false, A, 0);
            events.push((t, q, name.clone()));
            let mut again = q;
            again.ts = (t + 5_000_000) * 1000;
            events.push((t + 5_000_000, again, name.clone()));
            let a = m(0, t + 5_002_000, R, &client, id, true, A, 0);
            events.push((t + 5_002_000, a, name));
        } else {
            let name = format!("x{k}.flood.test");
            events.push((t, m(0, t, &client, R, id, false, A, 0), name.clone()));
            events.push((t + 2_000, m(0, t + 2_000, R, &client, id, true, A, 0), name));
        }
    }
    events.sort_by_key(|(t, _, _)| *t);
    for (i, (_, msg, _)) in events.iter_mut().enumerate() {
        msg.frame = i as u64 + 1;
    }
    let end = events.last().map_or(0, |(_, msg, _)| msg.ts) + 1_000_000_000;

    // One pass, every name interned for good.
    let mut all = crate::names::NameTable::default();
    let msgs: Vec<Msg> = events
        .iter()
        .map(|(_, msg, name)| Msg {
            name: all.intern(name),
            ..*msg
        })
        .collect();
    let whole = diagnose(&build(msgs), all.as_slice(), end);
    assert_eq!(whole.len(), (LOOKUPS / 500) as usize);
    assert!(whole
        .iter()
        .all(|d| d.shape == Shape::Resent && d.evidence.qname == "victim.lab.test"));
    assert_eq!(whole[0].evidence.name_lookups, 40);

    for cap in [usize::MAX, CAP] {
        let mut c = Collector::default();
        c.chunks = Chunker::with_chunk(CHUNK).with_name_cap(cap);
        let mut most = 0;
        for (_, msg, name) in &events {
            c.add(*msg, name);
            most = most.max(c.names.live());
        }
        assert!(!c.chunks.early.reached(), "cap {cap}");
        assert_eq!(c.chunks.untallied().reached(), cap == CAP, "cap {cap}");
        if cap == CAP {
            // The cap, a chunk's messages and the victim's name.
            assert!(most <= CAP + CHUNK + 1, "{most}");
            assert!(
                c.names.slots() <= CAP + CHUNK + 1,
                "ids reused: {}",
                c.names.slots()
            );
        }
        let got = c.chunks.diagnose(c.names.as_slice(), end);
        assert_eq!(got, whole, "cap {cap}");
    }
}
