//! A caller's text as an answer repeats it: whole when short, cut when long, so that no caller
//! can make an error message as long as it likes (a 10,000-character id echoed back).

use std::borrow::Cow;

/// The most characters of a caller's text an answer repeats.
pub const QUOTED_CHARS: usize = 64;

/// `text` whole if it has at most [`QUOTED_CHARS`] characters, else its first ones, an
/// ellipsis and its length.
pub fn quoted(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(QUOTED_CHARS) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => Cow::Owned(format!(
            "{}… ({} characters)",
            &text[..cut],
            text.chars().count()
        )),
    }
}

/// `message` with each text it quotes (in backquotes or double quotes, as serde's messages
/// quote an unknown key or a string of the wrong type) cut by [`quoted`]: the caller's text in
/// it is bounded, the rest kept whole.
pub fn with_quotes_bounded(message: &str) -> String {
    let mut bounded = String::with_capacity(message.len().min(1024));
    for (outer, part) in message.split('`').enumerate() {
        if outer > 0 {
            bounded.push('`');
        }
        for (inner, piece) in part.split('"').enumerate() {
            if inner > 0 {
                bounded.push('"');
            }
            if outer % 2 == 1 || inner % 2 == 1 {
                bounded.push_str(&quoted(piece));
            } else {
                bounded.push_str(piece);
            }
        }
    }
    bounded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_and_measured() {
        assert_eq!(quoted("0badc0de"), "0badc0de");
        let long = "é".repeat(10_000);
        let shown = quoted(&long);
        assert!(shown.ends_with("… (10000 characters)"), "{shown}");
        assert_eq!(shown.chars().filter(|c| *c == 'é').count(), QUOTED_CHARS);
        assert_eq!(quoted(&"x".repeat(QUOTED_CHARS)), "x".repeat(QUOTED_CHARS));
    }

    #[test]
    fn a_messages_quoted_texts_are_bounded_and_the_rest_kept() {
        let key = "k".repeat(10_000);
        let message = format!("unknown field `{key}`, expected one of `run_id`, `since`");
        let bounded = with_quotes_bounded(&message);
        assert!(bounded.len() < 200, "{bounded}");
        assert!(
            bounded.ends_with(", expected one of `run_id`, `since`"),
            "{bounded}"
        );
        let value = format!("invalid type: string \"{key}\", expected u32");
        let bounded = with_quotes_bounded(&value);
        assert!(
            bounded.contains("(10000 characters)\", expected u32"),
            "{bounded}"
        );
        assert_eq!(
            with_quotes_bounded("missing field `step`"),
            "missing field `step`"
        );
    }
}
