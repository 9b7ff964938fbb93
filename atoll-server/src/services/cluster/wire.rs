//! The cluster bus's messages, byte for byte as Redis 7.2 lays them out (`RCmb`, protocol
//! version 1), so Atoll nodes talk to Redis and Valkey nodes on one bus.
//!
//! A message is a fixed 2256-byte header (integers big-endian) followed by a body that depends
//! on its type: for PING/PONG/MEET, `count` gossip entries of 104 bytes and then the ping
//! extensions (each 8-byte aligned: length, type, payload); for FAIL a node name; for UPDATE a
//! config epoch, a name and a slot bitmap; for PUBLISH two lengths and the bytes. Decoding
//! checks every length against the buffer before reading, as the input comes from the network.

pub const NAMELEN: usize = 40;
pub const IPLEN: usize = 46;
pub const SLOTS: usize = 16384;
pub const HEADER_LEN: usize = 2256;
pub const GOSSIP_LEN: usize = 104;
/// The largest message this node accepts: a PING gossiping about 5,000 nodes with every
/// extension fits; anything longer is a broken or hostile peer.
pub const MAX_LEN: usize = 4 << 20;

pub type Name = [u8; NAMELEN];
pub type Slots = [u8; SLOTS / 8];

pub const PING: u16 = 0;
pub const PONG: u16 = 1;
pub const MEET: u16 = 2;
pub const FAIL: u16 = 3;
pub const PUBLISH: u16 = 4;
pub const AUTH_REQUEST: u16 = 5;
pub const AUTH_ACK: u16 = 6;
pub const UPDATE: u16 = 7;
pub const MFSTART: u16 = 8;
pub const MODULE: u16 = 9;
pub const PUBLISHSHARD: u16 = 10;
pub const TYPES: usize = 11;

/// The message types as CLUSTER INFO names them.
pub const TYPE_NAMES: [&str; TYPES] =
    ["ping", "pong", "meet", "fail", "publish", "auth-req", "auth-ack", "update", "mfstart", "module", "publishshard"];

/// `mflags[0]` bits.
pub const MF_PAUSED: u8 = 1;
pub const MF_FORCEACK: u8 = 2;
pub const MF_EXT_DATA: u8 = 4;

const EXT_HOSTNAME: u16 = 0;
const EXT_HUMAN_NODENAME: u16 = 1;
const EXT_FORGOTTEN_NODE: u16 = 2;
const EXT_SHARDID: u16 = 3;

