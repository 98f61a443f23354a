//! Small text helpers shared by error messages and reports.

/// Levenshtein edit distance.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Up to `n` names from `candidates` closest to `name` (prefix and substring
/// matches first, then by edit distance), for "did you mean" messages.
pub fn nearest<'a>(name: &str, candidates: &[&'a str], n: usize) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &'a str)> = candidates
        .iter()
        .map(|c| {
            let d = if c.contains(name) || name.contains(*c) {
                0
            } else {
                edit_distance(name, c)
            };
            (d, *c)
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(n).map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_and_suggestions() {
        assert_eq!(edit_distance("balance", "balnce"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(
            nearest("balnce", &["lock_a", "balance", "balances"], 2),
            vec!["balance", "balances"]
        );
    }
}
