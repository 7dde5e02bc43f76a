//! Lookups: queries grouped by (client address, transaction id, qname,
//! qtype, transport), each transmission matched with its answer, copies of
//! one packet (other interfaces, before and after NAT) counted once.

use crate::collect::Msg;
use foldhash::HashMap;
use pcapsleuth_core::{Endpoint, StreamId};
use smallvec::{smallvec, SmallVec};
use std::net::IpAddr;

/// Two sightings of the same DNS message bytes closer than this (ns) are one
/// packet seen twice (two interfaces, before and after NAT, `-i any`), not a
/// re-send: every stub resolver waits far longer before re-sending (glibc
/// ≥ 1 s, `seconds <= 0 → 1` in `send_dg`; musl ≥ 100 ms with
/// `timeout:1 attempts:10`).
pub const COPY_WINDOW_NS: i64 = 50_000_000;

/// Longest gap (ns) between two transmissions of one lookup: glibc caps
/// `timeout:` at 30 s (`RES_MAXRETRANS`) and the per-server timeout is at most
/// `(30 << 2) / 3` = 40 s (`send_dg`), so 65 s leaves room.
pub const MAX_RETRY_GAP_NS: i64 = 65_000_000_000;

/// Most earlier lookups with the same id, name and type examined per
/// message (the newest): bounds the work when a client reuses one id for a
/// name it asks again and again (constant or sequential ids).
pub const MAX_CANDIDATES: usize = 64;

/// The answer to one transmission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// Frame of the first sighting.
    pub frame: u64,
    /// Its time, ns.
    pub ts: i64,
    /// TC bit.
    pub truncated: bool,
    /// RCODE.
    pub rcode: u8,
    /// ANCOUNT.
    pub answers: u16,
    hash: u64,
}

/// One transmission of a query (its first sighting; copies listed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tx {
    /// Frame of the first sighting (earliest timestamp).
    pub frame: u64,
    /// Its time, ns.
    pub ts: i64,
    /// The client socket as first seen.
    pub client: Endpoint,
    /// The resolver as first seen (the service address before any DNAT).
    pub server: Endpoint,
    /// `udp.stream` / `tcp.stream` of the first sighting.
    pub stream: Option<StreamId>,
    /// Frames of other sightings of the same packet.
    pub copies: Vec<u64>,
    /// The first answer after it (before the next transmission), if any.
    pub answer: Option<Answer>,
    pub(crate) hash: u64,
}

/// One lookup: every transmission of one query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// Over TCP.
    pub tcp: bool,
    /// Client address.
    pub client_ip: IpAddr,
    /// Transaction ID.
    pub id: u16,
    /// Interned qname.
    pub name: u32,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
    /// Transmissions, in time order. Most lookups have one, kept inline:
    /// a chunk's lookups are rebuilt per chunk ([`crate::chunk`]), so an
    /// allocation per lookup was one per DNS query.
    pub txs: SmallVec<[Tx; 1]>,
    /// Answers that matched no unanswered transmission (late or repeated).
    pub extra_answers: u32,
    /// Transmissions that re-sent the query with a new transaction id (and
    /// socket) after a timeout: Go's resolver builds a new request per try.
    pub new_id_resends: u32,
}

impl Lookup {
    /// The last transmission.
    pub fn last(&self) -> Option<&Tx> {
        self.txs.last()
    }
    /// The first transmission.
    pub fn first(&self) -> Option<&Tx> {
        self.txs.first()
    }
    /// Identity of the lookup across the passes over a capture
    /// ([`crate::chunk`]): its first transmission's time (ns) and frame. A
    /// UDP datagram holds one DNS message, so no two UDP lookups share it.
    pub fn identity(&self) -> Option<(i64, u64)> {
        self.first().map(|f| (f.ts, f.frame))
    }
}

type Key = (u16, u32, u16, u16, bool);

fn key(m: &Msg) -> Key {
    (m.id, m.name, m.qtype, m.qclass, m.tcp)
}

/// Group `msgs` into lookups. Messages are taken in timestamp order (frame
/// order breaks ties): a multi-interface pcapng writes each interface's
/// packets as its buffer drains, so frame order is not time order, and the
/// earliest sighting of a query is the one nearest the client.
pub fn build(mut msgs: Vec<Msg>) -> Vec<Lookup> {
    sort(&mut msgs);
    build_sorted(&msgs).0
}

/// Sort `msgs` into the order [`build`] takes them: timestamp, then frame
/// (a stable sort: messages of one frame keep their order).
pub(crate) fn sort(msgs: &mut [Msg]) {
    msgs.sort_by_key(|m| (m.ts, m.frame));
}

