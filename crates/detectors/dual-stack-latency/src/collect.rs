//! Per packet: latency samples (echo, handshake, request/response, send
//! path) and the facts that tie an IPv4 and an IPv6 address to one host
//! (link-layer source address, DNS answers).

use crate::stamp::{stamp_age, StampLayout};
use foldhash::{HashMap, HashSet};
use pcapsleuth_core::FrameNo;
use pcapsleuth_core::{Direction, Endpoint, StreamId};
use pcapsleuth_decode::{dns, IcmpKind, Transport};
use pcapsleuth_detect::{Bound, PacketContext};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::num::NonZeroU64;

/// Address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
}

impl Family {
    /// The family of `a`.
    pub fn of(a: &IpAddr) -> Family {
        if a.is_ipv4() {
            Family::Ipv4
        } else {
            Family::Ipv6
        }
    }
    /// "IPv4" / "IPv6".
    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6",
        }
    }
    /// The other family.
    pub fn other(self) -> Family {
        match self {
            Family::Ipv4 => Family::Ipv6,
            Family::Ipv6 => Family::Ipv4,
        }
    }
}

/// What a sample measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// ICMP/ICMPv6 echo request → its reply (same id and sequence), on the
    /// wire at the capture point.
    IcmpEchoRtt,
    /// TCP SYN → the ACK of the SYN/ACK (both legs of the handshake, so the
    /// round trip whichever side the capture was taken on); only
    /// handshakes with one SYN and one SYN/ACK (Karn).
    TcpHandshakeRtt,
    /// First client data after the server's last data → the server's next
    /// data, on one TCP connection (a request and its answer).
    TcpRequestResponse,
    /// Capture time of an echo request − the send timestamp iputils `ping`
    /// wrote into it just before `sendto()`: the sender's send path.
    SendPath,
}

impl Measure {
    /// Whether the measure is taken on the wire (request → answer) rather
    /// than inside the sender.
    pub fn on_wire(self) -> bool {
        self != Measure::SendPath
    }
}

/// One latency sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// What it measures.
    pub measure: Measure,
    /// The side that asked (echo requester, TCP client, pinging sender).
    pub client: IpAddr,
    /// The side that answered.
    pub server: IpAddr,
    /// TCP server port (0 for ICMP).
    pub server_port: u16,
    /// The measured time, ns.
    pub value_ns: i64,
    /// Timestamp of the first frame, ns.
    pub start_ns: i64,
    /// Timestamp of the last frame, ns.
    pub end_ns: i64,
    /// The frames it was measured on (request first); 0 = unused slot.
    pub frames: [u64; 3],
}

impl Sample {
    /// The frames it was measured on (request first).
    pub fn frames(&self) -> impl Iterator<Item = u64> + '_ {
        self.frames.iter().copied().filter(|f| *f != 0)
    }
}

/// Most samples kept per capture (memory bound, about 100 bytes each);
/// more are dropped.
pub const MAX_SAMPLES: usize = 500_000;
/// Most samples kept per measure and (client, server) address pair: ten
/// thousand samples give the median and p90 as well as more would.
pub const MAX_SAMPLES_PER_PAIR: u32 = 10_000;
/// Most outstanding echo requests, and most TCP connections, tracked at
/// once: a connection is forgotten when its stream ends
/// ([`Collector::end_stream`]), an unanswered echo request after
/// 60 s once the cap is reached; past it new ones are refused (a
/// `detector_limit` warning).
pub const MAX_PENDING: usize = 200_000;
/// Most host addresses remembered per capture for pairing by MAC address
/// ([`Collector::mac_sources`], all MACs together) and for the initial-TTL
/// counts ([`Collector::ttl_seen`]); addresses first seen after that are not
/// remembered (a SYN scan from 2 million addresses would cost hundreds of
/// MB). Seed 001's host had thousands of addresses: far below.
pub const MAX_ADDRESSES: usize = 200_000;
/// A second SYN or SYN/ACK within this time of the first is another
/// sighting of the same packet (another interface of `-i any`, a bridge),
/// not a retransmission (ns): 100 ms, far below any SYN retransmission
/// timeout (Linux `TCP_TIMEOUT_INIT` 1 s).
const COPY_WINDOW_NS: i64 = 100_000_000;
/// An echo request older than this is replaced by a new one with the same
/// id and sequence (ns): 60 s.
const ECHO_REUSE_NS: i64 = 60_000_000_000;
/// At the [`MAX_PENDING`] cap, the echo requests older than
/// [`ECHO_REUSE_NS`] are dropped at most this often (ns of capture time):
/// 1 s.
const ECHO_PURGE_NS: i64 = 1_000_000_000;

/// Initial TTL / hop limit values of common stacks (Linux, BSD, macOS 64;
/// Windows 128; network equipment and IPv6 ND 255). A packet captured with
/// one of them has not crossed a router yet.
pub fn initial_ttl(ttl: u8) -> bool {
    matches!(ttl, 64 | 128 | 255)
}

/// Whether `a` names one host: not unspecified, loopback, multicast,
/// broadcast or (IPv6) link-local (a link-local address is not what a
/// dual-stack peer is reached at).
pub fn host_address(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => {
            !(v.is_unspecified() || v.is_loopback() || v.is_multicast() || v.is_broadcast())
        }
        IpAddr::V6(v) => {
            let link_local = (v.segments()[0] & 0xffc0) == 0xfe80;
            !(v.is_unspecified() || v.is_loopback() || v.is_multicast() || link_local)
        }
    }
}

