#![doc = include_str!("../README.md")]
//!
//! # Code layout
//! `on_packet` keeps one compact [`Record`] per TCP/UDP packet and the span
//! of every [`Port`] (`record.rs`); at the end of the capture the copies of
//! each packet are grouped and classified (`cluster.rs`), [`diagnose`]
//! decides which packets were lost between two ports ([`Diagnosis`], plain
//! data) and [`render::render`] writes each one into a [`Finding`].

mod cluster;
mod diagnose;
mod index;
mod record;
pub mod render;

pub use cluster::{Cluster, COPY_WINDOW_NS, WEAK_COPY_WINDOW_NS};
pub use diagnose::{
    diagnose, Basis, CrossInterfaceLossEvidence, Diagnosis, NatKind, PortInfo, Shape,
    MIN_SERVICE_SOURCES, SYN_LADDER_WAIT_NS,
};
pub use index::FOLLOW_UP_HORIZON_NS;
pub use record::{port_of, record_of, Port, Record, SubPort, TcpBits, PACKET_OUTGOING};

use pcapsleuth_core::StreamRef;
use pcapsleuth_detect::{Bound, Detector, DetectorInfo, Finding, FinishContext, PacketContext};
use std::collections::BTreeMap;

/// Detector id.
pub const ID: &str = "cross-interface-loss";

/// Most packets recorded (`size_of::<Record>()`, at most 160 bytes, each):
/// beyond it the rest of the capture is not examined (the findings say
/// nothing about it).
pub const MAX_RECORDS: usize = 2_000_000;
/// When this many packets were recorded and all on one port, the capture is
/// a single-interface one: the records are dropped and no more are kept
/// (the interfaces of a multi-interface capture interleave long before).
pub const SINGLE_PORT_GIVE_UP: usize = 250_000;

/// First and last capture time and frame count of one port.
#[derive(Debug, Clone, Copy)]
struct Span {
    first: i64,
    last: i64,
    frames: u64,
}

/// The `cross-interface-loss` detector.
#[derive(Debug)]
pub struct CrossInterfaceLoss {
    records: Vec<Record>,
    spans: BTreeMap<Port, Span>,
    /// Recording stopped (single-port capture, or [`MAX_RECORDS`] reached).
    stopped: bool,
    /// [`MAX_RECORDS`], and the packets not recorded past it.
    records_bound: Bound,
    /// [`SINGLE_PORT_GIVE_UP`], and the packets not recorded after giving
    /// up (a limit only if a second port shows up later).
    single_port_bound: Bound,
}

impl Default for CrossInterfaceLoss {
    fn default() -> Self {
        CrossInterfaceLoss::with_limits(MAX_RECORDS, SINGLE_PORT_GIVE_UP)
    }
}

impl CrossInterfaceLoss {
    /// A detector recording at most `max_records` packets (default
    /// [`MAX_RECORDS`]) and giving up after `single_port_give_up` packets
    /// all on one port (default [`SINGLE_PORT_GIVE_UP`]). Packets past either
    /// are not examined; [`Detector::limits`] says how many, from which frame
    /// (the single-port give-up only when a second port appeared after it).
    pub fn with_limits(max_records: usize, single_port_give_up: usize) -> Self {
        CrossInterfaceLoss {
            records: Vec::new(),
            spans: BTreeMap::new(),
            stopped: false,
            records_bound: Bound::new("recorded packets", max_records as u64),
            single_port_bound: Bound::new(
                "packets recorded while the capture showed one interface",
                single_port_give_up as u64,
            ),
        }
    }

    /// The display name of a port.
    fn port_name(ctx: &FinishContext, p: Port) -> String {
        let base = ctx
            .interface(p.interface)
            .and_then(|i| i.name.clone())
            .unwrap_or_else(|| format!("interface {}", p.interface));
        match p.sub {
            SubPort::Whole => base,
            SubPort::Ifindex(i) => format!("ifindex {i}"),
            SubPort::SllIn => format!("{base} (in)"),
            SubPort::SllOut => format!("{base} (out)"),
        }
    }

    /// The ports with their names, spans and capture drops.
    fn port_infos(&self, ctx: &FinishContext) -> BTreeMap<Port, PortInfo> {
        self.spans
            .iter()
            .map(|(p, s)| {
                let drops = match p.sub {
                    SubPort::Whole => ctx.interface(p.interface).and_then(|i| i.if_drops),
                    _ => None,
                };
                (
                    *p,
                    PortInfo {
                        name: Self::port_name(ctx, *p),
                        first_ts: s.first,
                        last_ts: s.last,
                        frames: s.frames,
                        if_drops: drops,
                    },
                )
            })
            .collect()
    }
}

impl Detector for CrossInterfaceLoss {
    fn info(&self) -> DetectorInfo {
        DetectorInfo {
            id: ID,
            aliases: &[],
            title: "Packet entered the host on one interface and never left on the other",
            explain: include_str!("../README.md"),
        }
    }

    fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        let port = port_of(pkt.meta.interface, pkt.decoded);
        let ts = pkt.meta.ts.0;
        self.spans
            .entry(port)
            .and_modify(|s| {
                s.first = s.first.min(ts);
                s.last = s.last.max(ts);
                s.frames += 1;
            })
            .or_insert(Span {
                first: ts,
                last: ts,
                frames: 1,
            });
        if !self.stopped {
            let n = self.records.len() as u64;
            if n >= self.records_bound.limit {
                self.stopped = true;
            } else if n >= self.single_port_bound.limit && self.spans.len() < 2 {
                self.stopped = true;
                self.records = Vec::new();
            }
        }
        if self.stopped {
            // Which bound stopped the recording: the records kept say.
            if self.records.is_empty() {
                self.single_port_bound.refuse(pkt.meta.frame);
            } else {
                self.records_bound.refuse(pkt.meta.frame);
            }
            return;
        }
        let stream = pkt
            .flow
            .stream
            .map(StreamRef::tcp)
            .or(pkt.flow.udp_stream.map(StreamRef::udp));
        if let Some(r) = record_of(pkt.meta.frame, ts, port, pkt.decoded, stream) {
            self.records.push(r);
        }
    }

    /// [`MAX_RECORDS`] when reached; the single-port give-up when a second
    /// port appeared after it (on a one-port capture it is no limit: the
    /// detector needs two).
    fn limits(&self) -> Vec<Bound> {
        let single = self
            .single_port_bound
            .if_reached()
            .filter(|_| self.spans.len() >= 2);
        self.records_bound
            .if_reached()
            .into_iter()
            .chain(single)
            .collect()
    }

    fn finish(&mut self, ctx: &FinishContext) -> Vec<Finding> {
        if self.spans.len() < 2 {
            return Vec::new();
        }
        let ports = self.port_infos(ctx);
        diagnose(&self.records, &ports)
            .iter()
            .map(render::render)
            .collect()
    }
}

#[cfg(test)]
mod tests;
