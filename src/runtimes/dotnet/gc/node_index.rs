//! Object addresses ↔ node numbers of the object graph, in about 1.3 bytes per object instead
//! of a sorted `Vec<u64>` (8 bytes) searched in O(log n) per reference.
//!
//! Nodes are numbered in address order. The addresses are cut into spans of objects at most
//! [`MAX_GAP`] bytes apart (a large object, or the space between two regions, starts a new
//! span); in a span, one bit per 8 bytes says where an object starts, and each 64-bit word of
//! bits keeps the number of the first node it holds (its rank). An address is a node by a
//! search among the spans (few), one bit test and one popcount; a node's address is the
//! inverse (a search among the span's word ranks, then a select in one word).
//!
//! Memory is bounded by the object count whatever the addresses: each object adds at most
//! `MAX_GAP / 512 + 1` words (12 bytes each) or one span.

/// Objects further apart than this start a new span (so a gap costs at most a few words).
const MAX_GAP: u64 = 2048;
/// Bytes per bit.
const GRAIN: u64 = 8;

/// A run of objects whose starts are marked in `bits[word..]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    /// The first object's address: bit 0 of `bits[word]`.
    start: u64,
    /// Past the last object's address.
    end: u64,
    /// The span's first word in `bits`.
    word: usize,
    /// The number of the span's first node.
    first_node: u32,
}

/// The addresses of a graph's nodes (see the module doc).
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeIndex {
    /// Ascending and disjoint; each holds at least one node.
    spans: Vec<Span>,
    bits: Vec<u64>,
    /// `ranks[w]`: the number of nodes before word `w` (the first node of `bits[w]`).
    ranks: Vec<u32>,
    len: u32,
    last: u64,
}

impl NodeIndex {
    /// Adds the next node at `a`; refused (`false`) unless `a` is above every address before
    /// it (a damaged segment list can make segments overlap) and the count fits a u32.
    pub(crate) fn push(&mut self, a: u64) -> bool {
        if (self.len > 0 && a <= self.last) || self.len == u32::MAX {
            return false;
        }
        let same_span = self.spans.last().is_some_and(|s| a - self.last <= MAX_GAP && (a - s.start).is_multiple_of(GRAIN));
        if !same_span {
            self.spans.push(Span { start: a, end: a, word: self.bits.len(), first_node: self.len });
        }
        let Some(s) = self.spans.last_mut() else { return false };
        let bit = (a - s.start) / GRAIN;
        let w = s.word + (bit / 64) as usize;
        while self.bits.len() <= w {
            self.bits.push(0);
            self.ranks.push(self.len);
        }
        self.bits[w] |= 1 << (bit % 64);
        s.end = a.saturating_add(1);
        self.len += 1;
        self.last = a;
        true
    }

    /// An index of `addresses` (ascending; any address not above the one before is left out).
    #[cfg(test)]
    pub(crate) fn of(addresses: &[u64]) -> NodeIndex {
        let mut x = NodeIndex::default();
        for &a in addresses {
            x.push(a);
        }
        x
    }

    /// Frees the room the pushes left over.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.spans.shrink_to_fit();
        self.bits.shrink_to_fit();
        self.ranks.shrink_to_fit();
    }

    /// Nodes indexed.
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// The lowest and highest node address (`(1, 0)` when empty: nothing is between).
    pub(crate) fn bounds(&self) -> (u64, u64) {
        match self.spans.first() {
            Some(s) => (s.start, self.last),
            None => (1, 0),
        }
    }

    /// The node of the object at `a`, if one starts there.
    pub(crate) fn node_of(&self, a: u64) -> Option<u32> {
        let mut hint = 0;
        self.node_near(a, &mut hint)
    }

    /// As [`NodeIndex::node_of`], trying the span `hint` first (and leaving there the span
    /// found): most references point near the last one.
    #[inline]
    pub(crate) fn node_near(&self, a: u64, hint: &mut usize) -> Option<u32> {
        let s = match self.spans.get(*hint) {
            Some(s) if s.start <= a && a < s.end => s,
            _ => {
                let i = self.spans.partition_point(|s| s.start <= a).checked_sub(1)?;
                *hint = i;
                &self.spans[i]
            }
        };
        if a >= s.end || !(a - s.start).is_multiple_of(GRAIN) {
            return None;
        }
        let bit = (a - s.start) / GRAIN;
        let w = s.word + (bit / 64) as usize;
        let word = *self.bits.get(w)?;
        let b = bit % 64;
        if (word >> b) & 1 == 0 {
            return None;
        }
        Some(self.ranks[w] + (word & ((1u64 << b) - 1)).count_ones())
    }

    /// The span holding `node` and the word of `bits` its bit is in.
    fn locate(&self, node: u32) -> Option<(usize, usize)> {
        if node >= self.len {
            return None;
        }
        let i = self.spans.partition_point(|s| s.first_node <= node).checked_sub(1)?;
        let s = &self.spans[i];
        let words_end = self.spans.get(i + 1).map_or(self.bits.len(), |n| n.word);
        // The last word whose first node is at or before `node` holds it (the words after it
        // start past it; a word with no bits has the next one's rank).
        let w = s.word + self.ranks.get(s.word..words_end)?.partition_point(|&r| r <= node).checked_sub(1)?;
        Some((i, w))
    }

    /// The address of `node`.
    pub(crate) fn address(&self, node: u32) -> Option<u64> {
        let (i, w) = self.locate(node)?;
        let mut word = self.bits[w];
        for _ in 0..node - self.ranks[w] {
            word &= word.wrapping_sub(1);
        }
        if word == 0 {
            return None;
        }
        let s = &self.spans[i];
        Some(s.start + (((w - s.word) as u64) * 64 + word.trailing_zeros() as u64) * GRAIN)
    }

    /// The addresses of the nodes from `node` on, in node order.
    #[cfg(test)]
    pub(crate) fn iter_from(&self, node: u32) -> Addresses<'_> {
        match self.locate(node) {
            None => Addresses { index: self, span: self.spans.len(), word: self.bits.len(), rest: 0 },
            Some((i, w)) => {
                let mut rest = self.bits[w];
                for _ in 0..node - self.ranks[w] {
                    rest &= rest.wrapping_sub(1);
                }
                Addresses { index: self, span: i, word: w, rest }
            }
        }
    }

    /// Bytes held.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.spans.capacity() * std::mem::size_of::<Span>() + self.bits.capacity() * 8 + self.ranks.capacity() * 4
    }
}