/// Entries of the direct-mapped cache of per-address TTL counts in front
/// of [`Collector::ttl_seen`] (a power of two).
const TTL_CACHE: usize = 64;

/// Entries of the direct-mapped cache of [`Cached`] per `tcp.stream` in
/// front of [`Collector::conn_index`] (a power of two: stream ids are dense,
/// so the last 65,536 streams never collide). Fixed at 1.5 MiB however many
/// streams the capture has; a stream pushed out only costs a map lookup.
const STREAM_CACHE: usize = 1 << 16;

/// One entry of the per-stream cache: the stream it holds ([`u64::MAX`]:
/// none) and what is known per direction of travel.
#[derive(Debug, Clone, Copy)]
struct StreamCached {
    stream: u64,
    dirs: [Cached; 2],
}

impl StreamCached {
    const EMPTY: StreamCached = StreamCached {
        stream: u64::MAX,
        dirs: [Cached::Unknown; 2],
    };
}

/// A TCP connection's addresses and ports: (client, client port, server, server port).
type ConnKey = (IpAddr, u16, IpAddr, u16);

/// What is known of the connection a `tcp.stream` direction's packets name
/// (its sender → receiver key): saves hashing the addresses per packet.
/// Sound because every packet of one `tcp.stream` and direction has the
/// same addresses and ports (the stream is that conversation); a connection
/// is only removed when its owner stream ends ([`Collector::end_stream`]),
/// and an `At` entry is only trusted for the connection's owner.
#[derive(Debug, Default, Clone, Copy)]
enum Cached {
    /// Not looked up yet.
    #[default]
    Unknown,
    /// The connection at this index of `conns` (trusted while the stream
    /// asking owns it: its slot may since have been freed and reused).
    At(u32),
    /// No connection had that key when [`Collector::added`] had this value
    /// (valid until a connection is added).
    Absent(u32),
}

/// A TCP connection's handshake and request in progress (64 bytes).
#[derive(Debug, Clone)]
struct Conn {
    syn: Option<Seen>,
    synack: Option<Seen>,
    pending_request: Option<Seen>,
    /// `tcp.stream` of its latest SYN ([`u64::MAX`]: none): the stream
    /// whose end forgets it.
    owner: u64,
    syns: u16,
    synacks: u16,
    established: bool,
}

impl Default for Conn {
    fn default() -> Self {
        Conn {
            syn: None,
            synack: None,
            pending_request: None,
            owner: u64::MAX,
            syns: 0,
            synacks: 0,
            established: false,
        }
    }
}

/// A frame and its capture time (ns) in 16 bytes: the frame number is kept
/// plus one so that `Option<Seen>` needs no tag.
#[derive(Debug, Clone, Copy)]
struct Seen {
    frame_plus_one: NonZeroU64,
    ts: i64,
}

impl Seen {
    /// `None` only for frame `u64::MAX` (a count no capture reaches).
    fn new(frame: u64, ts: i64) -> Option<Seen> {
        Some(Seen {
            frame_plus_one: NonZeroU64::new(frame.wrapping_add(1))?,
            ts,
        })
    }

    /// (frame, ns).
    fn pair(self) -> (u64, i64) {
        (self.frame_plus_one.get() - 1, self.ts)
    }
}

/// What `on_packet` keeps.
#[derive(Debug, Default)]
pub struct Collector {
    /// Every sample, in capture order.
    pub samples: Vec<Sample>,
    /// Per link-layer source address (a MAC), the host addresses it sent
    /// from with an initial TTL (so not forwarded by a router).
    /// Unordered (a per-packet lookup among up to [`MAX_ADDRESSES`]): read it
    /// in a sorted order wherever order can reach a report.
    pub mac_sources: HashMap<[u8; 6], HashSet<IpAddr>>,
    /// Per DNS name (presentation form: lower case, no trailing dot), the A
    /// and AAAA addresses answered for it. Unordered: read it in name order
    /// (as `pair::hosts` does) wherever order can reach a report.
    pub dns_names: HashMap<String, AddrSet>,
    /// Names of `dns_names` answered in one address family when they came,
    /// oldest first: at the [`Bounds::names`] cap the oldest of them that
    /// still has one family only is forgotten for a new name (one that
    /// gained its other family since, or was forgotten, is skipped).
    one_family: VecDeque<String>,
    /// The question name of the DNS answer being read (reused: no
    /// allocation per answer for a name already kept).
    name_scratch: String,
    /// Per source address: packets with an initial TTL, packets without;
    /// the latest counts may still be in a cache: read them with
    /// [`Collector::ttl_counts`].
    pub ttl_seen: HashMap<IpAddr, (u64, u64)>,
    /// Direct-mapped cache in front of `ttl_seen` ([`TTL_CACHE`] entries,
    /// indexed by a hash of the address and checked against it).
    ttl_cache: Vec<Option<(IpAddr, u64, u64)>>,
    /// The last (MAC, address) pairs put in `mac_sources` (inserting one
    /// again changes nothing: skipped, no tree walk per packet).
    mac_recent: [Option<([u8; 6], IpAddr)>; 2],
    /// Addresses in `mac_sources`, all MACs together (at most [`MAX_ADDRESSES`]).
    mac_addresses: usize,
    /// Send stamps decoded, per layout.
    pub stamp_layouts: BTreeMap<&'static str, u64>,
    per_pair: HashMap<(Measure, IpAddr, IpAddr), u32>,
    echo_requests: HashMap<(IpAddr, IpAddr, u16, u16), (u64, i64)>,
    /// Capture time (ns) the unanswered echo requests were last purged.
    echo_purged_ns: i64,
    /// Connections by key: index into `conns`.
    conn_index: HashMap<ConnKey, u32>,
    conns: Vec<Conn>,
    /// Slots of `conns` whose connection ended ([`Collector::end_stream`]),
    /// reused before `conns` grows.
    free_conns: Vec<u32>,
    /// Connections added so far (wrapping): the generation an
    /// [`Cached::Absent`] entry is valid for.
    added: u32,
    /// Per `tcp.stream` and direction of travel: the connection its packets'
    /// sender → receiver key names. Direct-mapped by stream id
    /// ([`STREAM_CACHE`] entries, allocated at the first TCP packet), so
    /// bounded however many streams the capture has.
    by_stream: Vec<StreamCached>,
    /// The capture-wide caps and what went past them.
    pub bounds: Bounds,
}

