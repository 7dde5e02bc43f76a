//! ICMP/ICMPv6 errors: one [`FlowEvent::IcmpError`] for every error that
//! quotes a packet. A quoted TCP header with both ports is matched to its
//! `tcp.stream` (as Wireshark's dissection of the quote does, see
//! `stream_ids.rs`) and to the captured segment it quotes.

use super::stream_ids::WS_MIN_QUOTED_TCP;
use super::{compact, FlowTable, PacketFlowInfo, PacketMeta, Slot, Stream};
use crate::{FlowEvent, IcmpErrorEvent, QuotedSegmentMatch};
use pcapsleuth_core::{Endpoint, StreamId};
use pcapsleuth_decode::{IcmpMessage, IpHeader, QuotedPacket};

impl FlowTable {
    /// One ICMP/ICMPv6 error quoting `q`: always emits one
    /// [`FlowEvent::IcmpError`]; a quoted TCP header with both ports is
    /// matched to its stream (and may create one, as in Wireshark). `udp` is
    /// the `udp.stream` the UDP table gave a quoted UDP header, if any.
    pub(super) fn on_icmp(
        &mut self,
        meta: &PacketMeta,
        ip: &IpHeader,
        m: &IcmpMessage,
        q: &QuotedPacket,
        udp: PacketFlowInfo,
        out: &mut Vec<FlowEvent>,
    ) -> PacketFlowInfo {
        let ports = q.src_port.zip(q.dst_port);
        let (sp, dp) = ports.unwrap_or((0, 0));
        let qsrc = Endpoint {
            addr: q.ip.src,
            port: sp,
        };
        let qdst = Endpoint {
            addr: q.ip.dst,
            port: dp,
        };
        let mut ev = IcmpErrorEvent {
            frame: meta.frame,
            ts: meta.ts,
            interface: meta.interface,
            kind: m.kind,
            icmp_type: m.icmp_type,
            code: m.code,
            mtu: m.mtu,
            icmp_src: ip.src,
            icmp_dst: ip.dst,
            quoted_src: qsrc,
            quoted_dst: qdst,
            quoted_proto: q.ip.protocol,
            quoted_ports: ports.is_some(),
            quoted_ip_id: q.ip.ip_id,
            quoted_ip_len: q.ip.total_len,
            quoted_seq: q.tcp_seq,
            stream: None,
            udp_stream: udp.udp_stream,
            quoted_dir: udp.udp_dir,
            quoted_rel_seq: None,
            matched: None,
        };
        let info = if ev.quotes_tcp() {
            self.match_quoted_tcp(meta, q, &mut ev, out)
        } else {
            PacketFlowInfo::default()
        };
        out.push(FlowEvent::IcmpError(ev));
        info
    }

    /// Match a quoted TCP header (both ports present) to its stream and to
    /// the captured segment it quotes; fill those fields of `ev`. Returns the
    /// stream Wireshark shows for the ICMP packet (none when Wireshark does
    /// not dissect the quote: fewer than [`WS_MIN_QUOTED_TCP`] bytes, or a
    /// non-first fragment).
    fn match_quoted_tcp(
        &mut self,
        meta: &PacketMeta,
        q: &QuotedPacket,
        ev: &mut IcmpErrorEvent,
        out: &mut Vec<FlowEvent>,
    ) -> PacketFlowInfo {
        let (qsrc, qdst) = (ev.quoted_src, ev.quoted_dst);
        let non_first_fragment = q.ip.fragment.is_some_and(|f| f.offset > 0);
        let ws_dissects = q.transport_bytes >= WS_MIN_QUOTED_TCP && !non_first_fragment;
        let found = if ws_dissects {
            let flags = q.tcp_flags.unwrap_or_default();
            let seq = q.tcp_seq.unwrap_or_default();
            let (idx, dir, _) = self.lookup(qsrc, qdst, flags, seq, meta, out);
            Some((idx, dir))
        } else {
            self.find(qsrc, qdst)
        };
        let Some((idx, dir)) = found else {
            return PacketFlowInfo::default();
        };
        let id = StreamId(idx as u64);
        ev.stream = Some(id);
        ev.quoted_dir = Some(dir);
        let cfg = self.config;
        let mut replayed = None;
        let st = match self.slots.get(idx) {
            Some(Slot::Full(st)) => Some(st.as_ref()),
            Some(Slot::First(f)) => {
                let mut scratch = std::mem::take(&mut self.scratch);
                let r: &Stream =
                    replayed.insert(compact::replay(f, id, &cfg, &mut scratch, &mut self.spare));
                self.scratch = scratch;
                Some(r)
            }
            // Retired: its sequence bases and transmissions are gone.
            _ => None,
        };
        if let Some(side) = st.map(|st| &st.sides[dir.index()]) {
            ev.quoted_rel_seq = q.tcp_seq.and_then(|s| side.peek(s));
            ev.matched =
                ev.quoted_rel_seq
                    .and_then(|rq| side.find_tx(rq))
                    .map(|t| QuotedSegmentMatch {
                        frame: t.frame,
                        ts: t.ts,
                        rel_seq: t.rel_seq,
                        payload_len: t.payload_len,
                        ip_len: t.ip_len,
                    });
        }
        // The replayed record's buffers serve the next stream made.
        if let Some(r) = replayed {
            self.spare = Some(r);
        }
        self.compact_quote_created(idx, meta);
        if ws_dissects {
            PacketFlowInfo {
                stream: Some(id),
                dir: Some(dir),
                ..PacketFlowInfo::default()
            }
        } else {
            PacketFlowInfo::default()
        }
    }
}
