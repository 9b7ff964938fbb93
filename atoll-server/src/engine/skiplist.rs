//! The order-statistic structure behind `skiplist`-encoded sorted sets: Redis's skiplist with
//! spans (`t_zset.c`), so rank, select-by-rank and range lookups are O(log n).
//!
//! Nodes live in one arena (`Vec`) and link by index instead of by pointer: no `unsafe`. Short
//! members and the first two levels live inside the node, so most nodes need no allocation of
//! their own and a search hop reads one cache line. Freed slots are reused by later inserts. Elements are
//! ordered by score, then by member bytes (memcmp order, shorter first on a common prefix).

use crate::engine::dict::KeyBytes;
use rand::Rng;

const MAX_LEVEL: usize = 32;
/// Redis's ZSKIPLIST_P: each level is kept by a quarter of the nodes of the level below.
const P: f64 = 0.25;
const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

#[derive(Clone, Copy, Debug)]
struct Level {
    forward: u32,
    /// Number of level-0 steps this link jumps over (rank distance to `forward`).
    span: u32,
}

/// Levels of a node: with p = 1/4, 94 % of nodes have one or two, which live inside the node
/// (no allocation of their own, and a search hop touches one cache line instead of two).
type Levels = smallvec::SmallVec<[Level; 2]>;

/// Exactly one cache line: a search hop reads one line, never two.
#[derive(Clone, Debug)]
#[repr(align(64))]
struct Node {
    /// The member: up to 22 bytes inside the node (see `KeyBytes`).
    ele: KeyBytes,
    score: f64,
    backward: u32,
    levels: Levels,
}

#[derive(Clone, Debug)]
pub struct SkipList {
    nodes: Vec<Node>,
    free: Vec<u32>,
    level: usize,
    length: usize,
    tail: u32,
}

impl Default for SkipList {
    fn default() -> Self {
        Self::new()
    }
}

/// Strict order of (score, member) pairs.
#[inline]
fn before(score: f64, ele: &[u8], s2: f64, e2: &[u8]) -> bool {
    score < s2 || (score == s2 && ele < e2)
}

impl SkipList {
    /// The heap the list holds (`engine::footprint`): its node array (free slots included),
    /// the free list, and per node a long member's bytes and levels past the two kept inline.
    pub fn footprint(&self, samples: usize) -> usize {
        use super::footprint::{array, Sampler};
        let own =
            |n: &Node| n.ele.heap_bytes() + if n.levels.spilled() { array::<Level>(n.levels.capacity()) } else { 0 };
        // The head node (all 32 levels) is counted whole, the members' nodes sampled.
        let head = self.nodes.first().map_or(0, own);
        let mut each = Sampler::new(samples);
        for n in self.nodes.iter().skip(1) {
            if !each.wants() {
                break;
            }
            each.add(own(n));
        }
        let members = self.nodes.len().saturating_sub(1);
        array::<Node>(self.nodes.capacity()) + array::<u32>(self.free.capacity()) + head + each.total(members)
    }

    pub fn new() -> SkipList {
        let head = Node {
            ele: KeyBytes::from_slice(b""),
            score: 0.0,
            backward: NIL,
            levels: Levels::from_elem(Level { forward: NIL, span: 0 }, MAX_LEVEL),
        };
        SkipList { nodes: vec![head], free: Vec::new(), level: 1, length: 0, tail: NIL }
    }