/// The collector's capture-wide caps ([`MAX_SAMPLES`], [`MAX_PENDING`],
/// [`MAX_ADDRESSES`]), each with what it refused: reported by
/// [`Collector::limits`] as `detector_limit` warnings.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Latency samples ([`MAX_SAMPLES`]).
    pub samples: Bound,
    /// TCP connections and echo requests in progress ([`MAX_PENDING`]).
    pub pending: Bound,
    /// DNS names with A/AAAA answers ([`MAX_PENDING`]); past it, a new name
    /// replaces the oldest one answered in one family only.
    pub names: Bound,
    /// Host addresses with TTL counts or a link-layer source ([`MAX_ADDRESSES`]).
    pub addresses: Bound,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            samples: Bound::new("latency samples", MAX_SAMPLES as u64),
            pending: Bound::new(
                "TCP connections and ICMP echo requests in progress",
                MAX_PENDING as u64,
            ),
            names: Bound::new("DNS names with A or AAAA answers", MAX_PENDING as u64)
                .with_effect(
                    "it forgot the oldest names answered in one address family only to make room (and refused the new name when every kept one had both): a name whose A and AAAA answers came that far apart is not paired",
                ),
            addresses: Bound::new("host addresses", MAX_ADDRESSES as u64),
        }
    }
}

