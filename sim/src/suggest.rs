//! "Did you mean ...?": the known name closest to a misspelt one.

/// The candidate most like `word` (Jaro-Winkler similarity of at least 0.8, as command-line
/// tools use), or `None` when nothing is close.
pub fn closest<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
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
    }
}
