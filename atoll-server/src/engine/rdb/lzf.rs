//! LZF compression for RDB strings (`rdbcompression`), producing the format Redis's liblzf
//! reads. Decompression uses the `lzf` crate; compression is written here because that
//! crate allocates and zeroes a 512 KB hash table on every call, which made saving 300,000
//! 64-byte values take minutes. This compressor keeps one 64 KB table per thread and never
//! clears it: a stale entry is harmless because every candidate match is verified byte for
//! byte before use (as liblzf itself does with `INIT_HTAB 0`).

use std::cell::RefCell;

const HLOG: u32 = 14;
const MAX_LIT: usize = 32;
/// Farthest back a reference reaches (13 bits).
const MAX_OFF: usize = 1 << 13;
/// Longest match one reference encodes: 2 + 7 + 255.
const MAX_REF: usize = 264;

thread_local! {
    static HTAB: RefCell<Vec<u32>> = RefCell::new(vec![0; 1 << HLOG]);
}

#[inline]
fn hash(p: &[u8]) -> usize {
    let v = (p[0] as u32) << 16 | (p[1] as u32) << 8 | p[2] as u32;
    (v.wrapping_mul(2654435761) >> (32 - HLOG)) as usize
}

/// Appends a literal byte to the current run, closing the run at its 32-byte maximum.
#[inline]
fn literal(out: &mut Vec<u8>, run_at: &mut usize, lit: &mut usize, b: u8) {
    out.push(b);
    *lit += 1;
    if *lit == MAX_LIT {
        out[*run_at] = (MAX_LIT - 1) as u8;
        *run_at = out.len();
        out.push(0);
        *lit = 0;
    }
}

/// Compresses `input`; None if the result would exceed `max_out` bytes (not worth it).
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let n = input.len();
    if n < 4 || n > u32::MAX as usize {
        return None;
    }
    HTAB.with(|t| {
        let htab = &mut *t.borrow_mut();
        let mut out = Vec::with_capacity(max_out.min(n) + 1);
        // Each literal run starts with a control byte (run length - 1), filled in when the
        // run ends; an empty run's placeholder is dropped.
        let mut run_at = 0;
        out.push(0);
        let mut lit = 0;
        let mut ip = 0;
        while ip + 2 < n {
            let h = hash(&input[ip..]);
            let r = htab[h] as usize;
            htab[h] = ip as u32;
            if r < ip && ip - r - 1 < MAX_OFF && input[r..r + 3] == input[ip..ip + 3] {
                let max = (n - ip).min(MAX_REF);
                let mut len = 3;
                while len < max && input[r + len] == input[ip + len] {
                    len += 1;
                }
                if lit == 0 {
                    out.pop();
                } else {
                    out[run_at] = (lit - 1) as u8;
                }
                let (off, l) = (ip - r - 1, len - 2);
                if l < 7 {
                    out.push(((l << 5) | (off >> 8)) as u8);
                } else {
                    out.push(((7 << 5) | (off >> 8)) as u8);
                    out.push((l - 7) as u8);
                }
                out.push(off as u8);
                run_at = out.len();
                out.push(0);
                lit = 0;
                // Remember the positions just past the match start too, so runs compress.
                for p in ip + 1..(ip + len).min(n.saturating_sub(2)) {
                    htab[hash(&input[p..])] = p as u32;
                }
                ip += len;
            } else {
                literal(&mut out, &mut run_at, &mut lit, input[ip]);
                ip += 1;
            }
            if out.len() > max_out + 1 {
                return None;
            }
        }
        for &b in &input[ip..] {
            literal(&mut out, &mut run_at, &mut lit, b);
        }
        if lit == 0 {
            out.pop();
        } else {
            out[run_at] = (lit - 1) as u8;
        }
        (out.len() <= max_out).then_some(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_reference_decoder() {
        let mut rng = 12345u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut inputs: Vec<Vec<u8>> = vec![
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_vec(),
            b"abcabcabcabcabcabcabcabcabcabcabcabcabcabc".repeat(20),
            vec![b'x'; 5000],
            (0..3000u32).flat_map(|i| (i % 251).to_le_bytes()).collect(),
        ];
        for _ in 0..200 {
            let len = (next() % 2000) as usize + 4;
            let alphabet = (next() % 20 + 1) as u8;
            inputs.push((0..len).map(|_| b'a' + (next() % alphabet as u64) as u8).collect());
        }
        for i in &inputs {
            if let Some(c) = compress(i, i.len() + 64) {
                assert_eq!(::lzf::decompress(&c, i.len()).unwrap(), *i);
            }
        }
        assert!(compress(&vec![b'x'; 5000], 100).unwrap().len() < 100);
        // Incompressible data does not fit in less than its size.
        let noise: Vec<u8> = (0..1000).map(|_| next() as u8).collect();
        assert!(compress(&noise, noise.len() - 4).is_none());
    }
}
