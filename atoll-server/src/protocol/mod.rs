//! The wire protocol: request parsing and reply encoding. Knows nothing of storage.
pub mod parser;
pub mod reply;
pub mod value;

pub use parser::{parse_i64, Limits, Parsed, Parser};
pub use reply::{fmt_double, Proto, Reply};

/// Appends `s` quoted and escaped as Redis's `sdscatrepr` does (MONITOR lines, manifest file
/// names): printable ASCII as is, `\\ \" \n \r \t \a \b` escaped, other bytes as `\xHH`.
pub fn cat_repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[b'\\', b'x', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
            }
        }
    }
    out.push(b'"');
}