/// [`build`] on messages already in its order ([`sort`]), with the lookup
/// each message went to (index into the lookups; `None` for an answer that
/// matched no transmission): `owner[k]` is `msgs[k]`'s.
pub(crate) fn build_sorted(msgs: &[Msg]) -> (Vec<Lookup>, Vec<Option<usize>>) {
    let mut lookups: Vec<Lookup> = Vec::new();
    let mut owner: Vec<Option<usize>> = Vec::with_capacity(msgs.len());
    // Lookups per key: nearly always one or two (inline, no allocation).
    let mut by_key: HashMap<Key, SmallVec<[usize; 2]>> = HashMap::default();
    for m in msgs {
        let k = key(m);
        if m.response {
            owner.push(on_answer(
                &mut lookups,
                by_key.get(&k).map_or(&[][..], |c| c.as_slice()),
                m,
            ));
            continue;
        }
        let cands = by_key.entry(k).or_default();
        let (idx, new) = on_query(&mut lookups, cands, m);
        if new {
            cands.push(idx);
        }
        owner.push(Some(idx));
    }
    let (lookups, merged_into) = link_new_id_resends(lookups);
    for o in owner.iter_mut() {
        *o = o.and_then(|i| merged_into.get(i).copied());
    }
    (lookups, owner)
}

/// Fold a lookup into the earlier one it re-sends with a new id: same
/// client address, name, type and transport; the earlier one never
/// answered and sent each id once; the gap the default 5 s resolver timeout
/// (Go's `net` resolver, like glibc, waits `timeout:5` per try, with a new
/// request id and socket each time). Other gaps are an application asking
/// again, not linked.
///
/// Also returns where each lookup went: `merged_into[i]` is the index in the
/// result of lookup `i` (itself, or the lookup it was folded into).
fn link_new_id_resends(mut lookups: Vec<Lookup>) -> (Vec<Lookup>, Vec<usize>) {
    // In place (one chunk's lookups can be tens of MB): `lookups[..kept]`
    // is the result so far; the lookup at `i` is either folded into one of
    // them or moved to `kept`.
    let mut merged_into: Vec<usize> = Vec::with_capacity(lookups.len());
    let mut open: HashMap<(IpAddr, u32, u16, u16, bool), usize> = HashMap::default();
    let mut kept = 0;
    for i in 0..lookups.len() {
        let (out, rest) = lookups.split_at_mut(i);
        let Some(l) = rest.first_mut() else { break };
        let key = (l.client_ip, l.name, l.qtype, l.qclass, l.tcp);
        let target = open.get(&key).copied().filter(|&t| {
            out.get(t).is_some_and(|p| {
                let unanswered = p.txs.iter().all(|t| t.answer.is_none());
                let gap = match (p.last(), l.first()) {
                    (Some(a), Some(b)) if b.ts > a.ts => b.ts.saturating_sub(a.ts),
                    _ => return false,
                };
                // One transmission per id so far: glibc-style re-sends (same
                // id) and their applications' retries are not chained.
                let one_per_id = p.txs.len() == p.new_id_resends as usize + 1;
                p.id != l.id
                    && one_per_id
                    && unanswered
                    && pcapsleuth_detect::timer::matches_timer(
                        gap,
                        crate::ladder::GLIBC_DEFAULT_TIMEOUT_NS,
                    )
            })
        });
        match target.and_then(|t| out.get_mut(t).map(|p| (t, p))) {
            Some((t, p)) => {
                p.new_id_resends += 1;
                p.txs.extend(l.txs.drain(..));
                p.extra_answers += l.extra_answers;
                merged_into.push(t);
            }
            None => {
                open.insert(key, kept);
                merged_into.push(kept);
                lookups.swap(kept, i);
                kept += 1;
            }
        }
    }
    lookups.truncate(kept);
    (lookups, merged_into)
}

/// A query: a copy of a recent transmission, a re-send in an open lookup, or
/// a new lookup. Returns the lookup's index and whether it is new.
fn on_query(lookups: &mut Vec<Lookup>, cands: &[usize], m: &Msg) -> (usize, bool) {
    for &i in cands.iter().rev().take(MAX_CANDIDATES) {
        let Some(l) = lookups.get_mut(i) else {
            continue;
        };
        let Some(last) = l.txs.last_mut() else {
            continue;
        };
        if last.hash == m.hash && m.ts.saturating_sub(last.ts) <= COPY_WINDOW_NS {
            last.copies.push(m.frame);
            return (i, false);
        }
    }
    for &i in cands.iter().rev().take(MAX_CANDIDATES) {
        let Some(l) = lookups.get_mut(i) else {
            continue;
        };
        let open = l
            .txs
            .last()
            .is_some_and(|t| m.ts.saturating_sub(t.ts) <= MAX_RETRY_GAP_NS);
        if l.client_ip == m.src.addr && open {
            l.txs.push(tx_of(m));
            return (i, false);
        }
    }
    lookups.push(Lookup {
        tcp: m.tcp,
        client_ip: m.src.addr,
        id: m.id,
        name: m.name,
        qtype: m.qtype,
        qclass: m.qclass,
        txs: smallvec![tx_of(m)],
        extra_answers: 0,
        new_id_resends: 0,
    });
    (lookups.len() - 1, true)
}

