//! The stream value (Redis's `t_stream.c` type API): entry IDs, entries in nodes, consumer
//! groups. The stream commands are in `types::stream`.
//!
//! Entries live in nodes like Redis's radix tree of listpacks: a [`BTreeMap`] keyed by each
//! node's master ID (the first ID ever stored in it), each node holding up to
//! `stream-node-max-entries` entries in ID order (and about `stream-node-max-bytes`). That
//! gives O(log n) range seeks, and it keeps Redis's node boundaries, which approximate
//! trimming (`MAXLEN ~`) and XINFO (`radix-tree-keys`) expose. Deleted entries stay in their
//! node as tombstones until the whole node is empty, as in Redis.

use std::collections::{BTreeMap, BTreeSet};

/// A stream entry ID: milliseconds and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID (Redis's `streamIncrID`); None past the maximum.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID (Redis's `streamDecrID`); None below 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    pub fn to_bytes(self) -> Vec<u8> {
        format!("{}-{}", self.ms, self.seq).into_bytes()
    }

    /// The 16-byte big-endian form Redis uses as radix tree key.
    pub fn key_bytes(self) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&self.ms.to_be_bytes());
        k[8..].copy_from_slice(&self.seq.to_be_bytes());
        k
    }
}

// ---------------------------------------------------------------------------------------------
// The stream value
// ---------------------------------------------------------------------------------------------

/// One entry: its ID and its field-value pairs, flattened.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: StreamId,
    pub fields: Vec<Vec<u8>>,
    /// A tombstone (XDEL, trimming inside a node): kept until the whole node goes.
    pub deleted: bool,
}

/// A node: what Redis keeps in one listpack.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Node {
    pub entries: Vec<Entry>,
    /// Entries not deleted.
    pub live: usize,
    /// Estimated listpack size, for `stream-node-max-bytes`.
    pub bytes: usize,
    /// The master entry's fields (an entry with the same fields is stored more compactly).
    pub(crate) master_fields: Vec<Vec<u8>>,
}

/// A pending (delivered, not yet acknowledged) entry of a consumer group.
#[derive(Debug, Clone, PartialEq)]
pub struct Nack {
    pub consumer: Vec<u8>,
    /// Unix ms of the last delivery.
    pub delivery_time: i64,
    pub delivery_count: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    /// Last time the consumer was seen (any interaction).
    pub seen_time: i64,
    /// Last successful interaction (read or claim of entries); -1 = never (7.2).
    pub active_time: i64,
    /// The consumer's own pending entries.
    pub pel: BTreeSet<StreamId>,
}

/// Marks a group whose entries-read counter is unknown.
pub const ENTRIES_READ_INVALID: i64 = -1;

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub last_id: StreamId,
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group { last_id, entries_read, pel: BTreeMap::new(), consumers: BTreeMap::new() }
    }

    /// Creates a consumer if missing (seen now, never active); true if created.
    pub fn create_consumer(&mut self, name: &[u8], now: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(name.to_vec(), Consumer { seen_time: now, active_time: -1, pel: BTreeSet::new() });
        true
    }

    /// Removes an entry from the group PEL and its owner's PEL.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }
}

/// A stream value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stream {
    pub(crate) nodes: BTreeMap<StreamId, Node>,
    /// Live entries.
    pub length: u64,
    pub last_id: StreamId,
    /// The first live entry's ID (0-0 when empty).
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Vec<u8>, Group>,
}

/// Size of an integer in a listpack (encoding plus back-length byte).
fn lp_int_size(v: i64) -> usize {
    match v {
        0..=127 => 2,
        -4096..=4095 => 3,
        -32768..=32767 => 4,
        -8_388_608..=8_388_607 => 5,
        -2_147_483_648..=2_147_483_647 => 6,
        _ => 10,
    }
}

/// Size of a string element in a listpack (strings that are integers are stored as such).
fn lp_str_size(s: &[u8]) -> usize {
    if s.len() <= 20 {
        if let Some(v) = crate::protocol::parse_i64(s) {
            return lp_int_size(v);
        }
    }
    let enc = if s.len() < 64 {
        1
    } else if s.len() < 4096 {
        2
    } else {
        5
    } + s.len();
    enc + if enc < 128 {
        1
    } else if enc < 16384 {
        2
    } else {
        3
    }
}

/// Node limits from the configuration (`stream-node-max-bytes`, `stream-node-max-entries`).
#[derive(Clone, Copy)]
pub struct NodeLimits {
    pub max_bytes: usize,
    pub max_entries: usize,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits { max_bytes: 4096, max_entries: 100 }
    }
}

