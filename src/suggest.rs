//! The known name nearest a mistyped one, for the "did you mean" of an
//! error message: the config's keys and values, a community's well-known
//! name. A utility like `sorted`: it imports nothing.

/// The known name closest to `name`, if it is close enough to be a typo:
/// same letters in another case, or an edit distance of at most 2 (at most
/// a third of the word for longer words).
pub(crate) fn did_you_mean<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    if let Some(same) = known.iter().find(|k| k.eq_ignore_ascii_case(name)) {
        return Some(*same);
    }
    let limit = 2.max(name.chars().count() / 3);
    let close = known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k);
    // A shortened or lengthened name ("labels" for "match_labels",
    // "hold_time_secs" for "hold_time") is also worth suggesting.
    close.or_else(|| {
        known
            .iter()
            .copied()
            .find(|k| (name.len() >= 4 && k.contains(name)) || (k.len() >= 4 && name.contains(k)))
    })
}

/// Levenshtein distance, counting an adjacent swap as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // rows[i][j]: distance between a[..i] and b[..j].
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_misses_only() {
        let known = ["hold_time", "keepalive", "name", "peer"];
        assert_eq!(did_you_mean("hold_tme", &known), Some("hold_time"));
        assert_eq!(did_you_mean("kepealive", &known), Some("keepalive"));
        assert_eq!(did_you_mean("peers", &known), Some("peer"));
        assert_eq!(did_you_mean("Name", &known), Some("name"));
        assert_eq!(did_you_mean("colour", &known), None);
        assert_eq!(did_you_mean("hold_time_secs", &known), Some("hold_time"));
        assert_eq!(
            did_you_mean("labels", &["match_labels"]),
            Some("match_labels")
        );
    }
}