/// Index of `a` in the TTL cache: a multiply-shift hash of its bytes (only
/// spreads the cache; a collision just costs a map update).
fn ttl_slot(a: &IpAddr) -> usize {
    let word = match a {
        IpAddr::V4(v) => u64::from(u32::from(*v)),
        IpAddr::V6(v) => {
            let x = u128::from(*v);
            (x as u64) ^ ((x >> 64) as u64)
        }
    };
    (word.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % TTL_CACHE
}

impl Collector {
    /// The caps that refused something, in [`Bounds`] order.
    pub fn limits(&self) -> Vec<Bound> {
        let b = &self.bounds;
        [b.samples, b.pending, b.names, b.addresses]
            .iter()
            .filter_map(Bound::if_reached)
            .collect()
    }

    fn push(&mut self, s: Sample) {
        if self.samples.len() as u64 >= self.bounds.samples.limit {
            let last = s.frames.iter().copied().max().unwrap_or(0);
            self.bounds.samples.refuse(FrameNo(last));
            return;
        }
        let n = self
            .per_pair
            .entry((s.measure, s.client, s.server))
            .or_default();
        if *n < MAX_SAMPLES_PER_PAIR {
            *n += 1;
            self.samples.push(s);
        }
    }

    /// Take one packet.
    pub fn on_packet(&mut self, pkt: &PacketContext<'_>) {
        let d = pkt.decoded;
        let Some(ip) = d.ip else { return };
        let (frame, ts) = (pkt.meta.frame.get(), pkt.meta.ts.0);
        if d.outer_ip.is_none() && host_address(&ip.src) {
            let initial = initial_ttl(ip.ttl);
            self.count_ttl(ip.src, initial, frame);
            if initial {
                if let Some(mac) = d.link.src_mac.filter(unicast_mac) {
                    self.note_mac(mac, ip.src, frame);
                }
            }
        }
        match d.transport {
            Transport::Icmp(m) => {
                if let Some(echo) = m.echo {
                    let request = m.kind == IcmpKind::EchoRequest;
                    let key = if request {
                        (ip.src, ip.dst, echo.id, echo.seq)
                    } else {
                        (ip.dst, ip.src, echo.id, echo.seq)
                    };
                    if request {
                        self.echo_request(key, frame, ts, echo.data);
                    } else if m.kind == IcmpKind::EchoReply {
                        self.echo_reply(key, frame, ts);
                    }
                }
            }
            Transport::Tcp(t) => {
                let at = pkt.flow.stream.zip(pkt.flow.dir);
                self.tcp(
                    at,
                    (ip.src, t.src_port, ip.dst, t.dst_port),
                    t.flags.syn(),
                    t.flags.ack(),
                    t.payload_len,
                    frame,
                    ts,
                );
            }
            Transport::Udp(u) if u.src_port == pcapsleuth_decode::dns::DNS_PORT => {
                self.dns_answer(u.payload, frame);
            }
            _ => {}
        }
    }

    fn echo_request(&mut self, key: (IpAddr, IpAddr, u16, u16), frame: u64, ts: i64, data: &[u8]) {
        let fresh = match self.echo_requests.get(&key) {
            Some(&(_, t0)) => ts.saturating_sub(t0) > ECHO_REUSE_NS,
            None if (self.echo_requests.len() as u64) < self.bounds.pending.limit => true,
            None => {
                // At the cap: forget the requests no reply can be expected
                // for any more (unanswered for [`ECHO_REUSE_NS`]), at most
                // once per [`ECHO_PURGE_NS`] of capture time.
                if ts.saturating_sub(self.echo_purged_ns) >= ECHO_PURGE_NS {
                    self.echo_purged_ns = ts;
                    self.echo_requests
                        .retain(|_, &mut (_, t0)| ts.saturating_sub(t0) <= ECHO_REUSE_NS);
                }
                if (self.echo_requests.len() as u64) < self.bounds.pending.limit {
                    true
                } else {
                    self.bounds.pending.refuse(FrameNo(frame));
                    false
                }
            }
        };
        if !fresh {
            return; // another sighting of the same request, or over the cap
        }
        self.echo_requests.insert(key, (frame, ts));
        if let Some((layout, age)) = stamp_age(data, ts) {
            *self.stamp_layouts.entry(layout_name(layout)).or_default() += 1;
            self.push(Sample {
                measure: Measure::SendPath,
                client: key.0,
                server: key.1,
                server_port: 0,
                value_ns: age,
                start_ns: ts,
                end_ns: ts,
                frames: [frame, 0, 0],
            });
        }
    }

    fn echo_reply(&mut self, key: (IpAddr, IpAddr, u16, u16), frame: u64, ts: i64) {
        let Some((req_frame, req_ts)) = self.echo_requests.remove(&key) else {
            return;
        };
        let rtt = ts.saturating_sub(req_ts);
        if rtt >= 0 {
            self.push(Sample {
                measure: Measure::IcmpEchoRtt,
                client: key.0,
                server: key.1,
                server_port: 0,
                value_ns: rtt,
                start_ns: req_ts,
                end_ns: ts,
                frames: [req_frame, frame, 0],
            });
        }
    }

    /// `mac` sent from host address `a` with an initial TTL (frame `frame`).
    fn note_mac(&mut self, mac: [u8; 6], a: IpAddr, frame: u64) {
        let pair = Some((mac, a));
        if self.mac_recent.contains(&pair) {
            return;
        }
        self.mac_recent = [pair, self.mac_recent[0]];
        if self.mac_addresses as u64 >= self.bounds.addresses.limit {
            if !self.mac_sources.get(&mac).is_some_and(|s| s.contains(&a)) {
                self.bounds.addresses.refuse(FrameNo(frame));
            }
            return;
        }
        if self.mac_sources.entry(mac).or_default().insert(a) {
            self.mac_addresses += 1;
        }
    }

    /// Count a packet from `a` (frame `frame`), with an initial TTL or not.
    fn count_ttl(&mut self, a: IpAddr, initial: bool, frame: u64) {
        if self.ttl_cache.is_empty() {
            self.ttl_cache = vec![None; TTL_CACHE];
        }
        let Some(slot) = self.ttl_cache.get_mut(ttl_slot(&a)) else {
            return;
        };
        match slot {
            Some((b, _, _)) if *b == a => {}
            _ => {
                if let Some((b, i, o)) = slot.take() {
                    let room = (self.ttl_seen.len() as u64) < self.bounds.addresses.limit;
                    if let Some(e) = match self.ttl_seen.get_mut(&b) {
                        Some(e) => Some(e),
                        None if room => Some(self.ttl_seen.entry(b).or_default()),
                        None => {
                            self.bounds.addresses.refuse(FrameNo(frame));
                            None
                        }
                    } {
                        e.0 += i;
                        e.1 += o;
                    }
                }
                *slot = Some((a, 0, 0));
            }
        }
        if let Some((_, i, o)) = slot {
            if initial {
                *i += 1;
            } else {
                *o += 1;
            }
        }
    }

    /// Packets from `a` with an initial TTL and without; `None` when none was seen.
    pub fn ttl_counts(&self, a: &IpAddr) -> Option<(u64, u64)> {
        let cached = self
            .ttl_cache
            .get(ttl_slot(a))
            .copied()
            .flatten()
            .filter(|(b, _, _)| b == a)
            .map(|(_, i, o)| (i, o));
        match (self.ttl_seen.get(a).copied(), cached) {
            (Some(m), Some(c)) => Some((m.0 + c.0, m.1 + c.1)),
            (m, c) => m.or(c),
        }
    }

    /// The index in `conns` of the connection keyed `key`, which the
    /// packets of `at` (stream, direction) name as sender → receiver when
    /// `at` is known (then cached per stream and direction).
    /// `key` is only built when the cache cannot answer.
    fn conn_of(
        &mut self,
        at: Option<(StreamId, Direction)>,
        key: impl Fn() -> ConnKey,
    ) -> Option<usize> {
        if self.by_stream.is_empty() && at.is_some() {
            self.by_stream = vec![StreamCached::EMPTY; STREAM_CACHE];
        }
        // (entry index, stream, direction index)
        let cache = at.map(|(s, d)| {
            let i = (s.get() % STREAM_CACHE as u64) as usize;
            (i, s.get(), d.index())
        });
        let generation = self.added;
        let cached = cache.and_then(|(i, s, d)| {
            self.by_stream
                .get(i)
                .filter(|e| e.stream == s)
                .map(|e| (e.dirs[d], s))
        });
        match cached {
            Some((Cached::At(j), s))
                if self.conns.get(j as usize).is_some_and(|c| c.owner == s) =>
            {
                return Some(j as usize)
            }
            Some((Cached::Absent(n), _)) if n == generation => return None,
            _ => {}
        }
        let found = self.conn_index.get(&key()).copied();
        if let Some((i, s, d)) = cache {
            if let Some(e) = self.by_stream.get_mut(i) {
                if e.stream != s {
                    *e = StreamCached {
                        stream: s,
                        dirs: [Cached::Unknown; 2],
                    };
                }
                e.dirs[d] = found.map_or(Cached::Absent(generation), Cached::At);
            }
        }
        found.map(|j| j as usize)
    }

    /// `stream`, between `client` and `server`, left the flow table
    /// ([`pcapsleuth_flow::FlowEnded`]): forget the connection it owns (its
    /// handshake and any request still unanswered), so the connections kept
    /// are those of live streams and [`MAX_PENDING`] bounds concurrent ones,
    /// not every connection of the capture. A connection a newer stream on
    /// the same ports took over stays.
    pub fn end_stream(&mut self, stream: StreamId, client: Endpoint, server: Endpoint) {
        let keys = [
            (client.addr, client.port, server.addr, server.port),
            (server.addr, server.port, client.addr, client.port),
        ];
        for key in keys {
            let Some(&j) = self.conn_index.get(&key) else {
                continue;
            };
            let Some(c) = self.conns.get_mut(j as usize) else {
                continue;
            };
            if c.owner != stream.get() {
                continue;
            }
            *c = Conn::default();
            self.conn_index.remove(&key);
            self.free_conns.push(j);
        }
        let i = (stream.get() % STREAM_CACHE as u64) as usize;
        if let Some(e) = self
            .by_stream
            .get_mut(i)
            .filter(|e| e.stream == stream.get())
        {
            *e = StreamCached::EMPTY;
        }
    }

    fn conn_mut(
        &mut self,
        at: Option<(StreamId, Direction)>,
        key: impl Fn() -> ConnKey,
    ) -> Option<&mut Conn> {
        let i = self.conn_of(at, key)?;
        self.conns.get_mut(i)
    }

    #[allow(clippy::too_many_arguments)]
    fn tcp(
        &mut self,
        at: Option<(StreamId, Direction)>,
        (src, sport, dst, dport): ConnKey,
        syn: bool,
        ack: bool,
        payload_len: u32,
        frame: u64,
        ts: i64,
    ) {
        let forward = || (src, sport, dst, dport);
        let reverse = || (dst, dport, src, sport);
        let back = at.map(|(s, d)| (s, d.reverse()));
        if syn && !ack {
            let existing = self.conn_of(at, forward);
            let live = self.conns.len() - self.free_conns.len();
            if existing.is_none() && live as u64 >= self.bounds.pending.limit {
                self.bounds.pending.refuse(FrameNo(frame));
                return;
            }
            let i = match existing {
                Some(i) => i,
                None => {
                    let i = match self.free_conns.pop() {
                        Some(j) => j as usize,
                        None => {
                            self.conns.push(Conn::default());
                            self.conns.len() - 1
                        }
                    };
                    self.conn_index
                        .insert(forward(), u32::try_from(i).unwrap_or(u32::MAX));
                    self.added = self.added.wrapping_add(1);
                    i
                }
            };
            let Some(c) = self.conns.get_mut(i) else {
                return;
            };
            if c.synack.is_some() {
                *c = Conn::default(); // a new connection on the same ports
            }
            c.owner = at.map_or(u64::MAX, |(s, _)| s.get());
            if !matches!(c.syn.map(Seen::pair), Some((_, t0)) if ts.saturating_sub(t0) <= COPY_WINDOW_NS)
            {
                c.syns = c.syns.saturating_add(1);
            }
            if c.syn.is_none() {
                c.syn = Seen::new(frame, ts);
            }
            return;
        }
        if syn {
            if let Some(c) = self.conn_mut(back, reverse) {
                if !matches!(c.synack.map(Seen::pair), Some((_, t0)) if ts.saturating_sub(t0) <= COPY_WINDOW_NS)
                {
                    c.synacks = c.synacks.saturating_add(1);
                }
                if c.synack.is_none() {
                    c.synack = Seen::new(frame, ts);
                }
            }
            return;
        }
        if let Some(c) = self.conn_mut(at, forward) {
            // Client → server.
            let mut sample = None;
            if !c.established && ack {
                if let (Some(s), Some(sa)) = (c.syn.map(Seen::pair), c.synack.map(Seen::pair)) {
                    c.established = true;
                    if c.syns == 1 && c.synacks == 1 && ts >= s.1 {
                        sample = Some(Sample {
                            measure: Measure::TcpHandshakeRtt,
                            client: src,
                            server: dst,
                            server_port: dport,
                            value_ns: ts - s.1,
                            start_ns: s.1,
                            end_ns: ts,
                            frames: [s.0, sa.0, frame],
                        });
                    }
                }
            }
            if c.established && payload_len > 0 && c.pending_request.is_none() {
                c.pending_request = Seen::new(frame, ts);
            }
            if let Some(s) = sample {
                self.push(s);
            }
        } else if let Some(c) = self.conn_mut(back, reverse) {
            // Server → client.
            if payload_len == 0 || !c.established {
                return;
            }
            if let Some((req_frame, req_ts)) = c.pending_request.take().map(Seen::pair) {
                if ts >= req_ts {
                    self.push(Sample {
                        measure: Measure::TcpRequestResponse,
                        client: dst,
                        server: src,
                        server_port: sport,
                        value_ns: ts - req_ts,
                        start_ns: req_ts,
                        end_ns: ts,
                        frames: [req_frame, frame, 0],
                    });
                }
            }
        }
    }

    /// A and AAAA answers of a DNS response, filed under the question name.
    fn dns_answer(&mut self, payload: &[u8], frame: u64) {
        let Some(msg) = dns::parse(payload) else {
            return;
        };
        let Some(q) = msg.question else { return };
        if !msg.header.is_response() || msg.header.rcode() != 0 {
            return;
        }
        if q.qtype != dns::QTYPE_A && q.qtype != dns::QTYPE_AAAA {
            return;
        }
        let addrs = crate::dnsrr::addresses(payload, msg.header.qdcount, msg.header.ancount);
        if addrs.is_empty() {
            return;
        }
        let mut name = std::mem::take(&mut self.name_scratch);
        name.clear();
        q.name.push_presentation(&mut name);
        if let Some(kept) = self.dns_names.get_mut(name.as_str()) {
            for a in addrs {
                add_address(kept, a);
            }
            self.name_scratch = name;
            return;
        }
        if (self.dns_names.len() as u64) >= self.bounds.names.limit {
            // Make room: forget the oldest name still answered in one
            // family only (its other family did not come while every name
            // since was answered), or refuse this one when there is none.
            self.bounds.names.refuse(FrameNo(frame));
            let forgotten = loop {
                let Some(old) = self.one_family.pop_front() else {
                    break false;
                };
                if self.dns_names.get(&old).is_some_and(|a| !both_families(a)) {
                    self.dns_names.remove(&old);
                    break true;
                }
            };
            if !forgotten {
                self.name_scratch = name;
                return;
            }
        }
        if !both_families(&addrs) {
            self.one_family.push_back(name.clone());
        }
        self.dns_names.insert(name, address_set(addrs));
    }
}

/// The addresses answered for one DNS name: sorted, each once. Most names
/// have one or two (an A and an AAAA), kept inline; a `BTreeSet` took a
/// 200-byte node per name (40 MB at [`Bounds::names`]' 200,000 names).
pub type AddrSet = smallvec::SmallVec<[IpAddr; 2]>;

/// Put `a` in `set` (sorted, each address once).
pub fn add_address(set: &mut AddrSet, a: IpAddr) {
    if let Err(at) = set.binary_search(&a) {
        set.insert(at, a);
    }
}

/// `addrs` as an [`AddrSet`] (sorted, each address once).
pub fn address_set(addrs: impl IntoIterator<Item = IpAddr>) -> AddrSet {
    let mut set: AddrSet = addrs.into_iter().collect();
    set.sort_unstable();
    set.dedup();
    set
}

/// Whether `addrs` holds addresses of both families.
pub(crate) fn both_families<'a>(addrs: impl IntoIterator<Item = &'a IpAddr>) -> bool {
    let (mut v4, mut v6) = (false, false);
    for a in addrs {
        if a.is_ipv4() {
            v4 = true;
        } else {
            v6 = true;
        }
    }
    v4 && v6
}

