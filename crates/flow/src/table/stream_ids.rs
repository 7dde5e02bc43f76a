//! Wireshark-exact `tcp.stream` assignment and `base_seq` bookkeeping.
//!
//! # `tcp.stream` assignment (Wireshark 4.0.17, `dissect_tcp` in `epan/dissectors/packet-tcp.c`)
//! - A stream id is taken (`tcp_stream_count++` in `init_tcp_conversation_data`)
//!   the first time the TCP dissector meets a conversation: ids are dense,
//!   0-based, in first-seen order.
//! - The conversation is looked up by the unordered address/port pair
//!   (`find_conversation`, exact match); the most recently created one wins.
//! - A bare SYN (SYN without ACK) whose sequence number differs from the
//!   sender's `base_seq` — when that base is set — creates a new conversation
//!   (`conversation_new`, `TCP_A_REUSED_PORTS`). FIN or RST alone never does.
//!   A SYN/ACK with a different sequence only moves the sender's `base_seq`.
//! - `base_seq` is set only for segments that are neither an un-reassembled IP
//!   fragment nor inside an ICMP error (`!pinfo->fragmented && !in_error_pkt`)
//!   and whose reported length covers the TCP header: to the SYN's seq, else
//!   seq − 1; the peer's base to ACK − 1 from the first segment with ACK set.
//! - A TCP header quoted inside an ICMP/ICMPv6 error is dissected too (with
//!   `in_error_pkt`): it finds or creates a conversation and may start a new
//!   one by the bare-SYN rule, but sets no base. `dissect_tcp` reads the header
//!   up to the window field (offset 14..16) before the conversation lookup, so
//!   a quote of fewer than 16 TCP bytes throws and takes no part; a quoted
//!   non-first IP fragment is not handed to TCP at all.

use super::index::key_hash;
use super::lru::CLOSED;
use super::stream::Stream;
use super::{FlowTable, PacketMeta, Slot};
use crate::{FlowEvent, FlowStarted};
use pcapsleuth_core::{Direction, Endpoint, FlowKey, SeqNum};
use pcapsleuth_decode::{IpHeader, TcpFlags, TcpSegment};

/// Fewest quoted TCP header bytes for which Wireshark's `dissect_tcp` reaches
/// the conversation lookup (it reads the window field at offset 14..16 first).
pub(super) const WS_MIN_QUOTED_TCP: u32 = 16;

/// Whether this datagram is the first fragment of a datagram that was not
/// reassembled (Wireshark then dissects TCP with `pinfo->fragmented` set).
fn unreassembled_fragment(ip: &IpHeader, seg: &TcpSegment<'_>) -> bool {
    match ip.fragment {
        Some(f) if f.offset == 0 && f.more => {
            let own = ip.total_len.saturating_sub(ip.header_len);
            seg.header_len.saturating_add(seg.payload_len) <= own
        }
        _ => false,
    }
}

/// Set Wireshark's `base_seq` (stream-id rules) and our relative-sequence
/// bases from a captured (not quoted) segment travelling in `dir`.
pub(super) fn note_bases(st: &mut Stream, dir: Direction, ip: &IpHeader, seg: &TcpSegment<'_>) {
    let flags = seg.flags;
    let d = dir.index();
    let r = dir.reverse().index();
    // Wireshark base_seq (stream-id rules).
    let fragmented = unreassembled_fragment(ip, seg);
    let reported_ok = ip.total_len.saturating_sub(ip.header_len) >= seg.header_len;
    if !fragmented && reported_ok {
        if st.ws_base[d].is_none() {
            st.ws_base[d] = Some(if flags.syn() { seg.seq } else { seg.seq.sub(1) });
        }
        if flags.ack() && st.ws_base[r].is_none() {
            st.ws_base[r] = Some(seg.ack.sub(1));
        }
    }
    // Our relative-sequence bases follow the same rules, fragments included.
    if st.sides[d].base.is_none() {
        if flags.syn() {
            st.sides[d].set_base(seg.seq, 0);
        } else {
            st.sides[d].set_base(seg.seq.sub(1), 1);
        }
    }
    if flags.ack() && st.sides[r].base.is_none() {
        st.sides[r].set_base(seg.ack.sub(1), 1);
    }
}

impl FlowTable {
    /// The stream index the conversation index holds for `key`.
    fn known(&mut self, key: &FlowKey) -> Option<usize> {
        let slots = &self.slots;
        let found = self.index.get(key_hash(key), |j| {
            slots.get(j).is_some_and(|s| s.holds(key))
        });
        if let Some(i) = found {
            self.last_conv = Some((*key, i));
        }
        found
    }