    pub fn len(&self) -> usize {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    #[inline]
    fn fwd(&self, x: u32, i: usize) -> u32 {
        self.nodes[x as usize].levels[i].forward
    }

    #[inline]
    fn span(&self, x: u32, i: usize) -> u32 {
        self.nodes[x as usize].levels[i].span
    }

    #[inline]
    fn lv(&mut self, x: u32, i: usize) -> &mut Level {
        &mut self.nodes[x as usize].levels[i]
    }

    fn random_level() -> usize {
        let mut rng = rand::thread_rng();
        let mut l = 1;
        while l < MAX_LEVEL && rng.gen::<f64>() < P {
            l += 1;
        }
        l
    }

    fn alloc(&mut self, ele: &[u8], score: f64, lvl: usize) -> u32 {
        let node = Node {
            ele: KeyBytes::from_slice(ele),
            score,
            backward: NIL,
            levels: Levels::from_elem(Level { forward: NIL, span: 0 }, lvl),
        };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Inserts an element known to be absent (Redis's `zslInsert`).
    pub fn insert(&mut self, score: f64, ele: &[u8]) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let f = self.fwd(x, i);
                if f != NIL && before(self.nodes[f as usize].score, &self.nodes[f as usize].ele, score, ele) {
                    rank[i] += self.span(x, i);
                    x = f;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        let lvl = Self::random_level();
        if lvl > self.level {
            for i in self.level..lvl {
                rank[i] = 0;
                update[i] = HEAD;
                self.lv(HEAD, i).span = self.length as u32;
            }
            self.level = lvl;
        }
        let x = self.alloc(ele, score, lvl);
        for i in 0..lvl {
            let u = update[i];
            let uf = self.fwd(u, i);
            let us = self.span(u, i);
            *self.lv(x, i) = Level { forward: uf, span: us - (rank[0] - rank[i]) };
            *self.lv(u, i) = Level { forward: x, span: (rank[0] - rank[i]) + 1 };
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(lvl) {
            self.lv(u, i).span += 1;
        }
        self.nodes[x as usize].backward = if update[0] == HEAD { NIL } else { update[0] };
        let f0 = self.fwd(x, 0);
        if f0 != NIL {
            self.nodes[f0 as usize].backward = x;
        } else {
            self.tail = x;
        }
        self.length += 1;
    }

    /// Unlinks `x` given its predecessors at every level; returns its member and score.
    fn delete_node(&mut self, x: u32, update: &[u32; MAX_LEVEL]) -> (Box<[u8]>, f64) {
        for (i, &u) in update.iter().enumerate().take(self.level) {
            if self.fwd(u, i) == x {
                let (xs, xf) = (self.span(x, i), self.fwd(x, i));
                let l = self.lv(u, i);
                l.span = l.span + xs - 1;
                l.forward = xf;
            } else {
                self.lv(u, i).span -= 1;
            }
        }
        let f0 = self.fwd(x, 0);
        let back = self.nodes[x as usize].backward;
        if f0 != NIL {
            self.nodes[f0 as usize].backward = back;
        } else {
            self.tail = back;
        }
        while self.level > 1 && self.fwd(HEAD, self.level - 1) == NIL {
            self.level -= 1;
        }
        self.length -= 1;
        let node = &mut self.nodes[x as usize];
        let score = node.score;
        let ele = std::mem::replace(&mut node.ele, KeyBytes::from_slice(b"")).into_box();
        node.levels = Levels::new();
        self.free.push(x);
        // Release the arena's tail when the list empties, so a drained zset gives memory back.
        if self.length == 0 {
            self.nodes.truncate(1);
            self.free.clear();
        }
        (ele, score)
    }

    /// Moves an existing element to a new score (Redis's `zslUpdateScore`): when the node stays
    /// between its neighbours only the score changes; otherwise it is unlinked and inserted
    /// again.
    pub fn update_score(&mut self, old: f64, ele: &[u8], new: f64) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && before(self.nodes[f as usize].score, &self.nodes[f as usize].ele, old, ele) {
                    x = f;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        let x = self.fwd(x, 0);
        if x == NIL || self.nodes[x as usize].score != old || &*self.nodes[x as usize].ele != ele {
            return;
        }
        let back = self.nodes[x as usize].backward;
        let next = self.fwd(x, 0);
        let after_back = back == NIL || {
            let b = &self.nodes[back as usize];
            before(b.score, &b.ele, new, ele)
        };
        let before_next = next == NIL || {
            let n = &self.nodes[next as usize];
            before(new, ele, n.score, &n.ele)
        };
        if after_back && before_next {
            self.nodes[x as usize].score = new;
            return;
        }
        self.delete_node(x, &update);
        self.insert(new, ele);
    }

    /// Removes the element (score, ele); true if it was there (Redis's `zslDelete`).
    pub fn delete(&mut self, score: f64, ele: &[u8]) -> bool {
        let mut update = [HEAD; MAX_LEVEL];
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && before(self.nodes[f as usize].score, &self.nodes[f as usize].ele, score, ele) {
                    x = f;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        let x = self.fwd(x, 0);
        if x != NIL && self.nodes[x as usize].score == score && &*self.nodes[x as usize].ele == ele {
            self.delete_node(x, &update);
            true
        } else {
            false
        }
    }

    /// Number of leading elements for which `pred` holds; `pred` must hold for a prefix of the
    /// order (true, …, true, false, …). O(log n). This one primitive answers rank lookups and
    /// the first/last element of score and lex ranges.
    pub fn count_while(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut x = HEAD;
        let mut rank = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && pred(self.nodes[f as usize].score, &self.nodes[f as usize].ele) {
                    rank += self.span(x, i) as usize;
                    x = f;
                } else {
                    break;
                }
            }
        }
        rank
    }

    /// The node at 0-based `rank` (Redis's `zslGetElementByRank`, which is 1-based).
    fn node_at(&self, rank: usize) -> u32 {
        let target = rank + 1;
        let mut x = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let f = self.fwd(x, i);
                if f != NIL && traversed + self.span(x, i) as usize <= target {
                    traversed += self.span(x, i) as usize;
                    x = f;
                } else {
                    break;
                }
            }
            if traversed == target {
                return x;
            }
        }
        NIL
    }

    /// Element at 0-based `rank`.
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        if rank >= self.length {
            return None;
        }
        let n = &self.nodes[self.node_at(rank) as usize];
        Some((&n.ele, n.score))
    }

