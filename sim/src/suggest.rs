//! "Did you mean ...?": the known name closest to a misspelt one.

/// The candidate most like `word`, or `None` when nothing is close. In order: the fewest edits
/// (a letter added, dropped, changed or two swapped; at most one per four letters, at least
/// one), ties to the more similar by Jaro-Winkler; then the same words in another order, or with
/// some missing (`p99_latency` for `latency_ms_p99`; words split at `_` and `.`), the candidate
/// with fewest other words; then a Jaro-Winkler similarity of at least 0.8, as command-line
/// tools use.
pub fn closest<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let candidates: Vec<&str> = candidates.into_iter().collect();
    let limit = (word.chars().count() / 4).max(1);
    let by_edits = candidates
        .iter()
        .map(|c| (strsim::osa_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by(|(d1, c1), (d2, c2)| {
            d1.cmp(d2)
                .then(strsim::jaro_winkler(word, c2).total_cmp(&strsim::jaro_winkler(word, c1)))
        })
        .map(|(_, c)| *c);
    if by_edits.is_some() {
        return by_edits;
    }
    let words =
        |s: &'a str| -> Vec<&'a str> { s.split(['_', '.']).filter(|w| !w.is_empty()).collect() };
    let mine: Vec<&str> = word.split(['_', '.']).filter(|w| !w.is_empty()).collect();
    if mine.len() >= 2 {
        let by_words = candidates
            .iter()
            .filter(|c| {
                let theirs = words(c);
                mine.iter().all(|w| theirs.contains(w))
            })
            .min_by_key(|c| words(c).len());
        if let Some(c) = by_words {
            return Some(c);
        }
    }
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(word, c);
        if score >= 0.8 && best.is_none_or(|(b, _)| score > b) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c)
}

/// `"; did you mean `NAME`?"` for the closest candidate, or an empty string.
pub fn did_you_mean<'a, I>(word: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    closest(word, candidates)
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_closest_name_only_when_close() {
        let fields = ["messages", "rate", "keys", "kind"];
        assert_eq!(closest("keyz", fields), Some("keys"));
        assert_eq!(closest("mesages", fields), Some("messages"));
        assert_eq!(closest("zzzzzz", fields), None);
        assert_eq!(did_you_mean("rat", fields), "; did you mean `rate`?");
        assert_eq!(did_you_mean("qqq", fields), "");
        // Words in another order, or one left out.
        let figures = ["latency_ms_p50", "latency_ms_p99", "stale_writes"];
        assert_eq!(closest("p99_latency", figures), Some("latency_ms_p99"));
        assert_eq!(closest("latency_p50", figures), Some("latency_ms_p50"));
        // The fewest edits win over a higher similarity elsewhere.
        assert_eq!(closest("latency_ms_p9", figures), Some("latency_ms_p99"));
    }
}