fn unicast_mac(m: &[u8; 6]) -> bool {
    m[0] & 1 == 0 && m.iter().any(|b| *b != 0)
}

/// The evidence name of a stamp layout.
pub fn layout_name(l: StampLayout) -> &'static str {
    match l {
        StampLayout::Timeval64Le => "timeval64_le",
        StampLayout::Timeval32Le => "timeval32_le",
    }
}

#[cfg(test)]
mod size_tests {
    use super::{Collector, Conn, ConnKey, Seen, STREAM_CACHE};
    use pcapsleuth_core::{Direction, Endpoint, StreamId};
    use std::net::{IpAddr, Ipv4Addr};

    fn key(host: u8, port: u16) -> ConnKey {
        let a = |h| IpAddr::V4(Ipv4Addr::new(192, 0, 2, h));
        (a(host), port, a(100), 80)
    }

    #[test]
    fn streams_sharing_a_cache_entry_each_find_their_own_connection() {
        let mut c = Collector::default();
        let first = StreamId(7);
        let clash = StreamId(7 + STREAM_CACHE as u64);
        let c2s = Direction::ClientToServer;
        c.tcp(Some((first, c2s)), key(1, 1000), true, false, 0, 1, 0);
        c.tcp(Some((clash, c2s)), key(2, 2000), true, false, 0, 2, 0);
        // The clashing stream pushed the first out of its entry: both are
        // still answered by their own key, in either order, many times.
        for _ in 0..3 {
            assert_eq!(c.conn_of(Some((first, c2s)), || key(1, 1000)), Some(0));
            assert_eq!(c.conn_of(Some((clash, c2s)), || key(2, 2000)), Some(1));
        }
        // A stream with no connection is absent, and stays correct once one
        // is added for it.
        let other = StreamId(7 + 2 * STREAM_CACHE as u64);
        assert_eq!(c.conn_of(Some((other, c2s)), || key(3, 3000)), None);
        c.tcp(Some((other, c2s)), key(3, 3000), true, false, 0, 3, 0);
        assert_eq!(c.conn_of(Some((other, c2s)), || key(3, 3000)), Some(2));
        assert_eq!(c.by_stream.len(), STREAM_CACHE);
    }

