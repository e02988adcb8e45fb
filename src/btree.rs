//! B-trees built from entries already in key order, in bounded memory.
//!
//! `BTreeMap::from_iter` gathers every entry in a list, sorts it, then
//! builds the tree beside it: for a table of 100k routes the list and the
//! tree are both resident at once, and the list's pages are faulted in
//! only to be given back. Building in slices that are appended (std's
//! `append` merges into full nodes, freeing the old tree's nodes as it
//! goes) keeps at most a slice — a quarter of the tree so far, and at
//! least [`MIN_SLICE`] entries — beside the tree, at the cost of moving
//! each entry a few more times (each append moves the tree so far; the
//! slices grow with it, so the moves stay linear in the entries).
//!
//! A tree filled by `insert`ing in key order is no alternative: its nodes
//! split at the middle and stay half empty (twice the memory).

use std::collections::BTreeMap;

/// The smallest slice: below this, the list is small beside the rest.
pub const MIN_SLICE: usize = 16 * 1024;

/// A tree of `entries`, which come in strictly ascending key order (a
/// key out of order still lands in its place, at the cost of a merge).
pub fn from_sorted<K: Ord, V>(entries: impl IntoIterator<Item = (K, V)>) -> BTreeMap<K, V> {
    let mut tree = BTreeMap::new();
    extend_sorted(&mut tree, entries);
    tree
}

/// Adds `entries`, in ascending key order, to `tree` a slice at a time
/// (see the module doc). A key already in `tree` takes the new value.
pub fn extend_sorted<K: Ord, V>(
    tree: &mut BTreeMap<K, V>,
    entries: impl IntoIterator<Item = (K, V)>,
) {
    let mut entries = entries.into_iter().peekable();
    while entries.peek().is_some() {
        let slice = MIN_SLICE.max(tree.len() / 4);
        let mut part: BTreeMap<K, V> = entries.by_ref().take(slice).collect();
        tree.append(&mut part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_holds_every_entry_in_order() {
        for n in [
            0,
            1,
            MIN_SLICE - 1,
            MIN_SLICE,
            MIN_SLICE + 1,
            5 * MIN_SLICE + 7,
        ] {
            let tree = from_sorted((0..n as u32).map(|i| (i * 2, i)));
            assert_eq!(tree.len(), n);
            assert!(
                tree.iter()
                    .enumerate()
                    .all(|(i, (k, v))| *k == 2 * i as u32 && *v == i as u32)
            );
        }
    }

    #[test]
    fn entries_out_of_order_and_existing_keys_still_land_in_place() {
        let mut tree: BTreeMap<u32, u32> = (0..10).map(|i| (i * 10, 0)).collect();
        extend_sorted(&mut tree, [(5, 1), (3, 1), (20, 1)]);
        assert_eq!(tree.len(), 12);
        assert_eq!(tree[&20], 1, "the new value");
        assert_eq!(
            tree.keys().copied().take(4).collect::<Vec<_>>(),
            vec![0, 3, 5, 10]
        );
    }
}