fn tx_of(m: &Msg) -> Tx {
    Tx {
        frame: m.frame,
        ts: m.ts,
        client: m.src,
        server: m.dst,
        stream: m.stream,
        copies: Vec::new(),
        answer: None,
        hash: m.hash,
    }
}

/// An answer: to the latest transmission before it of the lookup whose
/// client it is addressed to (else, after source NAT, of any lookup with the
/// same key); a second sighting of an answer already matched is a copy.
/// Returns the index of the lookup it went to, if any.
fn on_answer(lookups: &mut [Lookup], cands: &[usize], m: &Msg) -> Option<usize> {
    // The latest transmission before the answer (transmissions are in time
    // order, so this is the last one but for answers that overtake a re-send).
    let open = |l: &Lookup| {
        l.txs
            .iter()
            .rev()
            .find(|t| t.ts <= m.ts)
            .is_some_and(|t| m.ts.saturating_sub(t.ts) <= MAX_RETRY_GAP_NS)
    };
    let pick = cands
        .iter()
        .rev()
        .take(MAX_CANDIDATES)
        .copied()
        .find(|&i| {
            lookups
                .get(i)
                .is_some_and(|l| l.client_ip == m.dst.addr && open(l))
        })
        .or_else(|| {
            cands
                .iter()
                .rev()
                .take(MAX_CANDIDATES)
                .copied()
                .find(|&i| lookups.get(i).is_some_and(open))
        });
    let i = pick?;
    let l = lookups.get_mut(i)?;
    let tx = l.txs.iter_mut().rev().find(|t| t.ts <= m.ts)?;
    match &tx.answer {
        None => {
            tx.answer = Some(Answer {
                frame: m.frame,
                ts: m.ts,
                truncated: m.truncated,
                rcode: m.rcode,
                answers: m.answers,
                hash: m.hash,
            })
        }
        Some(a) if a.hash == m.hash && m.ts.saturating_sub(a.ts) <= COPY_WINDOW_NS => {}
        Some(_) => l.extra_answers += 1,
    }
    Some(i)
}

#[cfg(test)]
mod fold_tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    /// One never-answered lookup of `name` from 192.0.2.1 with `id`,
    /// sent at `t` s (its frame is `t`).
    fn lookup(name: u32, id: u16, t: i64) -> Lookup {
        let client: Endpoint = Endpoint {
            addr: "192.0.2.1".parse().unwrap(),
            port: 40_000 + id,
        };
        let server = Endpoint {
            addr: "198.51.100.53".parse().unwrap(),
            port: 53,
        };
        Lookup {
            tcp: false,
            client_ip: client.addr,
            id,
            name,
            qtype: 1,
            qclass: 1,
            txs: smallvec![Tx {
                frame: t as u64,
                ts: t * S,
                client,
                server,
                stream: None,
                copies: Vec::new(),
                answer: None,
                hash: u64::from(id),
            }],
            extra_answers: 0,
            new_id_resends: 0,
        }
    }

    /// Go-style re-sends (a new id every 5 s) fold into the first lookup of
    /// their name, however many other lookups lie between; the others keep
    /// their order, and each input says where it went.
    #[test]
    fn new_id_resends_fold_in_place_around_other_lookups() {
        let input = vec![
            lookup(7, 1, 0),  // A
            lookup(8, 2, 1),  // B: another name
            lookup(7, 3, 5),  // A's first re-send
            lookup(8, 4, 2),  // B again 1 s later: not the resolver timeout
            lookup(7, 5, 10), // A's second re-send
            lookup(9, 6, 11), // C
        ];
        let (out, merged_into) = link_new_id_resends(input);
        assert_eq!(merged_into, [0, 1, 0, 2, 0, 3]);
        let firsts: Vec<(u32, u16)> = out.iter().map(|l| (l.name, l.id)).collect();
        assert_eq!(firsts, [(7, 1), (8, 2), (8, 4), (9, 6)]);
        let a = &out[0];
        assert_eq!(a.new_id_resends, 2);
        let frames: Vec<u64> = a.txs.iter().map(|t| t.frame).collect();
        assert_eq!(frames, [0, 5, 10]);
        assert!(out[1..]
            .iter()
            .all(|l| l.txs.len() == 1 && l.new_id_resends == 0));
    }
}