/// Node addresses in order ([`NodeIndex::iter_from`]).
#[cfg(test)]
pub(crate) struct Addresses<'a> {
    index: &'a NodeIndex,
    span: usize,
    word: usize,
    /// The current word's bits not yet given.
    rest: u64,
}

#[cfg(test)]
impl Iterator for Addresses<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let x = self.index;
        while self.rest == 0 {
            self.word += 1;
            if self.word >= x.bits.len() {
                return None;
            }
            self.rest = x.bits[self.word];
        }
        // The span of this word: the last one starting at or before it.
        while x.spans.get(self.span + 1).is_some_and(|n| n.word <= self.word) {
            self.span += 1;
        }
        let s = x.spans.get(self.span)?;
        let bit = self.rest.trailing_zeros() as u64;
        self.rest &= self.rest - 1;
        Some(s.start + (((self.word - s.word) as u64) * 64 + bit) * GRAIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(addresses: &[u64]) {
        let x = NodeIndex::of(addresses);
        assert_eq!(x.len(), addresses.len());
        for (i, &a) in addresses.iter().enumerate() {
            assert_eq!(x.node_of(a), Some(i as u32), "node of {a:#x}");
            assert_eq!(x.address(i as u32), Some(a), "address of node {i}");
            assert_eq!(x.iter_from(i as u32).collect::<Vec<_>>(), addresses[i..], "from node {i}");
        }
        assert_eq!(x.address(addresses.len() as u32), None);
        assert_eq!(x.iter_from(addresses.len() as u32).count(), 0);
        // Every other address near them is no node.
        for &a in addresses {
            for d in [1u64, 4, 8, 16, 24, 4096] {
                for b in [a.wrapping_sub(d), a.wrapping_add(d)] {
                    assert_eq!(x.node_of(b), addresses.binary_search(&b).ok().map(|i| i as u32), "{b:#x}");
                }
            }
        }
        assert_eq!(x.node_of(0), addresses.binary_search(&0).ok().map(|i| i as u32));
        // A hint left by any earlier lookup gives the same answers.
        let mut hint = usize::MAX;
        for (k, &a) in addresses.iter().enumerate().rev() {
            assert_eq!(x.node_near(a, &mut hint), Some(k as u32));
            assert_eq!(x.node_near(a.wrapping_add(4), &mut hint), None);
        }
        assert_eq!(x.node_of(u64::MAX), None);
    }

    #[test]
    fn addresses_and_nodes_are_inverse() {
        check(&[]);
        check(&[0x1000]);
        check(&[0x1000, 0x1018, 0x1030, 0x1200, 0x1208]);
        // Word boundaries, gaps that start spans, far regions, unaligned starts, top of memory.
        let mut a: Vec<u64> = (0..300).map(|i| 0x7f00_0000_0000 + 24 * i).collect();
        a.extend((0..70).map(|i| 0x7f00_0010_0000 + 8 * i));
        a.extend([0x7f00_0020_0000, 0x7f00_0020_0000 + MAX_GAP, 0x7f00_0020_0000 + 2 * MAX_GAP + 8]);
        a.extend([0x7f00_0030_0003, 0x7f00_0030_000b, 0x7f00_0030_0010, 0x7f00_0030_0018]);
        a.extend([u64::MAX - 8 * 70, u64::MAX - 15, u64::MAX - 7]);
        check(&a);
    }

    #[test]
    fn refuses_addresses_out_of_order() {
        let mut x = NodeIndex::default();
        assert!(x.push(0x100));
        assert!(!x.push(0x100));
        assert!(!x.push(0x80));
        assert!(x.push(0x108));
        assert_eq!(x.len(), 2);
        assert_eq!(x.node_of(0x80), None);
        assert_eq!(x.node_of(0x108), Some(1));
        assert_eq!(x.bounds(), (0x100, 0x108));
    }

    #[test]
    fn memory_is_bounded_by_the_objects() {
        // Objects spread MAX_GAP apart: a few words each, never a bitmap of the whole range.
        let a: Vec<u64> = (0..10_000u64).map(|i| 0x1_0000_0000 + i * MAX_GAP).collect();
        let x = NodeIndex::of(&a);
        assert!(x.heap_bytes() <= a.len() * (12 * (MAX_GAP / 512 + 1) as usize + 64), "{}", x.heap_bytes());
        // And 1 TiB apart: one span each.
        let a: Vec<u64> = (0..1_000u64).map(|i| i << 40).collect();
        assert!(NodeIndex::of(&a).heap_bytes() <= 1_000 * 64);
    }
}