    fn ends(k: ConnKey) -> (Endpoint, Endpoint) {
        (
            Endpoint {
                addr: k.0,
                port: k.1,
            },
            Endpoint {
                addr: k.2,
                port: k.3,
            },
        )
    }

    /// A stream's end forgets the connection it owns and frees its slot;
    /// a connection a newer stream on the same ports took over stays; with
    /// connections ending, the cap bounds concurrent ones, not all.
    #[test]
    fn a_stream_end_forgets_only_the_connection_it_owns() {
        let c2s = Direction::ClientToServer;
        let s2c = Direction::ServerToClient;
        let mut c = Collector::default();
        c.bounds.pending.limit = 2;
        let (a, b) = (StreamId(1), StreamId(2));
        // Stream 1: SYN, SYN/ACK (looked up and cached), then its end.
        c.tcp(Some((a, c2s)), key(1, 1000), true, false, 0, 1, 0);
        let rev = |k: ConnKey| (k.2, k.3, k.0, k.1);
        c.tcp(Some((a, s2c)), rev(key(1, 1000)), true, true, 0, 2, 10);
        assert_eq!(c.conn_of(Some((a, c2s)), || key(1, 1000)), Some(0));
        let (cl, sv) = ends(key(1, 1000));
        c.end_stream(a, cl, sv);
        assert_eq!(c.conn_of(Some((a, c2s)), || key(1, 1000)), None);
        assert_eq!((c.conn_index.len(), c.free_conns.len()), (0, 1));
        // Stream 2 reuses the slot; stream 1's late packet finds nothing.
        c.tcp(Some((b, c2s)), key(2, 2000), true, false, 0, 3, 20);
        assert_eq!(c.conns.len(), 1);
        assert_eq!(c.conn_of(Some((b, c2s)), || key(2, 2000)), Some(0));
        assert_eq!(c.conn_of(Some((a, c2s)), || key(1, 1000)), None);
        // Stream 3 on stream 2's ports (after its SYN/ACK) takes the
        // connection over: stream 2's end leaves it.
        c.tcp(Some((b, s2c)), rev(key(2, 2000)), true, true, 0, 4, 30);
        let three = StreamId(3);
        c.tcp(Some((three, c2s)), key(2, 2000), true, false, 0, 5, 40);
        let (cl, sv) = ends(key(2, 2000));
        c.end_stream(b, cl, sv);
        assert_eq!(c.conn_of(Some((three, c2s)), || key(2, 2000)), Some(0));
        // A stream that never owned it keeps a cached index to it: once the
        // slot holds another connection, that index is not trusted.
        let four = StreamId(4);
        c.tcp(Some((four, c2s)), key(2, 2000), false, true, 0, 6, 45);
        assert_eq!(c.conn_of(Some((four, c2s)), || key(2, 2000)), Some(0));
        c.end_stream(three, sv, cl);
        assert!(c.conn_index.is_empty());
        c.tcp(
            Some((StreamId(5), c2s)),
            key(5, 5000),
            true,
            false,
            0,
            7,
            46,
        );
        assert_eq!(c.conn_of(Some((four, c2s)), || key(2, 2000)), None);
        c.end_stream(StreamId(5), ends(key(5, 5000)).0, ends(key(5, 5000)).1);
        assert!(c.conn_index.is_empty());
        // Ten connections one after the other under a cap of 2: none refused.
        for i in 0..10u16 {
            let s = StreamId(10 + u64::from(i));
            c.tcp(Some((s, c2s)), key(9, 3000 + i), true, false, 0, 6, 50);
            let (cl, sv) = ends(key(9, 3000 + i));
            c.end_stream(s, cl, sv);
        }
        assert_eq!(c.limits(), vec![]);
        assert_eq!(c.conns.len(), 1);
        // Three at once: the third refused.
        for i in 0..3u16 {
            let s = StreamId(30 + u64::from(i));
            c.tcp(
                Some((s, c2s)),
                key(8, 4000 + i),
                true,
                false,
                0,
                7 + u64::from(i),
                60,
            );
        }
        assert_eq!(c.bounds.pending.refused, 1);
        assert_eq!(
            c.bounds.pending.first_frame,
            Some(pcapsleuth_core::FrameNo(9))
        );
    }

