//! Stop strings matched across token boundaries: text that could still become the start of a
//! stop string is held back until it cannot (then emitted) or does (then the text ends before
//! it, and the stop string is never emitted).

/// Text pieces in, text out, ending at the first stop string.
#[derive(Clone, Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    stopped: bool,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> StopMatcher {
        StopMatcher { stops: stops.into_iter().filter(|s| !s.is_empty()).collect(), held: String::new(), stopped: false }
    }

    /// Whether a stop string has been seen (nothing more is emitted).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Adds `piece`; returns the text that can be emitted now.
    pub fn push(&mut self, piece: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.held.push_str(piece);
        if self.stops.is_empty() {
            return std::mem::take(&mut self.held);
        }
        // The earliest stop string in the text (the longest among those starting there).
        let first = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min();
        if let Some(at) = first {
            self.stopped = true;
            let out = self.held[..at].to_string();
            self.held.clear();
            return out;
        }
        // Hold back the longest tail that is the start of a stop string.
        let keep = self.partial_tail();
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        out
    }

    /// The text still held at the end of generation (it did not turn into a stop string).
    pub fn finish(&mut self) -> String {
        if self.stopped {
            return String::new();
        }
        std::mem::take(&mut self.held)
    }

    /// Bytes at the end of `held` that a stop string starts with (0 when none).
    fn partial_tail(&self) -> usize {
        let h = self.held.as_str();
        let mut best = 0;
        for s in &self.stops {
            // The longest proper prefix of `s` that `h` ends with, at a character boundary.
            let most = (s.len() - 1).min(h.len());
            for n in (best + 1..=most).rev() {
                if h.is_char_boundary(h.len() - n) && s.is_char_boundary(n) && h.ends_with(&s[..n]) {
                    best = n;
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes the pieces; returns the emitted text (with the end flushed) and whether it stopped.
    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for p in pieces {
            out += &m.push(p);
            if m.stopped() {
                break;
            }
        }
        out += &m.finish();
        (out, m.stopped())
    }

    #[test]
    fn a_stop_string_split_over_tokens_is_never_emitted() {
        assert_eq!(run(&["\n\n"], &["Hello", "\n", "\nmore"]), ("Hello".into(), true));
        assert_eq!(run(&["END"], &["abc E", "N", "D tail"]), ("abc ".into(), true));
        assert_eq!(run(&["END"], &["abcEND"]), ("abc".into(), true));
        assert_eq!(run(&["END"], &["E", "N", "D"]), ("".into(), true));
    }

    #[test]
    fn a_partial_match_that_fails_is_emitted_in_order() {
        assert_eq!(run(&["END"], &["abc E", "N", "x"]), ("abc ENx".into(), false));
        assert_eq!(run(&["END"], &["E", "EN", "EE"]), ("EENEE".into(), false));
        // held at the end of generation: flushed
        assert_eq!(run(&["END"], &["abc EN"]), ("abc EN".into(), false));
        assert_eq!(run(&[], &["a", "b"]), ("ab".into(), false));
    }

    #[test]
    fn the_earliest_of_several_stops_wins() {
        assert_eq!(run(&["world", "o w"], &["hello world"]), ("hell".into(), true));
        assert_eq!(run(&["b", "abc"], &["xa", "bc"]), ("x".into(), true));
    }

    #[test]
    fn what_is_emitted_at_each_step_holds_back_only_a_possible_start() {
        let mut m = StopMatcher::new(vec!["<|end|>".into()]);
        assert_eq!(m.push("text <"), "text ");
        assert_eq!(m.push("|e"), "");
        assert_eq!(m.push("x"), "<|ex");
        assert_eq!(m.push(" <|end"), " ");
        assert_eq!(m.push("|> gone"), "");
        assert!(m.stopped());
        assert_eq!(m.push("more"), "");
        assert_eq!(m.finish(), "");
    }

    #[test]
    fn multibyte_text_is_cut_at_character_boundaries() {
        assert_eq!(run(&["é!"], &["café", "!"]), ("caf".into(), true));
        assert_eq!(run(&["🦙x"], &["a🦙", "y"]), ("a🦙y".into(), false));
        let mut m = StopMatcher::new(vec!["€€".into()]);
        assert_eq!(m.push("a€"), "a");
        assert_eq!(m.push("b"), "€b");
    }
}
