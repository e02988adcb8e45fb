//! A map kept as one list sorted by key, for the tables the daemon
//! builds in bulk and then walks in key order on every change.
//!
//! A B-tree cannot be built from sorted entries without a list beside it:
//! std's `BTreeMap::from_iter` gathers the entries in a `Vec`, checks
//! their order and only then builds its nodes, so at the peak of a bulk
//! load both stand (with 100k routes, 7.2 MB of list and 6.6 MB of tree),
//! and both are faulted in page by page. Here the list *is* the table:
//! built once, at its final size when the source says how many entries
//! come. Lookups are binary searches; walks read one array.
//!
//! The cost is in single changes: inserting or removing one key moves
//! the entries after it. The users change many keys at once by merging
//! ([`SortedMap::merge`]) and walk the whole table on every change
//! anyway, so no call gets worse than the walk it already does.

/// Pairs `(K, V)`, strictly ascending by key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortedMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K, V> SortedMap<K, V> {
    pub const fn new() -> Self {
        SortedMap {
            entries: Vec::new(),
        }
    }
}

/// A merge of fewer keys than this inserts each in place; more are merged
/// in one pass.
const FEW: usize = 8;

fn pair<K, V>(e: &(K, V)) -> (&K, &V) {
    (&e.0, &e.1)
}

/// The entries in key order.
pub type Iter<'a, K, V> = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&(K, V)) -> (&K, &V)>;

impl<K: Ord, V> SortedMap<K, V> {
    /// The map of `entries`, expected in ascending key order. Out of
    /// order, they are sorted; of equal keys the last stands, as in
    /// `BTreeMap::from_iter`.
    ///
    /// The list is allocated once, at the iterator's upper size bound when
    /// it has one: a filtered walk of a table (a peer's routes out of the
    /// stability layer's) has a lower bound of none, and growing to 10k
    /// routes by doubling mapped, copied and unmapped five lists on the
    /// way to the first UPDATE. What goes unused is given back when it is
    /// most of the list (a peer that takes few of the routes).
    pub fn from_sorted(entries: impl IntoIterator<Item = (K, V)>) -> Self {
        let entries = entries.into_iter();
        let (low, high) = entries.size_hint();
        let mut list = Vec::with_capacity(high.unwrap_or(low));
        list.extend(entries);
        if list.capacity() / 2 > list.len() {
            list.shrink_to_fit();
        }
        Self::from_vec(list)
    }

    /// [`Self::from_sorted`] of a list already built: it becomes the table.
    pub fn from_vec(mut entries: Vec<(K, V)>) -> Self {
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            // Stable: of equal keys, the later stays behind the earlier.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            keep_last(&mut entries);
        }
        SortedMap { entries }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The key at position `i` of the key order.
    pub fn key_at(&self, i: usize) -> &K {
        &self.entries[i].0
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn find(&self, key: &K) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.find(key).is_ok()
    }

    pub fn iter(&self) -> Iter<'_, K, V> {
        self.entries.iter().map(pair as fn(&(K, V)) -> (&K, &V))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + Clone {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + Clone {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }

    /// Puts `value` under `key`; the value it replaces, if any. Moves the
    /// entries after `key`: for many keys, [`Self::merge`].
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// Takes `key` out. Moves the entries after it.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// Keeps the entries for which `keep` says so, in one pass.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }

    /// Takes every key of `keys` out in one pass over the table (removing
    /// each alone would move the rest of the list each time); `removed`
    /// sees each key taken out.
    pub fn remove_all<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k K>,
        mut removed: impl FnMut(&K),
    ) where
        K: 'k,
    {
        let mut gone: Vec<&K> = keys.into_iter().collect();
        if gone.is_empty() {
            return;
        }
        gone.sort_unstable();
        self.entries.retain(|(k, _)| {
            let keep = gone.binary_search(&k).is_err();
            if !keep {
                removed(k);
            }
            keep
        });
    }