    /// Unanswered echo requests fill the cap; once no reply can be expected
    /// for them (60 s), a new request makes room by dropping them.
    #[test]
    fn unanswered_echo_requests_make_room_after_a_minute() {
        let mut c = Collector::default();
        c.bounds.pending.limit = 2;
        let a = |h| IpAddr::V4(Ipv4Addr::new(192, 0, 2, h));
        let sec = 1_000_000_000;
        for seq in 0..3u16 {
            c.echo_request((a(1), a(2), 7, seq), u64::from(seq) + 1, sec, &[]);
        }
        assert_eq!(c.bounds.pending.refused, 1);
        // 30 s later: still expected, still refused.
        c.echo_request((a(1), a(2), 7, 10), 4, 31 * sec, &[]);
        assert_eq!((c.bounds.pending.refused, c.echo_requests.len()), (2, 2));
        // 61.5 s after the first two: they are dropped, this one is kept.
        c.echo_request((a(1), a(2), 7, 11), 5, 62 * sec + sec / 2, &[]);
        assert_eq!((c.bounds.pending.refused, c.echo_requests.len()), (2, 1));
    }

    #[test]
    fn a_connection_record_is_64_bytes() {
        assert_eq!(std::mem::size_of::<Option<Seen>>(), 16);
        assert!(
            std::mem::size_of::<Conn>() <= 64,
            "{}",
            std::mem::size_of::<Conn>()
        );
        // Frame 0 (synthetic inputs) round-trips; only u64::MAX is not kept.
        assert_eq!(Seen::new(0, -5).map(Seen::pair), Some((0, -5)));
        assert_eq!(
            Seen::new(u64::MAX - 1, 7).map(Seen::pair),
            Some((u64::MAX - 1, 7))
        );
        assert!(Seen::new(u64::MAX, 7).is_none());
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    /// A DNS response (id 7, no error) for `name` with one A or AAAA answer
    /// per address.
    fn answer(name: &str, addrs: &[IpAddr]) -> Vec<u8> {
        let mut m = vec![0, 7, 0x81, 0x80, 0, 1, 0, addrs.len() as u8, 0, 0, 0, 0];
        for label in name.split('.') {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        let qtype = if addrs.first().is_some_and(IpAddr::is_ipv6) {
            28
        } else {
            1
        };
        m.extend_from_slice(&[0, 0, qtype, 0, 1]);
        for a in addrs {
            let (t, bytes) = match a {
                IpAddr::V4(v) => (1u8, v.octets().to_vec()),
                IpAddr::V6(v) => (28, v.octets().to_vec()),
            };
            m.extend_from_slice(&[0xc0, 12, 0, t, 0, 1, 0, 0, 0, 60, 0, bytes.len() as u8]);
            m.extend_from_slice(&bytes);
        }
        m
    }

    fn v4(i: u32) -> IpAddr {
        IpAddr::V4((0xc000_0200 | (i & 0xff)).into())
    }

    fn v6(i: u16) -> IpAddr {
        IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i))
    }

