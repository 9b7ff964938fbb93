//! Glob-style pattern matching with Redis's `stringmatchlen` rules (`*`, `?`, `[...]` with `^`
//! and ranges, `\` escapes, optional case folding).
//!
//! Iterative with single-star backtracking, so time is O(pattern × string) and the stack is
//! constant whatever the pattern (Redis once had a stack-overflow CVE in its recursive matcher).
//! Redis 7.2 bounds that recursion instead: a match that needs more than 1000 nested `*` fails.
//! Clients can see that (a KEYS pattern of many thousand stars finds nothing), so it is kept.

/// Redis's recursion bound: the star group at which its matcher gives up.
const MAX_NESTING: usize = 1000;

pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    let (mut p, mut s) = (0usize, 0usize);
    // Where to resume after the most recent '*': pattern index after it, string index.
    let mut star: Option<(usize, usize)> = None;
    // Star groups reached so far, and where the last one counted ends.
    let (mut groups, mut counted_to) = (0usize, 0usize);
    loop {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    if p > counted_to {
                        groups += 1;
                        counted_to = p;
                        if groups > MAX_NESTING {
                            return false;
                        }
                    }
                    star = Some((p, s));
                    continue;
                }
                b'?' if s < string.len() => {
                    p += 1;
                    s += 1;
                    continue;
                }
                b'[' if s < string.len() => {
                    if let Some((matched, next_p)) = match_class(pattern, p, string[s], nocase) {
                        if matched {
                            p = next_p;
                            s += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() && s < string.len() && eq(pattern[p + 1], string[s]) => {
                    p += 2;
                    s += 1;
                    continue;
                }
                c if s < string.len() && c != b'?' && c != b'[' && eq(c, string[s]) => {
                    p += 1;
                    s += 1;
                    continue;
                }
                _ => {}
            }
        } else if s == string.len() {
            return true;
        }
        // Mismatch: let the last '*' swallow one more byte, or fail.
        match star {
            Some((sp, ss)) if ss < string.len() => {
                star = Some((sp, ss + 1));
                p = sp;
                s = ss + 1;
            }
            _ => return false,
        }
    }
}

/// Matches `c` against the class starting at `pattern[p] == '['`. Returns (matched, index after
/// the class). An unterminated class extends to the end of the pattern, as in Redis.
fn match_class(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let mut i = p + 1;
    let not = i < pattern.len() && pattern[i] == b'^';
    if not {
        i += 1;
    }
    let mut matched = false;
    let fold = |x: u8| if nocase { x.to_ascii_lowercase() } else { x };
    loop {
        if i >= pattern.len() {
            // Redis treats a missing ']' as the end of the class.
            break;
        }
        if pattern[i] == b'\\' && i + 1 < pattern.len() {
            i += 1;
            if pattern[i] == c {
                matched = true;
            }
        } else if pattern[i] == b']' {
            break;
        } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' {
            let (mut start, mut end) = (pattern[i], pattern[i + 2]);
            if start > end {
                std::mem::swap(&mut start, &mut end);
            }
            let (start, end, cc) = (fold(start), fold(end), fold(c));
            if cc >= start && cc <= end {
                matched = true;
            }
            i += 2;
        } else if fold(pattern[i]) == fold(c) {
            matched = true;
        }
        i += 1;
    }
    let matched = if not { !matched } else { matched };
    // The index after ']' (or the end of the pattern if unterminated).
    let next = if i < pattern.len() { i + 1 } else { i };
    Some((matched, next))
}

#[cfg(test)]
mod tests {
    use super::glob_match as m;

    #[test]
    fn basics() {
        assert!(m(b"*", b"anything", false));
        assert!(m(b"h?llo", b"hello", false));
        assert!(m(b"h*llo", b"heeeello", false));
        assert!(m(b"h[ae]llo", b"hallo", false));
        assert!(!m(b"h[^e]llo", b"hello", false));
        assert!(m(b"h[a-b]llo", b"hbllo", false));
        assert!(m(b"h\\*llo", b"h*llo", false));
        assert!(!m(b"h\\*llo", b"hello", false));
        assert!(m(b"HELLO", b"hello", true));
        assert!(!m(b"a*b", b"acbd", false));
        assert!(m(b"a*b*c", b"axxbyyc", false));
        assert!(!m(b"", b"a", false));
        assert!(m(b"", b"", false));
    }

    #[test]
    fn pathological_pattern_is_fast() {
        let pat = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b".to_vec();
        let s = vec![b'a'; 5000];
        let t = std::time::Instant::now();
        assert!(!m(&pat, &s, false));
        assert!(t.elapsed().as_secs() < 2);
    }
}
