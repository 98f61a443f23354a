//! Small text helpers shared by error messages and reports.

/// An error chain as one line, each cause once (multi-line tool output
/// such as clang's diagnostics is kept below it).
pub fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ")
}

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

/// A comparison operator of a predicate (`--expect` of explore, the state
/// constraints of plans).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Cmp {
    /// Whether `a OP b`.
    pub fn holds(self, a: i64, b: i64) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }
}

/// Splits `lhs OP rhs` at its first comparison operator (the longer one
/// when two start there: `<=` before `<`); both sides trimmed.
pub fn split_comparison(text: &str) -> Option<(&str, Cmp, &str)> {
    const OPS: [(&str, Cmp); 6] = [
        ("==", Cmp::Eq),
        ("!=", Cmp::Ne),
        ("<=", Cmp::Le),
        (">=", Cmp::Ge),
        ("<", Cmp::Lt),
        (">", Cmp::Gt),
    ];
    let (pos, sym, op) = OPS
        .iter()
        .filter_map(|(s, o)| text.find(s).map(|p| (p, *s, *o)))
        .min_by_key(|(p, s, _)| (*p, usize::MAX - s.len()))?;
    Some((text[..pos].trim(), op, text[pos + sym.len()..].trim()))
}

/// An integer as predicates write it: decimal or `0x` hex, optionally
/// negative, or `true`/`false`.
pub fn parse_int(v: &str) -> Option<i64> {
    match v {
        "true" => return Some(1),
        "false" => return Some(0),
        _ => {}
    }
    let (neg, digits) = match v.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, v),
    };
    let n = match digits.strip_prefix("0x") {
        Some(h) => i64::from_str_radix(h, 16).ok()?,
        None => digits.parse::<i64>().ok()?,
    };
    Some(if neg { -n } else { n })
}

#[cfg(test)]
mod comparison_tests {
    use super::*;

    #[test]
    fn splits_at_the_first_operator_preferring_the_longer() {
        assert_eq!(split_comparison("x <= 5"), Some(("x", Cmp::Le, "5")));
        assert_eq!(split_comparison("a<b"), Some(("a", Cmp::Lt, "b")));
        assert_eq!(split_comparison("x != -1"), Some(("x", Cmp::Ne, "-1")));
        assert_eq!(split_comparison("x"), None);
        assert_eq!(parse_int("-0x10"), Some(-16));
        assert_eq!(parse_int("true"), Some(1));
        assert_eq!(parse_int("x"), None);
        assert!(Cmp::Ge.holds(3, 3) && !Cmp::Gt.holds(3, 3));
    }
}