/// Trimming options of XADD and XTRIM.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TrimStrategy {
    None,
    MaxLen(u64),
    MinId(StreamId),
}

/// What deleting an entry does to the consumer groups' references to it (Redis 8.2's
/// KEEPREF / DELREF / ACKED, taken by XADD, XTRIM, XDELEX and XACKDEL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefPolicy {
    /// Delete the entry, leave references in the groups' PELs (XDEL's way; the default).
    KeepRef,
    /// Delete the entry and every group's reference to it.
    DelRef,
    /// Delete the entry only once every group has read and acknowledged it.
    Acked,
}

#[derive(Debug, Clone, Copy)]
pub struct TrimArgs {
    pub strategy: TrimStrategy,
    pub approx: bool,
    /// Most entries to remove (0 = no limit).
    pub limit: u64,
    pub policy: RefPolicy,
}

/// What a trim did: how many entries went, and the first live entry it did not look at
/// (`StreamId::MAX` when it looked at all of them) — the exact MINID a replica needs to repeat
/// an approximate or ACKED trim.
#[derive(Debug, Clone, Copy)]
pub struct Trimmed {
    pub deleted: u64,
    pub frontier: StreamId,
}

impl Stream {
    /// The heap the stream holds (`engine::footprint`): the stream, its nodes (measured on the
    /// first `samples` nodes, 0: all, as Redis samples its listpacks) with their entries and
    /// fields, and each group with its pending entries and consumers.
    pub fn footprint(&self, samples: usize) -> usize {
        use super::footprint::{array, btree, cls, Sampler};
        let vecs =
            |v: &Vec<Vec<u8>>| array::<Vec<u8>>(v.capacity()) + v.iter().map(|f| cls(f.capacity())).sum::<usize>();
        let mut nodes = Sampler::new(samples);
        for node in self.nodes.values() {
            if !nodes.wants() {
                break;
            }
            let entries: usize = node.entries.iter().map(|e| vecs(&e.fields)).sum();
            nodes.add(array::<Entry>(node.entries.capacity()) + entries + vecs(&node.master_fields));
        }
        let mut n = cls(std::mem::size_of::<Stream>())
            + btree::<StreamId, Node>(self.nodes.len())
            + nodes.total(self.nodes.len())
            + btree::<Vec<u8>, Group>(self.groups.len());
        for (name, g) in &self.groups {
            n += cls(name.capacity())
                + btree::<StreamId, Nack>(g.pel.len())
                + btree::<Vec<u8>, Consumer>(g.consumers.len());
            let mut nacks = Sampler::new(samples);
            for nack in g.pel.values() {
                if !nacks.wants() {
                    break;
                }
                nacks.add(cls(nack.consumer.capacity()));
            }
            n += nacks.total(g.pel.len());
            for (cname, c) in &g.consumers {
                n += cls(cname.capacity()) + btree::<StreamId, ()>(c.pel.len());
            }
        }
        n
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        "stream"
    }

    /// What freeing takes, as Redis estimates it in constant time: every node is an
    /// allocation, every group is one plus its pending entries (the first group's count
    /// standing in for all).
    pub fn free_effort(&self) -> usize {
        let per_group = self.groups.values().next().map_or(0, |g| 1 + g.pel.len());
        self.nodes.len() + self.groups.len() * per_group
    }

    /// Number of nodes (`radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of nodes Redis's radix tree would have for these node keys
    /// (`radix-tree-nodes`): a compressed trie over the 16-byte big-endian master IDs.
    pub fn rax_node_count(&self) -> usize {
        let keys: Vec<[u8; 16]> = self.nodes.keys().map(|k| k.key_bytes()).collect();
        rax_nodes(&keys)
    }