    /// Take the next `tcp.stream` id for the conversation `key`, closing
    /// the stream it replaces, and emit [`FlowEvent::FlowStarted`] (after
    /// the [`FlowEvent::FlowEnded`] of a stream evicted to make room).
    fn new_stream(
        &mut self,
        key: FlowKey,
        client: Endpoint,
        server: Endpoint,
        meta: &PacketMeta,
        out: &mut Vec<FlowEvent>,
    ) -> usize {
        let tag = key_hash(&key);
        let slots = &self.slots;
        let old = self
            .index
            .get(tag, |j| slots.get(j).is_some_and(|s| s.holds(&key)));
        if let Some(old) = old {
            let live = match self.slots.get_mut(old) {
                // Ended (closed, kept for stray packets): stays on the ended list.
                Some(Slot::Full(s)) if s.ended => false,
                Some(Slot::Full(s)) => {
                    s.close();
                    s.analyzer.compact();
                    if let Some(n) = s.dups.take_sweep_wanted() {
                        self.sweep.push(old, meta.ts, n);
                    }
                    true
                }
                Some(Slot::First(f)) if !f.retired() => {
                    f.replace();
                    true
                }
                _ => false,
            };
            if live {
                // Replaced: closed now, retired once quiet.
                self.lru.touch(old, CLOSED, self.clock());
            }
        }
        self.make_room(out);
        let idx = self.slots.len();
        let id = pcapsleuth_core::StreamId(idx as u64);
        let st = Stream::boxed(id, client, server, meta, &mut self.spare);
        self.slots.push(Slot::Full(st));
        let slots = &self.slots;
        self.index
            .set(tag, idx, |j| slots.get(j).is_some_and(|s| s.holds(&key)));
        self.last_conv = Some((key, idx));
        self.went_live(idx);
        out.push(FlowEvent::FlowStarted(FlowStarted {
            stream: id,
            client,
            server,
            frame: meta.frame,
            ts: meta.ts,
        }));
        idx
    }

    /// Find or create the conversation of a (possibly quoted) TCP header and
    /// apply Wireshark's SYN rules. Returns the stream index, the direction and
    /// whether a bare SYN with a new ISN opened a new stream on reused ports.
    /// The stream may be in any form (`Slot`); a SYN/ACK that moves a base
    /// gives it its full state.
    pub(super) fn lookup(
        &mut self,
        src: Endpoint,
        dst: Endpoint,
        flags: TcpFlags,
        seq: SeqNum,
        meta: &PacketMeta,
        out: &mut Vec<FlowEvent>,
    ) -> (usize, Direction, bool) {
        // A stream created by a SYN/ACK has the SYN/ACK's receiver as client.
        let (c, s) = if flags.syn() && flags.ack() {
            (dst, src)
        } else {
            (src, dst)
        };
        // Consecutive packets mostly belong to one conversation: compare the
        // endpoints with the last one's before building a key.
        let cached = self.last_conv.and_then(|(k, i)| {
            ((k.lo == src && k.hi == dst) || (k.lo == dst && k.hi == src)).then_some(i)
        });
        let mut idx = match cached {
            Some(i) => i,
            None => {
                let key = FlowKey::new(src, dst);
                match self.known(&key) {
                    Some(i) => i,
                    None => self.new_stream(key, c, s, meta, out),
                }
            }
        };
        let mut dir = self.slots[idx].dir_of(src);
        let mut reused = false;
        let base = self.slots[idx].ws_base()[dir.index()];
        if flags.syn() && !flags.ack() {
            if base.is_some_and(|b| b != seq) {
                idx = self.new_stream(FlowKey::new(src, dst), c, s, meta, out);
                dir = self.slots[idx].dir_of(src);
                reused = true;
            }
        } else if flags.syn() && base.is_some_and(|b| b != seq) {
            // Wireshark moves base_seq (issue 16944); so do our relative numbers.
            if let Slot::Retired(r) = &mut self.slots[idx] {
                r.ws_base[dir.index()] = Some(seq);
            } else {
                if let Slot::First(_) = &self.slots[idx] {
                    self.ensure_full(idx, meta, out);
                }
                if let Some(st) = self.slots[idx].full_mut() {
                    st.ws_base[dir.index()] = Some(seq);
                    st.sides[dir.index()].set_base(seq, 0);
                }
            }
        }
        (idx, dir, reused)
    }

    /// The existing stream (index, direction of `src`) of an address/port
    /// pair, without creating one or applying SYN rules.
    pub(super) fn find(&mut self, src: Endpoint, dst: Endpoint) -> Option<(usize, Direction)> {
        let key = FlowKey::new(src, dst);
        let cached = self.last_conv.filter(|(k, _)| *k == key).map(|(_, i)| i);
        cached
            .or_else(|| self.known(&key))
            .map(|i| (i, self.slots[i].dir_of(src)))
    }
}
