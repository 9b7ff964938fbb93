//! `long double` arithmetic for INCRBYFLOAT and HINCRBYFLOAT.
//!
//! Redis adds these increments in C `long double` and prints the sum with `"%.17Lf"` minus
//! trailing zeros (`ld2string` in `LD_STR_HUMAN` mode), so `0.1 + 0.2` is stored as `0.3`. Rust
//! has no long double, so the parsing, the addition and the formatting live in a small C shim
//! (`csrc/ldouble.c`, built by `build.rs`); this module is its safe wrapper.
//!
//! INCRBYFLOAT uses [`incr_by`]. HINCRBYFLOAT checks in a different order (the increment and
//! its finiteness first, then the field), so it composes [`LongDouble::parse`],
//! [`LongDouble::is_finite`], [`LongDouble::add`] and [`LongDouble::to_human`] itself.

use std::os::raw::{c_char, c_int};

/// Redis's MAX_LONG_DOUBLE_CHARS: the longest text parsed or produced (the C side agrees).
pub const MAX_CHARS: usize = 5 * 1024;

/// An opaque C `long double` (at most 16 bytes on every supported target).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct LongDouble {
    bytes: [u8; 16],
}

extern "C" {
    // Only the test checks that both sides agree on the buffer size.
    #[cfg(test)]
    fn atoll_ld_max_chars() -> usize;
    fn atoll_ld_parse(s: *const c_char, len: usize, out: *mut LongDouble) -> c_int;
    fn atoll_ld_from_i64(v: i64, out: *mut LongDouble);
    fn atoll_ld_add(a: *const LongDouble, b: *const LongDouble, out: *mut LongDouble);
    fn atoll_ld_is_finite(a: *const LongDouble) -> c_int;
    fn atoll_ld_format_human(a: *const LongDouble, buf: *mut c_char, len: usize) -> usize;
}

impl LongDouble {
    const ZERO: LongDouble = LongDouble { bytes: [0; 16] };

    /// Parses text as Redis's `string2ld`: the whole string must be a `strtold` number (hex
    /// floats and `inf` included), without leading space, not NaN, not overflowing, not
    /// underflowing to zero, and shorter than 5 KiB. None otherwise.
    pub fn parse(s: &[u8]) -> Option<LongDouble> {
        let mut out = LongDouble::ZERO;
        // SAFETY: `s` is valid for `s.len()` bytes (the C side copies at most that many and
        // rejects lengths beyond its buffer); `out` is a valid, aligned LongDouble.
        let ok = unsafe { atoll_ld_parse(s.as_ptr() as *const c_char, s.len(), &mut out) };
        (ok == 1).then_some(out)
    }

    pub fn from_i64(v: i64) -> LongDouble {
        let mut out = LongDouble::ZERO;
        // SAFETY: `out` is a valid, aligned LongDouble.
        unsafe { atoll_ld_from_i64(v, &mut out) };
        out
    }

    /// The sum, in long double precision (may be infinite).
    pub fn add(&self, other: &LongDouble) -> LongDouble {
        let mut out = LongDouble::ZERO;
        // SAFETY: all three pointers are valid, aligned LongDoubles written by the shim.
        unsafe { atoll_ld_add(self, other, &mut out) };
        out
    }

    /// False for NaN and ±infinity.
    pub fn is_finite(&self) -> bool {
        // SAFETY: `self` is a valid LongDouble written by the shim.
        unsafe { atoll_ld_is_finite(self) == 1 }
    }

    /// Formats as Redis's `ld2string(LD_STR_HUMAN)`: `%.17Lf` with trailing zeros (and a
    /// trailing point) removed, `-0` as `0`. This is what INCRBYFLOAT stores and replies.
    pub fn to_human(&self) -> Vec<u8> {
        let mut buf = [0u8; MAX_CHARS];
        // SAFETY: `buf` is writable for MAX_CHARS bytes, which is the length passed; the shim
        // writes at most that many bytes including the terminator.
        let n = unsafe { atoll_ld_format_human(self, buf.as_mut_ptr() as *mut c_char, buf.len()) };
        buf[..n].to_vec()
    }
}

/// Why an increment failed; each maps to a different Redis error text at the call site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncrError {
    /// The stored value is not a valid float.
    BadValue,
    /// The increment is not a valid float.
    BadIncrement,
    /// The sum is NaN or infinite.
    NotFinite,
}

/// Where the current value of an increment comes from: an integer-encoded value (converted
/// exactly) or text to be parsed as `string2ld` would.
pub enum LongDoubleSource<'a> {
    Int(i64),
    Text(&'a [u8]),
}

/// `value + incr` formatted as Redis stores it, checking in INCRBYFLOAT's order: the stored
/// value, then the increment, then the sum.
pub fn incr_by(value: &LongDoubleSource, incr: &[u8]) -> Result<Vec<u8>, IncrError> {
    let v = match value {
        LongDoubleSource::Int(i) => LongDouble::from_i64(*i),
        LongDoubleSource::Text(t) => LongDouble::parse(t).ok_or(IncrError::BadValue)?,
    };
    let inc = LongDouble::parse(incr).ok_or(IncrError::BadIncrement)?;
    let sum = v.add(&inc);
    if !sum.is_finite() {
        return Err(IncrError::NotFinite);
    }
    Ok(sum.to_human())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(a: &str, b: &str) -> String {
        String::from_utf8(incr_by(&LongDoubleSource::Text(a.as_bytes()), b.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn matches_redis_output() {
        assert_eq!(add("0.1", "0.2"), "0.3");
        assert_eq!(add("10.5", "0.1"), "10.6");
        assert_eq!(add("0", "1.23456789012345678901"), "1.23456789012345679");
        assert_eq!(add("0", "5.0"), "5");
        assert_eq!(add("0", "1e-20"), "0");
        assert_eq!(add("0", "-1e-20"), "0");
        assert_eq!(add("0", "0x10"), "16");
        assert_eq!(add("0", "+5"), "5");
        assert_eq!(add("0", "1e20"), "100000000000000000000");
        assert!(add("0", "1e308").starts_with(
            "99999999999999999996685879655845645660560099847415567207797047994921734868838061872100126921888539"
        ));
    }

    #[test]
    fn buffer_sizes_agree_with_c() {
        // SAFETY: plain function without arguments.
        assert_eq!(unsafe { atoll_ld_max_chars() }, MAX_CHARS);
    }

    #[test]
    fn rejects_what_string2ld_rejects() {
        for bad in ["", " 1", "1 ", "nan", "1e-5000", "abc", "1_0", "1.5e"] {
            assert!(LongDouble::parse(bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(LongDouble::parse(b"1\x002").is_none());
        // 5 KiB is the longest text accepted; 5119 ones overflow even a long double.
        assert!(LongDouble::parse(&vec![b'0'; 5120]).is_none());
        assert!(LongDouble::parse(&vec![b'0'; 5119]).is_some());
        assert!(LongDouble::parse(&vec![b'1'; 5119]).is_none());
        assert_eq!(incr_by(&LongDoubleSource::Int(1), b"inf"), Err(IncrError::NotFinite));
        assert_eq!(incr_by(&LongDoubleSource::Text(b"x"), b"inf"), Err(IncrError::BadValue));
        assert_eq!(incr_by(&LongDoubleSource::Int(1), b"x"), Err(IncrError::BadIncrement));
    }
}