    /// Visits ranks `start..=end` (0-based, in range), ascending or, with `rev`, from `end`
    /// down to `start`. O(log n + k).
    pub fn for_range(&self, start: usize, end: usize, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        if start > end || end >= self.length {
            return;
        }
        let mut x = self.node_at(if rev { end } else { start });
        for _ in start..=end {
            let n = &self.nodes[x as usize];
            f(&n.ele, n.score);
            x = if rev { n.backward } else { n.levels[0].forward };
        }
    }

    /// Removes ranks `start..=end` (0-based), handing each removed element to `f`
    /// (Redis's `zslDeleteRangeByRank`).
    pub fn remove_range(&mut self, start: usize, end: usize, mut f: impl FnMut(Box<[u8]>, f64)) {
        if start > end || end >= self.length {
            return;
        }
        let (start, end) = (start + 1, end + 1);
        let mut update = [HEAD; MAX_LEVEL];
        let mut x = HEAD;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let fw = self.fwd(x, i);
                if fw != NIL && traversed + (self.span(x, i) as usize) < start {
                    traversed += self.span(x, i) as usize;
                    x = fw;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        traversed += 1;
        let mut x = self.fwd(x, 0);
        while x != NIL && traversed <= end {
            let next = self.fwd(x, 0);
            let score = self.nodes[x as usize].score;
            let (ele, _) = self.delete_node(x, &update);
            f(ele, score);
            traversed += 1;
            x = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_invariants(sl: &SkipList) {
        // Level-0 order, backward links, and spans agree with ranks.
        let mut v = Vec::new();
        let mut x = sl.fwd(HEAD, 0);
        let mut prev = NIL;
        while x != NIL {
            let n = &sl.nodes[x as usize];
            assert_eq!(n.backward, prev);
            v.push((n.score, n.ele.clone()));
            prev = x;
            x = n.levels[0].forward;
        }
        assert_eq!(sl.tail, prev);
        assert_eq!(v.len(), sl.len());
        for w in v.windows(2) {
            assert!(before(w[0].0, &w[0].1, w[1].0, &w[1].1));
        }
        for (r, (s, e)) in v.iter().enumerate() {
            assert_eq!(sl.get(r), Some((&e[..], *s)));
            assert_eq!(sl.count_while(|s2, e2| before(s2, e2, *s, e)), r);
        }
    }

    #[test]
    fn node_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Node>(), 64);
    }

    #[test]
    fn insert_delete_rank_select() {
        let mut sl = SkipList::new();
        let mut model: Vec<(f64, Vec<u8>)> = Vec::new();
        let mut rng = rand::thread_rng();
        for i in 0..2000u32 {
            let score = (rng.gen_range(0..100)) as f64;
            let ele = format!("m{}", i % 700).into_bytes();
            if let Some(pos) = model.iter().position(|(_, e)| *e == ele) {
                if i % 3 == 0 {
                    // Rescore in place or by moving (both paths of update_score).
                    let new = model[pos].0 + (rng.gen_range(0..3) as f64 - 1.0) * 0.5;
                    sl.update_score(model[pos].0, &ele, new);
                    model[pos].0 = new;
                    continue;
                }
                let (s, e) = model.remove(pos);
                assert!(sl.delete(s, &e));
            } else {
                sl.insert(score, &ele.clone());
                model.push((score, ele));
            }
        }
        model.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
        check_invariants(&sl);
        let mut got = Vec::new();
        sl.for_range(0, sl.len() - 1, false, |e, s| got.push((s, e.to_vec())));
        assert_eq!(got, model);
        let mut rev = Vec::new();
        sl.for_range(3, 10, true, |e, s| rev.push((s, e.to_vec())));
        let mut expect = model[3..=10].to_vec();
        expect.reverse();
        assert_eq!(rev, expect);
        assert!(!sl.delete(1e9, b"absent"));
    }

    #[test]
    fn remove_range_and_count_while() {
        let mut sl = SkipList::new();
        for i in 0..100 {
            sl.insert(i as f64, format!("{i:03}").as_bytes());
        }
        assert_eq!(sl.count_while(|s, _| s < 42.5), 43);
        let mut removed = Vec::new();
        sl.remove_range(10, 19, |e, s| removed.push((e, s)));
        assert_eq!(removed.len(), 10);
        assert_eq!(removed[0].1, 10.0);
        assert_eq!(removed[9].1, 19.0);
        assert_eq!(sl.len(), 90);
        check_invariants(&sl);
        sl.remove_range(0, 89, |_, _| {});
        assert!(sl.is_empty());
        assert_eq!(sl.nodes.len(), 1);
        sl.insert(1.0, b"a");
        check_invariants(&sl);
    }
}