    /// A name's addresses stay sorted and unique however they arrive
    /// (answers repeat and reorder round-robin pools), inline up to two.
    #[test]
    fn address_sets_are_sorted_and_unique() {
        let mut set = address_set([v6(1), v4(2), v4(1), v4(2)]);
        assert_eq!(set.as_slice(), [v4(1), v4(2), v6(1)]);
        assert!(set.spilled());
        for a in [v4(3), v4(1), v6(1), v4(0)] {
            add_address(&mut set, a);
        }
        assert_eq!(set.as_slice(), [v4(0), v4(1), v4(2), v4(3), v6(1)]);
        let pair = address_set([v6(9), v4(9)]);
        assert_eq!(pair.as_slice(), [v4(9), v6(9)]);
        assert!(!pair.spilled());
        assert!(both_families(&pair) && !both_families(&address_set([v4(1), v4(2)])));
    }

    /// Past the cap, a flood of one-family names (a random-subdomain flood
    /// of A lookups) no longer stops the pairing: the oldest one-family
    /// names make room, names answered in both families stay, and the
    /// bound says how often the cap was met.
    #[test]
    fn one_family_names_make_room_for_new_ones() {
        let mut c = Collector::default();
        c.bounds.names.limit = 4;
        c.dns_answer(&answer("www.example.test", &[v4(1), v6(1)]), 1);
        c.dns_answer(&answer("api.example.test", &[v4(2)]), 2);
        for k in 0..100u32 {
            c.dns_answer(
                &answer(&format!("{k}.flood.example.test"), &[v4(k)]),
                10 + u64::from(k),
            );
        }
        assert_eq!(c.dns_names.len(), 4);
        assert!(
            c.dns_names.contains_key("www.example.test"),
            "both families: kept"
        );
        assert!(
            !c.dns_names.contains_key("api.example.test"),
            "oldest one-family: forgotten"
        );
        assert!(c.dns_names.contains_key("99.flood.example.test"));
        // A name seen in one family gains the other before it is forgotten:
        // paired, and no longer a candidate to forget.
        c.dns_answer(&answer("new.example.test", &[v4(3)]), 200);
        c.dns_answer(&answer("new.example.test", &[v6(3)]), 201);
        assert_eq!(
            c.dns_names.get("new.example.test").map(both_families),
            Some(true)
        );
        for k in 100..110u32 {
            c.dns_answer(
                &answer(&format!("{k}.flood.example.test"), &[v4(k)]),
                300 + u64::from(k),
            );
        }
        assert!(c.dns_names.contains_key("new.example.test"));
        assert!(c.dns_names.contains_key("www.example.test"));
        assert_eq!(c.bounds.names.refused, 98 + 1 + 10);
        assert_eq!(c.bounds.names.first_frame, Some(FrameNo(12)));
        // Every kept name has both families: a new one is refused.
        let mut c = Collector::default();
        c.bounds.names.limit = 1;
        c.dns_answer(&answer("www.example.test", &[v4(1), v6(1)]), 1);
        c.dns_answer(&answer("other.example.test", &[v4(2)]), 2);
        assert_eq!(c.dns_names.keys().collect::<Vec<_>>(), ["www.example.test"]);
        assert_eq!(c.bounds.names.refused, 1);
    }
}