    /// Adds `entries` (any order; of equal keys the last stands, and it
    /// replaces a value already in the table). A few are inserted each in
    /// place; more are appended and the two runs merged in one pass.
    pub fn merge(&mut self, entries: impl IntoIterator<Item = (K, V)>) {
        let old = self.entries.len();
        self.entries.extend(entries);
        if self.entries.len() - old < FEW {
            let added = self.entries.split_off(old);
            for (k, v) in added {
                self.insert(k, v);
            }
            return;
        }
        // A stable sort finds the table's run and the added one (sorted
        // or not) and merges them; of equal keys, the added comes after.
        self.entries.sort_by(|a, b| a.0.cmp(&b.0));
        keep_last(&mut self.entries);
    }
}

/// Of each run of equal keys in `entries` (sorted), keeps the last value
/// in the first entry's place.
fn keep_last<K: PartialEq, V>(entries: &mut Vec<(K, V)>) {
    entries.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(&mut later.1, &mut kept.1);
        }
        same
    });
}

impl<K: Ord, V> FromIterator<(K, V)> for SortedMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        Self::from_sorted(entries)
    }
}

impl<'a, K: Ord, V> IntoIterator for &'a SortedMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<K, V> IntoIterator for SortedMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<K: Ord, V> std::ops::Index<&K> for SortedMap<K, V> {
    type Output = V;

    fn index(&self, key: &K) -> &V {
        self.get(key).expect("no entry for the key")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// A filtered walk (no lower size bound) is allocated at its final
    /// size when it keeps everything, and keeps at most twice what it
    /// holds when it keeps little.
    #[test]
    fn a_filtered_walk_is_allocated_once_and_keeps_little_spare() {
        let all = SortedMap::from_sorted((0u32..10_000).filter(|_| true).map(|k| (k, ())));
        assert_eq!(all.len(), 10_000);
        assert_eq!(all.entries.capacity(), 10_000);
        let few = SortedMap::from_sorted((0u32..10_000).filter(|k| k % 100 == 0).map(|k| (k, ())));
        assert_eq!(few.len(), 100);
        assert!(few.entries.capacity() <= 200, "{}", few.entries.capacity());
    }

    fn same<K: Ord + Clone + std::fmt::Debug, V: PartialEq + Clone + std::fmt::Debug>(
        ours: &SortedMap<K, V>,
        std: &BTreeMap<K, V>,
    ) {
        let a: Vec<_> = ours.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let b: Vec<_> = std.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn entries_in_order_become_the_table_as_they_are() {
        let entries: Vec<(u32, u32)> = (0..100_000).map(|i| (i * 2, i)).collect();
        let ptr = entries.as_ptr();
        let map = SortedMap::from_vec(entries);
        assert_eq!(map.len(), 100_000);
        // No copy, no second list: the list is the table.
        assert_eq!(map.entries.as_ptr(), ptr);
        assert_eq!(map.get(&199_998), Some(&99_999));
        assert_eq!(map.get(&3), None);
    }

    proptest! {
        // Against std's map: building, lookups, single changes, merges
        // and retain give the same table.
        #[test]
        fn behaves_as_a_btree_map(
            built in proptest::collection::vec((0u16..400, any::<u8>()), 0..200),
            ops in proptest::collection::vec(
                (0u8..4, 0u16..400, any::<u8>(), proptest::collection::vec((0u16..400, any::<u8>()), 0..40)),
                0..30,
            ),
        ) {
            let mut ours: SortedMap<u16, u8> = built.iter().copied().collect();
            let mut std: BTreeMap<u16, u8> = built.iter().copied().collect();
            same(&ours, &std);
            for (op, k, v, many) in ops {
                match op {
                    0 => prop_assert_eq!(ours.insert(k, v), std.insert(k, v)),
                    1 => prop_assert_eq!(ours.remove(&k), std.remove(&k)),
                    2 => {
                        ours.merge(many.iter().copied());
                        std.extend(many.iter().copied());
                    }
                    _ => {
                        ours.retain(|k, v| (*k ^ u16::from(*v)) % 3 != 0);
                        std.retain(|k, v| (*k ^ u16::from(*v)) % 3 != 0);
                    }
                }
                same(&ours, &std);
                prop_assert_eq!(ours.get(&k), std.get(&k));
                prop_assert_eq!(ours.contains_key(&k), std.contains_key(&k));
                prop_assert_eq!(ours.len(), std.len());
            }
        }
    }
}