    /// Each node's estimated listpack size and entry count, oldest first (MEMORY USAGE).
    pub fn node_sizes(&self) -> impl DoubleEndedIterator<Item = (usize, usize)> + ExactSizeIterator + '_ {
        self.nodes.values().map(|n| (n.bytes, n.entries.len()))
    }

    /// Appends an entry with an ID already checked to be greater than `last_id`.
    pub fn append(&mut self, id: StreamId, fields: Vec<Vec<u8>>, limits: NodeLimits) {
        let same_fields = |n: &Node| {
            n.master_fields.len() * 2 == fields.len()
                && n.master_fields.iter().zip(fields.iter().step_by(2)).all(|(a, b)| a == b)
        };
        let totelelen: usize = fields.iter().map(|f| f.len()).sum();
        let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > (1 << 30) { 1 << 30 } else { limits.max_bytes };
        let need_new = match self.nodes.values().next_back() {
            None => true,
            Some(n) => {
                n.bytes + totelelen >= max_bytes || (limits.max_entries > 0 && n.entries.len() >= limits.max_entries)
            }
        };
        if need_new {
            let master_fields: Vec<Vec<u8>> = fields.iter().step_by(2).cloned().collect();
            // Listpack header and end, then the master entry: count, deleted, #fields,
            // the fields, and the terminating 0.
            let bytes = 7
                + 2
                + 2
                + lp_int_size(master_fields.len() as i64)
                + master_fields.iter().map(|f| lp_str_size(f)).sum::<usize>()
                + 2;
            self.nodes.insert(id, Node { entries: Vec::new(), live: 0, bytes, master_fields });
        }
        let (master, node) = self.nodes.iter_mut().next_back().unwrap();
        let mut size =
            2 + lp_int_size((id.ms - master.ms) as i64) + lp_int_size(id.seq.wrapping_sub(master.seq) as i64);
        let nvals = fields.len() / 2;
        if same_fields(node) {
            size += fields.iter().skip(1).step_by(2).map(|v| lp_str_size(v)).sum::<usize>();
            size += lp_int_size(nvals as i64 + 3);
        } else {
            size += lp_int_size(nvals as i64);
            size += fields.iter().map(|v| lp_str_size(v)).sum::<usize>();
            size += lp_int_size(fields.len() as i64 + 4);
        }
        node.bytes += size;
        node.entries.push(Entry { id, fields, deleted: false });
        node.live += 1;
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
    }

    /// The node holding `id` (if any): the last node whose master ID is <= id.
    fn node_of(&self, id: StreamId) -> Option<(&StreamId, &Node)> {
        self.nodes.range(..=id).next_back()
    }

    /// The live entry with this ID.
    pub fn get(&self, id: StreamId) -> Option<&Entry> {
        let (_, n) = self.node_of(id)?;
        let i = n.entries.binary_search_by(|e| e.id.cmp(&id)).ok()?;
        let e = &n.entries[i];
        (!e.deleted).then_some(e)
    }

    pub fn exists(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// Live entries in [start, end], ascending (or descending if `rev`), at most `count`
    /// (0 = all).
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool, count: usize) -> Vec<&Entry> {
        let mut out = Vec::new();
        if start > end {
            return out;
        }
        let full = |out: &Vec<&Entry>| count != 0 && out.len() >= count;
        if !rev {
            // Start at the node that may hold `start`.
            let from = self.node_of(start).map(|(k, _)| *k).unwrap_or(StreamId::MIN);
            'outer: for (_, n) in self.nodes.range(from..) {
                let i = n.entries.partition_point(|e| e.id < start);
                for e in &n.entries[i..] {
                    if e.id > end {
                        break 'outer;
                    }
                    if !e.deleted {
                        out.push(e);
                        if full(&out) {
                            break 'outer;
                        }
                    }
                }
            }
        } else {
            'outer: for (_, n) in self.nodes.range(..=end).rev() {
                let i = n.entries.partition_point(|e| e.id <= end);
                for e in n.entries[..i].iter().rev() {
                    if e.id < start {
                        break 'outer;
                    }
                    if !e.deleted {
                        out.push(e);
                        if full(&out) {
                            break 'outer;
                        }
                    }
                }
            }
        }
        out
    }

    /// The last live entry's ID (Redis's `streamLastValidID`), 0-0 if none.
    pub fn last_valid_id(&self) -> StreamId {
        self.range(StreamId::MIN, StreamId::MAX, true, 1).first().map(|e| e.id).unwrap_or_default()
    }

    fn first_valid_id(&self) -> StreamId {
        self.range(StreamId::MIN, StreamId::MAX, false, 1).first().map(|e| e.id).unwrap_or_default()
    }

    /// Deletes one live entry (a tombstone; the node goes when nothing live is left in it).
    /// Does not touch `first_id`/`max_deleted_id`: XDEL does.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, _)) = self.node_of(id) else { return false };
        let n = self.nodes.get_mut(&master).unwrap();
        let Ok(i) = n.entries.binary_search_by(|e| e.id.cmp(&id)) else { return false };
        if n.entries[i].deleted {
            return false;
        }
        n.entries[i].deleted = true;
        n.live -= 1;
        if n.live == 0 {
            self.nodes.remove(&master);
        }
        self.length -= 1;
        true
    }

    /// Recomputes `first_id` after entries went away.
    fn update_first_id(&mut self) {
        self.first_id = if self.length == 0 { StreamId::MIN } else { self.first_valid_id() };
    }

    /// XDEL of one ID, with its bookkeeping.
    pub fn xdel(&mut self, id: StreamId) -> bool {
        if !self.delete(id) {
            return false;
        }
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        if self.length == 0 || id == self.first_id {
            self.update_first_id();
        }
        true
    }

    /// Whether some consumer group still owes `id`: not yet delivered to it, or pending in it.
    pub fn referenced(&self, id: StreamId) -> bool {
        self.groups.values().any(|g| id > g.last_id || g.pel.contains_key(&id))
    }

    /// Redis's `streamTrim`. Under KEEPREF whole nodes go from the head while they lie entirely
    /// inside the trim; the first node that does not ends an approximate trim, an exact one
    /// marks its entries deleted up to the threshold. DELREF and ACKED look at every entry (a
    /// node goes only when nothing live is left in it): DELREF drops the groups' references
    /// with the entry, ACKED passes over an entry a group still owes and goes on with the
    /// next — so an approximate trim under either is as exact as `=` within the LIMIT, as in
    /// Redis 8.2.
    pub fn trim(&mut self, args: &TrimArgs) -> Trimmed {
        let mut out = Trimmed { deleted: 0, frontier: StreamId::MAX };
        if args.strategy == TrimStrategy::None {
            return out;
        }
        let keep_refs = args.policy == RefPolicy::KeepRef;
        // The last entry looked at, to find the frontier at the end.
        let mut looked: Option<StreamId> = None;
        let mut from = StreamId::MIN;
        while let Some((&master, node)) = self.nodes.range(from..).next() {
            if let TrimStrategy::MaxLen(max) = args.strategy {
                if self.length <= max {
                    break;
                }
            }
            let entries = node.live as u64;
            if args.limit > 0 && out.deleted + entries > args.limit {
                break;
            }
            let last = node.entries.last().map_or(master, |e| e.id);
            let remove_node = match args.strategy {
                TrimStrategy::MaxLen(max) => self.length - entries >= max,
                TrimStrategy::MinId(min) => last < min,
                TrimStrategy::None => false,
            };
            if remove_node && keep_refs {
                self.nodes.remove(&master);
                self.length -= entries;
                out.deleted += entries;
                looked = Some(last);
                continue;
            }
            if args.approx && keep_refs {
                break;
            }
            // Entry by entry through this node.
            let Stream { nodes, groups, length, .. } = self;
            let node = nodes.get_mut(&master).unwrap();
            for e in node.entries.iter_mut().filter(|e| !e.deleted) {
                let stop = match args.strategy {
                    TrimStrategy::MaxLen(max) => *length <= max,
                    TrimStrategy::MinId(min) => e.id >= min,
                    TrimStrategy::None => true,
                };
                if stop {
                    break;
                }
                looked = Some(e.id);
                match args.policy {
                    RefPolicy::KeepRef => {}
                    RefPolicy::DelRef => {
                        for g in groups.values_mut() {
                            g.ack(e.id);
                        }
                    }
                    RefPolicy::Acked => {
                        if groups.values().any(|g| e.id > g.last_id || g.pel.contains_key(&e.id)) {
                            continue;
                        }
                    }
                }
                e.deleted = true;
                node.live -= 1;
                *length -= 1;
                out.deleted += 1;
            }
            if node.live == 0 {
                nodes.remove(&master);
            }
            // Only a node wholly inside the trim lets it go on to the next one.
            match last.incr() {
                Some(next) if remove_node => from = next,
                _ => break,
            }
        }
        let after = match looked {
            None => Some(StreamId::MIN),
            Some(l) => l.incr(),
        };
        if let Some(after) = after {
            out.frontier = self.range(after, StreamId::MAX, false, 1).first().map_or(StreamId::MAX, |e| e.id);
        }
        self.update_first_id();
        out
    }

    /// Whether a tombstone may lie in [start, end] (Redis's `streamRangeHasTombstones`).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() || self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// The number of entries ever added up to `id`, when it can be known
    /// (Redis's `streamEstimateDistanceFromFirstEverEntry`); -1 if not.
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return self.entries_added as i64;
        }
        if id == self.last_id {
            return self.entries_added as i64;
        } else if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return (self.entries_added - self.length) as i64;
            } else if id == self.first_id {
                return (self.entries_added - self.length + 1) as i64;
            }
        }
        ENTRIES_READ_INVALID
    }

    /// A group's lag (entries not yet delivered to it), when it can be known.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID && !self.range_has_tombstones(g.last_id, StreamId::MAX) {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let read = self.estimate_distance(g.last_id);
        (read != ENTRIES_READ_INVALID).then(|| self.entries_added as i64 - read)
    }

    /// Moves a group's last-delivered ID forward to `id`, keeping its entries-read counter
    /// (the bookkeeping of a delivery in Redis's `streamReplyWithRange`).
    pub fn advance_group(&mut self, group: &[u8], id: StreamId) {
        let tomb = self.range_has_tombstones(id, StreamId::MAX);
        let est = self.estimate_distance(id);
        let added = self.entries_added;
        let g = self.groups.get_mut(group).unwrap();
        if g.entries_read != ENTRIES_READ_INVALID && !tomb {
            g.entries_read += 1;
        } else if added > 0 {
            g.entries_read = est;
        }
        g.last_id = id;
    }
}