/// The header's fields (sig, length and version are implied).
#[derive(Clone)]
pub struct Header {
    pub kind: u16,
    /// PING/PONG/MEET: the number of gossip entries.
    pub count: u16,
    /// The client port (the TLS port when the bus runs TLS), and the other one.
    pub port: u16,
    pub pport: u16,
    pub cport: u16,
    pub current_epoch: u64,
    /// The sender's config epoch, or its master's when it is a replica.
    pub config_epoch: u64,
    /// Replication offset.
    pub offset: u64,
    pub sender: Name,
    /// The slots the sender (or its master) serves.
    pub slots: Box<Slots>,
    pub slaveof: Option<Name>,
    /// The address the sender announces; empty: take it from the connection.
    pub myip: String,
    pub flags: u16,
    /// 0 ok, 1 fail, as the sender sees the cluster.
    pub state: u8,
    pub mflags: [u8; 3],
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gossip {
    pub name: Name,
    /// Seconds (Unix) of the reporter's last ping to the node and last pong from it.
    pub ping_sent: u32,
    pub pong_received: u32,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Ext {
    Hostname(Vec<u8>),
    HumanNodename(Vec<u8>),
    /// A node the sender forgot (CLUSTER FORGET), to be kept out for `ttl` more seconds.
    Forgotten {
        name: Name,
        ttl: u64,
    },
    ShardId(Name),
}

#[derive(Clone)]
pub enum Body {
    Ping {
        gossip: Vec<Gossip>,
        exts: Vec<Ext>,
    },
    Fail {
        name: Name,
    },
    Publish {
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    Update {
        config_epoch: u64,
        name: Name,
        slots: Box<Slots>,
    },
    /// AUTH_REQUEST, AUTH_ACK, MFSTART: the header says it all. MODULE messages are kept
    /// whole and ignored (Atoll loads no modules).
    Empty,
}

#[derive(Clone)]
pub struct Msg {
    pub hdr: Header,
    pub body: Body,
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}
fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
/// A NUL-padded text field, up to its first NUL.
fn get_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
fn put_str(b: &mut [u8], s: &str) {
    // One byte stays NUL, as strlcpy leaves it.
    let n = s.len().min(b.len() - 1);
    b[..n].copy_from_slice(&s.as_bytes()[..n]);
}
fn name_at(b: &[u8], at: usize) -> Name {
    b[at..at + NAMELEN].try_into().expect("40 bytes")
}

fn ext_len(e: &Ext) -> usize {
    let payload = match e {
        Ext::Hostname(s) | Ext::HumanNodename(s) => s.len() + 1,
        Ext::Forgotten { .. } => NAMELEN + 8,
        Ext::ShardId(_) => NAMELEN,
    };
    8 + payload.div_ceil(8) * 8
}

/// The message's bytes.
pub fn encode(m: &Msg) -> Vec<u8> {
    let h = &m.hdr;
    let body_len = match &m.body {
        Body::Ping { gossip, exts } => gossip.len() * GOSSIP_LEN + exts.iter().map(ext_len).sum::<usize>(),
        Body::Fail { .. } => NAMELEN,
        Body::Publish { channel, message } => 8 + channel.len() + message.len(),
        Body::Update { .. } => 8 + NAMELEN + SLOTS / 8,
        Body::Empty => 0,
    };
    let total = HEADER_LEN + body_len;
    let mut b = vec![0u8; total];
    b[0..4].copy_from_slice(b"RCmb");
    put32(&mut b, 4, total as u32);
    put16(&mut b, 8, 1);
    put16(&mut b, 10, h.port);
    put16(&mut b, 12, h.kind);
    let count = match &m.body {
        Body::Ping { gossip, .. } => gossip.len() as u16,
        _ => h.count,
    };
    put16(&mut b, 14, count);
    put64(&mut b, 16, h.current_epoch);
    put64(&mut b, 24, h.config_epoch);
    put64(&mut b, 32, h.offset);
    b[40..80].copy_from_slice(&h.sender);
    b[80..2128].copy_from_slice(&h.slots[..]);
    if let Some(s) = &h.slaveof {
        b[2128..2168].copy_from_slice(s);
    }
    put_str(&mut b[2168..2168 + IPLEN], &h.myip);
    let mut mflags = h.mflags;
    if let Body::Ping { exts, .. } = &m.body {
        put16(&mut b, 2214, exts.len() as u16);
        if !exts.is_empty() {
            mflags[0] |= MF_EXT_DATA;
        }
    }
    put16(&mut b, 2246, h.pport);
    put16(&mut b, 2248, h.cport);
    put16(&mut b, 2250, h.flags);
    b[2252] = h.state;
    b[2253..2256].copy_from_slice(&mflags);
    let mut at = HEADER_LEN;
    match &m.body {
        Body::Ping { gossip, exts } => {
            for g in gossip {
                b[at..at + NAMELEN].copy_from_slice(&g.name);
                put32(&mut b, at + 40, g.ping_sent);
                put32(&mut b, at + 44, g.pong_received);
                put_str(&mut b[at + 48..at + 48 + IPLEN], &g.ip);
                put16(&mut b, at + 94, g.port);
                put16(&mut b, at + 96, g.cport);
                put16(&mut b, at + 98, g.flags);
                put16(&mut b, at + 100, g.pport);
                at += GOSSIP_LEN;
            }
            for e in exts {
                let len = ext_len(e);
                put32(&mut b, at, len as u32);
                let (kind, payload_at) = (
                    match e {
                        Ext::Hostname(_) => EXT_HOSTNAME,
                        Ext::HumanNodename(_) => EXT_HUMAN_NODENAME,
                        Ext::Forgotten { .. } => EXT_FORGOTTEN_NODE,
                        Ext::ShardId(_) => EXT_SHARDID,
                    },
                    at + 8,
                );
                put16(&mut b, at + 4, kind);
                match e {
                    Ext::Hostname(s) | Ext::HumanNodename(s) => b[payload_at..payload_at + s.len()].copy_from_slice(s),
                    Ext::Forgotten { name, ttl } => {
                        b[payload_at..payload_at + NAMELEN].copy_from_slice(name);
                        put64(&mut b, payload_at + NAMELEN, *ttl);
                    }
                    Ext::ShardId(id) => b[payload_at..payload_at + NAMELEN].copy_from_slice(id),
                }
                at += len;
            }
        }
        Body::Fail { name } => b[at..at + NAMELEN].copy_from_slice(name),
        Body::Publish { channel, message } => {
            put32(&mut b, at, channel.len() as u32);
            put32(&mut b, at + 4, message.len() as u32);
            b[at + 8..at + 8 + channel.len()].copy_from_slice(channel);
            b[at + 8 + channel.len()..].copy_from_slice(message);
        }
        Body::Update { config_epoch, name, slots } => {
            put64(&mut b, at, *config_epoch);
            b[at + 8..at + 48].copy_from_slice(name);
            b[at + 48..at + 48 + SLOTS / 8].copy_from_slice(&slots[..]);
        }
        Body::Empty => {}
    }
    b
}

/// How long the message at the start of `buf` is, once its first 8 bytes are in: `Ok(None)`
/// while they are not, an error for a stream that is not the cluster bus.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, &'static str> {
    if buf.len() < 8 {
        return Ok(None);
    }
    if &buf[0..4] != b"RCmb" {
        return Err("bad signature");
    }
    let len = get32(buf, 4) as usize;
    // Redis's minimum: the header with an empty body.
    if !(HEADER_LEN..=MAX_LEN).contains(&len) {
        return Err("bad length");
    }
    Ok(Some(len))
}

/// Why a message was refused (the link is closed, as Redis frees a link on a bad packet).
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// Shorter than its type needs, or lengths that do not add up.
    Length,
    /// Another protocol version.
    Version,
    /// A type this node does not know (ignored rather than refused by Redis, for forward
    /// compatibility; the caller drops it).
    UnknownType(u16),
}

/// Decodes one whole message (`buf` is exactly `frame_len` bytes).
pub fn decode(buf: &[u8]) -> Result<Msg, Refused> {
    if buf.len() < 16 {
        return Err(Refused::Length);
    }
    if get16(buf, 8) != 1 {
        return Err(Refused::Version);
    }
    let kind = get16(buf, 12);
    if kind as usize >= TYPES {
        return Err(Refused::UnknownType(kind));
    }
    if buf.len() < HEADER_LEN {
        return Err(Refused::Length);
    }
    let count = get16(buf, 14);
    let mut slots: Box<Slots> = Box::new([0; SLOTS / 8]);
    slots.copy_from_slice(&buf[80..2128]);
    let slaveof = name_at(buf, 2128);
    let hdr = Header {
        kind,
        count,
        port: get16(buf, 10),
        pport: get16(buf, 2246),
        cport: get16(buf, 2248),
        current_epoch: get64(buf, 16),
        config_epoch: get64(buf, 24),
        offset: get64(buf, 32),
        sender: name_at(buf, 40),
        slots,
        slaveof: (slaveof != [0; NAMELEN]).then_some(slaveof),
        myip: get_str(&buf[2168..2168 + IPLEN]),
        flags: get16(buf, 2250),
        state: buf[2252],
        mflags: [buf[2253], buf[2254], buf[2255]],
    };
    let extensions = get16(buf, 2214);
    let rest = &buf[HEADER_LEN..];
    let body = match kind {
        PING | PONG | MEET => {
            let glen = count as usize * GOSSIP_LEN;
            if rest.len() < glen {
                return Err(Refused::Length);
            }
            let mut gossip = Vec::with_capacity(count as usize);
            for g in rest[..glen].chunks_exact(GOSSIP_LEN) {
                gossip.push(Gossip {
                    name: name_at(g, 0),
                    ping_sent: get32(g, 40),
                    pong_received: get32(g, 44),
                    ip: get_str(&g[48..48 + IPLEN]),
                    port: get16(g, 94),
                    cport: get16(g, 96),
                    flags: get16(g, 98),
                    pport: get16(g, 100),
                });
            }
            let mut exts = Vec::new();
            let mut at = glen;
            if hdr.mflags[0] & MF_EXT_DATA != 0 {
                for _ in 0..extensions {
                    if rest.len() - at < 8 {
                        return Err(Refused::Length);
                    }
                    let len = get32(rest, at) as usize;
                    if !len.is_multiple_of(8) || len < 8 || rest.len() - at < len {
                        return Err(Refused::Length);
                    }
                    let payload = &rest[at + 8..at + len];
                    match get16(rest, at + 4) {
                        EXT_HOSTNAME => exts.push(Ext::Hostname(get_str(payload).into_bytes())),
                        EXT_HUMAN_NODENAME => exts.push(Ext::HumanNodename(get_str(payload).into_bytes())),
                        EXT_FORGOTTEN_NODE if payload.len() >= NAMELEN + 8 => {
                            exts.push(Ext::Forgotten { name: name_at(payload, 0), ttl: get64(payload, NAMELEN) })
                        }
                        EXT_SHARDID if payload.len() >= NAMELEN => exts.push(Ext::ShardId(name_at(payload, 0))),
                        // An extension of a later version: skipped, as Redis skips it.
                        _ => {}
                    }
                    at += len;
                }
            }
            if at != rest.len() {
                return Err(Refused::Length);
            }
            Body::Ping { gossip, exts }
        }
        FAIL => {
            if rest.len() != NAMELEN {
                return Err(Refused::Length);
            }
            Body::Fail { name: name_at(rest, 0) }
        }
        PUBLISH | PUBLISHSHARD => {
            if rest.len() < 8 {
                return Err(Refused::Length);
            }
            let (cl, ml) = (get32(rest, 0) as usize, get32(rest, 4) as usize);
            let need = 8 + cl.checked_add(ml).ok_or(Refused::Length)?;
            if rest.len() != need {
                return Err(Refused::Length);
            }
            Body::Publish { channel: rest[8..8 + cl].to_vec(), message: rest[8 + cl..8 + cl + ml].to_vec() }
        }
        UPDATE => {
            if rest.len() != 8 + NAMELEN + SLOTS / 8 {
                return Err(Refused::Length);
            }
            let mut s: Box<Slots> = Box::new([0; SLOTS / 8]);
            s.copy_from_slice(&rest[48..]);
            Body::Update { config_epoch: get64(rest, 0), name: name_at(rest, 8), slots: s }
        }
        AUTH_REQUEST | AUTH_ACK | MFSTART => {
            if !rest.is_empty() {
                return Err(Refused::Length);
            }
            Body::Empty
        }
        _ => Body::Empty,
    };
    Ok(Msg { hdr, body })
}

pub fn slot_bit(slots: &Slots, slot: usize) -> bool {
    slots[slot >> 3] & (1 << (slot & 7)) != 0
}

pub fn set_slot_bit(slots: &mut Slots, slot: usize, on: bool) {
    if on {
        slots[slot >> 3] |= 1 << (slot & 7);
    } else {
        slots[slot >> 3] &= !(1 << (slot & 7));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u16) -> Header {
        let mut slots: Box<Slots> = Box::new([0; SLOTS / 8]);
        set_slot_bit(&mut slots, 0, true);
        set_slot_bit(&mut slots, 16383, true);
        Header {
            kind,
            count: 0,
            port: 7000,
            pport: 0,
            cport: 17000,
            current_epoch: 5,
            config_epoch: 3,
            offset: 1234,
            sender: [b'a'; NAMELEN],
            slots,
            slaveof: None,
            myip: "127.0.0.1".into(),
            flags: 1,
            state: 0,
            mflags: [0; 3],
        }
    }

    #[test]
    fn a_ping_round_trips_with_gossip_and_extensions() {
        let g = Gossip {
            name: [b'b'; NAMELEN],
            ping_sent: 1,
            pong_received: 2,
            ip: "10.0.0.2".into(),
            port: 7001,
            cport: 17001,
            flags: 2,
            pport: 0,
        };
        let exts = vec![
            Ext::Hostname(b"host-1".to_vec()),
            Ext::ShardId([b'c'; NAMELEN]),
            Ext::Forgotten { name: [b'd'; NAMELEN], ttl: 55 },
        ];
        let m = Msg { hdr: header(PING), body: Body::Ping { gossip: vec![g.clone()], exts: exts.clone() } };
        let b = encode(&m);
        // The layout Redis 7.2 asserts: header 2256, one gossip entry, three aligned extensions.
        assert_eq!(b.len(), HEADER_LEN + GOSSIP_LEN + 16 + 48 + 56);
        assert_eq!(frame_len(&b).unwrap(), Some(b.len()));
        assert_eq!(get16(&b, 2214), 3);
        assert_eq!(b[2253] & MF_EXT_DATA, MF_EXT_DATA);
        let d = decode(&b).unwrap();
        assert_eq!(d.hdr.myip, "127.0.0.1");
        assert_eq!(d.hdr.current_epoch, 5);
        assert!(slot_bit(&d.hdr.slots, 16383) && !slot_bit(&d.hdr.slots, 1));
        match d.body {
            Body::Ping { gossip, exts: e } => {
                assert_eq!(gossip, vec![g]);
                assert_eq!(e, exts);
            }
            _ => panic!("not a ping"),
        }
    }

    #[test]
    fn lengths_that_do_not_add_up_are_refused() {
        let m = Msg { hdr: header(FAIL), body: Body::Fail { name: [b'e'; NAMELEN] } };
        let mut b = encode(&m);
        assert!(decode(&b).is_ok());
        b.push(0);
        assert_eq!(decode(&b).err(), Some(Refused::Length));
        let mut p = encode(&Msg { hdr: header(PING), body: Body::Ping { gossip: vec![], exts: vec![] } });
        put16(&mut p, 14, 3); // claims three gossip entries it does not carry
        assert_eq!(decode(&p).err(), Some(Refused::Length));
        assert!(frame_len(b"RCmb\x7f\xff\xff\xff").is_err());
        assert!(frame_len(b"HTTP/1.1").is_err());
    }

    #[test]
    fn a_publish_carries_channel_and_message() {
        let m = Msg { hdr: header(PUBLISH), body: Body::Publish { channel: b"c".to_vec(), message: b"msg".to_vec() } };
        let b = encode(&m);
        assert_eq!(b.len(), HEADER_LEN + 8 + 4);
        match decode(&b).unwrap().body {
            Body::Publish { channel, message } => assert_eq!((channel, message), (b"c".to_vec(), b"msg".to_vec())),
            _ => panic!("not a publish"),
        }
    }
}