/// How many nodes a Redis radix tree holding these sorted 16-byte keys has (its head
/// included, so an empty tree has one): shared prefixes compress into one node, every
/// branching byte opens a child.
pub fn rax_nodes(keys: &[[u8; 16]]) -> usize {
    fn count(keys: &[[u8; 16]], depth: usize) -> usize {
        if keys.is_empty() || depth == 16 {
            return 1;
        }
        let first = &keys[0];
        let last = &keys[keys.len() - 1];
        // Keys are sorted: the common prefix of all is that of the first and the last.
        let mut lcp = 0;
        while depth + lcp < 16 && first[depth + lcp] == last[depth + lcp] {
            lcp += 1;
        }
        if lcp > 0 {
            return 1 + count(keys, depth + lcp);
        }
        let mut n = 1;
        let mut i = 0;
        while i < keys.len() {
            let b = keys[i][depth];
            let mut j = i;
            while j < keys.len() && keys[j][depth] == b {
                j += 1;
            }
            n += count(&keys[i..j], depth + 1);
            i = j;
        }
        n
    }
    count(keys, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    fn fill(n: u64, limits: NodeLimits) -> Stream {
        let mut s = Stream::default();
        for i in 1..=n {
            s.append(id(i, 0), vec![b"f".to_vec(), b"v".to_vec()], limits);
        }
        s
    }

    #[test]
    fn incr_decr_edges() {
        assert_eq!(id(1, u64::MAX).incr(), Some(id(2, 0)));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(id(2, 0).decr(), Some(id(1, u64::MAX)));
        assert_eq!(StreamId::MIN.decr(), None);
    }

    #[test]
    fn nodes_split_by_entry_count() {
        let s = fill(250, NodeLimits { max_bytes: 1 << 20, max_entries: 100 });
        assert_eq!(s.node_count(), 3);
        assert_eq!(s.length, 250);
        assert_eq!(s.range(id(99, 0), id(102, 0), false, 0).len(), 4);
        assert_eq!(s.range(StreamId::MIN, StreamId::MAX, true, 2)[0].id, id(250, 0));
    }

    #[test]
    fn exact_and_approx_trimming() {
        let limits = NodeLimits { max_bytes: 1 << 20, max_entries: 10 };
        let mut s = fill(35, limits);
        // Approximate: only whole nodes go.
        let n = s
            .trim(&TrimArgs { strategy: TrimStrategy::MaxLen(22), approx: true, limit: 0, policy: RefPolicy::KeepRef })
            .deleted;
        assert_eq!((n, s.length), (10, 25));
        // Exact: down to the length asked.
        let n = s
            .trim(&TrimArgs { strategy: TrimStrategy::MaxLen(22), approx: false, limit: 0, policy: RefPolicy::KeepRef })
            .deleted;
        assert_eq!((n, s.length), (3, 22));
        assert_eq!(s.first_id, id(14, 0));
        let n = s
            .trim(&TrimArgs {
                strategy: TrimStrategy::MinId(id(30, 0)),
                approx: false,
                limit: 0,
                policy: RefPolicy::KeepRef,
            })
            .deleted;
        assert_eq!((n, s.length), (16, 6));
        assert_eq!(s.first_id, id(30, 0));
        // LIMIT stops before a node that would exceed it.
        let mut s = fill(35, limits);
        let n = s
            .trim(&TrimArgs { strategy: TrimStrategy::MaxLen(0), approx: true, limit: 15, policy: RefPolicy::KeepRef })
            .deleted;
        assert_eq!(n, 10);
    }

    /// A stream of `n` entries with one group that was delivered everything up to `read` and
    /// has `pending` still unacknowledged.
    fn with_group(n: u64, limits: NodeLimits, read: u64, pending: &[u64]) -> Stream {
        let mut s = fill(n, limits);
        let mut g = Group::new(id(read, 0), read as i64);
        for &p in pending {
            g.pel.insert(id(p, 0), Nack { consumer: b"c".to_vec(), delivery_time: 0, delivery_count: 1 });
        }
        s.groups.insert(b"g".to_vec(), g);
        s
    }

    #[test]
    fn acked_trimming_passes_over_what_a_group_owes() {
        let limits = NodeLimits { max_bytes: 1 << 20, max_entries: 10 };
        let args = |strategy, approx| TrimArgs { strategy, approx, limit: 0, policy: RefPolicy::Acked };
        // Read up to 6, 3 still pending: 1, 2, 4, 5, 6 may go; 3 and 7.. may not.
        let mut s = with_group(25, limits, 6, &[3]);
        let t = s.trim(&args(TrimStrategy::MaxLen(3), false));
        assert_eq!((t.deleted, s.length, s.first_id), (5, 20, id(3, 0)));
        // Every node lay wholly inside the trim, so it looked at everything: no frontier.
        assert_eq!(t.frontier, StreamId::MAX);
        // MINID: stops at the threshold, the first entry not looked at.
        let mut s = with_group(25, limits, 6, &[3]);
        let t = s.trim(&args(TrimStrategy::MinId(id(5, 0)), true));
        assert_eq!((t.deleted, s.length, t.frontier), (3, 22, id(5, 0)));
        // Without groups ACKED is KEEPREF entry by entry: exact even with `~`.
        let mut s = fill(25, limits);
        let t = s.trim(&args(TrimStrategy::MaxLen(12), true));
        assert_eq!((t.deleted, s.length, s.first_id, t.frontier), (13, 12, id(14, 0), id(14, 0)));
    }

    #[test]
    fn delref_trimming_drops_the_groups_references() {
        let limits = NodeLimits { max_bytes: 1 << 20, max_entries: 10 };
        let mut s = with_group(25, limits, 25, &[2, 3, 20]);
        let t =
            s.trim(&TrimArgs { strategy: TrimStrategy::MaxLen(10), approx: true, limit: 0, policy: RefPolicy::DelRef });
        assert_eq!((t.deleted, s.length, t.frontier), (15, 10, id(16, 0)));
        let g = &s.groups[&b"g".to_vec()];
        assert_eq!(g.pel.keys().copied().collect::<Vec<_>>(), vec![id(20, 0)]);
        // Emptied: nothing left to look at.
        let t = s.trim(&TrimArgs {
            strategy: TrimStrategy::MaxLen(0),
            approx: false,
            limit: 0,
            policy: RefPolicy::KeepRef,
        });
        assert_eq!((t.deleted, s.length, t.frontier, s.node_count()), (10, 0, StreamId::MAX, 0));
    }

    #[test]
    fn deletes_leave_tombstones_until_node_empty() {
        let limits = NodeLimits { max_bytes: 1 << 20, max_entries: 2 };
        let mut s = fill(4, limits);
        assert_eq!(s.node_count(), 2);
        assert!(s.xdel(id(1, 0)));
        assert!(!s.xdel(id(1, 0)));
        assert_eq!((s.node_count(), s.first_id, s.max_deleted_id), (2, id(2, 0), id(1, 0)));
        assert!(s.xdel(id(2, 0)));
        assert_eq!(s.node_count(), 1);
        assert_eq!(s.rax_node_count(), 2);
    }

    #[test]
    fn rax_node_counts() {
        let s = Stream::default();
        assert_eq!(s.rax_node_count(), 1);
        let s = fill(3, NodeLimits { max_bytes: 1 << 20, max_entries: 1 });
        // Root compressed (15 shared bytes), a branch on the last byte... ms differs in the
        // 8th byte: prefix(7) -> branch -> 3 x (suffix(8) -> leaf).
        assert_eq!(s.rax_node_count(), 1 + 1 + 3 * 2);
    }
}
