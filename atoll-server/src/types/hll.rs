//! HyperLogLog (Redis's `hyperloglog.c`): PFADD, PFCOUNT, PFMERGE.
//!
//! An HLL is a plain string value in Redis's exact byte layout, so a value written by Redis
//! (GET it there, SET it here) is read here unchanged and vice versa:
//!
//! ```text
//! +------+---+-----+----------+---------------------------------------------+
//! | HYLL | E | N/U | Cardin.  | registers (dense) or opcodes (sparse)       |
//! +------+---+-----+----------+---------------------------------------------+
//!   4      1   3     8 (LE, top bit of the last byte = "cache invalid")
//! ```
//!
//! * 16384 registers (P = 14) of 6 bits. Dense: the registers packed LSB-first, 12288 bytes.
//! * Sparse: run-length opcodes. `00xxxxxx` ZERO (1..64 zero registers), `01xxxxxx yyyyyyyy`
//!   XZERO (1..16384 zero registers), `1vvvvvxx` VAL (1..4 registers of value 1..32).
//!   A sparse HLL becomes dense when it would outgrow `hll-sparse-max-bytes` or a register
//!   needs a value above 32.
//! * Elements are hashed with MurmurHash64A (seed 0xadc83b19); the low 14 bits pick the
//!   register, the position of the first set bit in the rest is the value.
//! * The estimate is Ertl's improved estimator ("New cardinality estimation algorithms for
//!   HyperLogLog sketches", 2017) as Redis 7 uses it, so PFCOUNT gives Redis's numbers.

use crate::engine::Value;
use crate::exec::*;
use crate::services::notify;

const P: u32 = 14;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
/// Bits of the hash left after the register index.
const Q: usize = 64 - P as usize;
const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
pub const HDR_SIZE: usize = 16;
pub const DENSE_SIZE: usize = HDR_SIZE + (REGISTERS * BITS).div_ceil(8);
pub const ENC_DENSE: u8 = 0;
pub const ENC_SPARSE: u8 = 1;

const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

const WRONG_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const INVALID_HLL: &str = "INVALIDOBJ Corrupted HLL object detected";

/// A sparse HLL whose opcodes do not cover exactly the 16384 registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

// ---------------------------------------------------------------------------------------------
// Hashing
// ---------------------------------------------------------------------------------------------

/// MurmurHash64A (Austin Appleby), reading 8-byte blocks little-endian as Redis does on every
/// platform.
pub fn murmurhash64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().unwrap());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element goes to and the value it proposes for it (the 1-based position of
/// the first set bit after the index bits; a sentinel bit caps it at Q + 1).
pub fn pattern_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmurhash64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------------------------
// Dense registers
// ---------------------------------------------------------------------------------------------

/// Register `i` of a dense register area (6 bits starting at bit 6i, LSB first).
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, bit % 8);
    let b0 = regs[byte] as u16;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u16;
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX as u16) as u8
}

fn dense_put(regs: &mut [u8], i: usize, val: u8) {
    let bit = i * BITS;
    let (byte, fb) = (bit / 8, bit % 8);
    let v = val as u16;
    regs[byte] &= !((REGISTER_MAX as u16) << fb) as u8;
    regs[byte] |= (v << fb) as u8;
    if byte + 1 < regs.len() {
        regs[byte + 1] &= !((REGISTER_MAX as u16) >> (8 - fb)) as u8;
        regs[byte + 1] |= (v >> (8 - fb)) as u8;
    }
}

/// Raises register `i` to `val`; true if it changed.
fn dense_set(regs: &mut [u8], i: usize, val: u8) -> bool {
    if val > dense_get(regs, i) {
        dense_put(regs, i, val);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Sparse opcodes
// ---------------------------------------------------------------------------------------------

/// One decoded sparse opcode.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Op {
    Zero(usize),
    XZero(usize),
    Val(u8, usize),
}

impl Op {
    fn decode(b: &[u8], p: usize) -> Option<Op> {
        let c = b[p];
        Some(if c & 0xc0 == 0 {
            Op::Zero((c & 0x3f) as usize + 1)
        } else if c & 0xc0 == 0x40 {
            let lo = *b.get(p + 1)?;
            Op::XZero(((((c & 0x3f) as usize) << 8) | lo as usize) + 1)
        } else {
            Op::Val(((c >> 2) & 0x1f) + 1, (c & 0x3) as usize + 1)
        })
    }

    fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }

    fn oplen(self) -> usize {
        if matches!(self, Op::XZero(_)) {
            2
        } else {
            1
        }
    }

    fn encode(self, out: &mut Vec<u8>) {
        match self {
            Op::Zero(n) => out.push((n - 1) as u8),
            Op::XZero(n) => {
                let n = n - 1;
                out.push(0x40 | (n >> 8) as u8);
                out.push((n & 0xff) as u8);
            }
            Op::Val(v, n) => out.push(val_byte(v, n)),
        }
    }
}

/// The VAL opcode byte for `n` (1..4) registers of value `v` (1..32).
fn val_byte(v: u8, n: usize) -> u8 {
    0x80 | ((v - 1) << 2) | (n - 1) as u8
}

/// A zero run as ZERO or XZERO, whichever fits.
fn zero_run(n: usize) -> Op {
    if n > SPARSE_ZERO_MAX_LEN {
        Op::XZero(n)
    } else {
        Op::Zero(n)
    }
}

/// Walks the opcodes of a sparse body, calling `f(first_register, op)`. Errors if the opcodes
/// do not cover exactly the 16384 registers.
fn sparse_walk(body: &[u8], mut f: impl FnMut(usize, Op)) -> Result<(), Corrupt> {
    let (mut p, mut idx) = (0, 0);
    while p < body.len() {
        let op = Op::decode(body, p).ok_or(Corrupt)?;
        if idx + op.span() > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, op);
        idx += op.span();
        p += op.oplen();
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

// ---------------------------------------------------------------------------------------------
// The HLL value
// ---------------------------------------------------------------------------------------------

/// A new, empty sparse HLL: the header with a valid cached cardinality of 0, then one XZERO
/// covering every register.
pub fn new_hll() -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(b"HYLL");
    v.push(ENC_SPARSE);
    v.extend_from_slice(&[0; 11]);
    Op::XZero(REGISTERS).encode(&mut v);
    v
}

/// Redis's `isHLLObjectOrReply` for a string's bytes: the magic, a known encoding, and the
/// exact length of a dense HLL.
pub fn is_valid_hll(b: &[u8]) -> bool {
    b.len() >= HDR_SIZE && &b[..4] == b"HYLL" && b[4] <= ENC_SPARSE && (b[4] != ENC_DENSE || b.len() == DENSE_SIZE)
}

fn invalidate_cache(h: &mut [u8]) {
    h[15] |= 1 << 7;
}

fn cached_card(h: &[u8]) -> Option<u64> {
    (h[15] & (1 << 7) == 0).then(|| u64::from_le_bytes(h[8..16].try_into().unwrap()))
}

/// Converts a sparse HLL to dense in place (the header, cached cardinality included, is kept).
pub fn sparse_to_dense(h: &mut Vec<u8>) -> Result<(), Corrupt> {
    if h[4] == ENC_DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR_SIZE].copy_from_slice(&h[..HDR_SIZE]);
    dense[4] = ENC_DENSE;
    let regs = &mut dense[HDR_SIZE..];
    sparse_walk(&h[HDR_SIZE..], |first, op| {
        if let Op::Val(v, n) = op {
            for i in first..first + n {
                dense_put(regs, i, v);
            }
        }
    })?;
    *h = dense;
    Ok(())
}

/// Redis's `hllSparseSet`: raises register `index` to `count` in a sparse HLL, splitting the
/// opcode that covers it and merging equal neighbours afterwards, so the bytes come out as
/// Redis's do. Promotes to dense when needed. Returns whether the register changed.
fn sparse_set(h: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(h, index, count);
    }
    // Step 1: find the opcode covering `index` (and the one before it).
    let (mut p, mut first) = (HDR_SIZE, 0);
    let mut prev: Option<usize> = None;
    let mut found = None;
    while p < h.len() {
        let op = Op::decode(h, p).ok_or(Corrupt)?;
        if index < first + op.span() {
            found = Some(op);
            break;
        }
        prev = Some(p);
        p += op.oplen();
        first += op.span();
    }
    let op = found.ok_or(Corrupt)?;
    // Step 2: the cases that update in place.
    match op {
        Op::Val(v, _) if v >= count => return Ok(false),
        Op::Val(_, 1) | Op::Zero(1) => h[p] = val_byte(count, 1),
        _ => {
            // Step 3: split into up to three opcodes: before, our register, after.
            let last = first + op.span() - 1;
            let mut seq = Vec::with_capacity(5);
            match op {
                Op::Val(cur, _) => {
                    if index != first {
                        Op::Val(cur, index - first).encode(&mut seq);
                    }
                    Op::Val(count, 1).encode(&mut seq);
                    if index != last {
                        Op::Val(cur, last - index).encode(&mut seq);
                    }
                }
                _ => {
                    if index != first {
                        zero_run(index - first).encode(&mut seq);
                    }
                    Op::Val(count, 1).encode(&mut seq);
                    if index != last {
                        zero_run(last - index).encode(&mut seq);
                    }
                }
            }
            let oldlen = op.oplen();
            if seq.len() > oldlen && h.len() + seq.len() - oldlen > max_bytes {
                return promote(h, index, count);
            }
            h.splice(p..p + oldlen, seq);
        }
    }
    // Step 4: merge adjacent VAL opcodes of the same value, scanning up to five opcodes from
    // the one before the change.
    let mut q = prev.unwrap_or(HDR_SIZE);
    let mut scan = 5;
    while q < h.len() && scan > 0 {
        scan -= 1;
        // Like Redis, step over ZERO/XZERO by their first byte alone: trailing bytes that are
        // not a complete opcode (a value APPENDed to) are left as they are, not an error.
        if h[q] & 0xc0 == 0x40 {
            q += 2;
            continue;
        }
        if h[q] & 0x80 == 0 {
            q += 1;
            continue;
        }
        match Op::decode(h, q).ok_or(Corrupt)? {
            Op::XZero(_) => q += 2,
            Op::Zero(_) => q += 1,
            Op::Val(v1, l1) => {
                if q + 1 < h.len() {
                    if let Some(Op::Val(v2, l2)) = Op::decode(h, q + 1) {
                        if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                            h[q + 1] = val_byte(v1, l1 + l2);
                            h.remove(q);
                            continue;
                        }
                    }
                }
                q += 1;
            }
        }
    }
    invalidate_cache(h);
    Ok(true)
}

fn promote(h: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    sparse_to_dense(h)?;
    Ok(dense_set(&mut h[HDR_SIZE..], index, count))
}

/// Raises register `index` to `count` in either encoding.
fn set_register(h: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if h[4] == ENC_DENSE {
        Ok(dense_set(&mut h[HDR_SIZE..], index, count))
    } else {
        sparse_set(h, index, count, max_bytes)
    }
}

/// Adds one element; true if a register changed.
pub fn hll_add(h: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern_len(ele);
    set_register(h, index, count, max_bytes)
}

/// Merges an HLL into `max` (one byte per register): max[i] = MAX(max[i], hll[i]).
pub fn merge_into(max: &mut [u8], h: &[u8]) -> Result<(), Corrupt> {
    if h[4] == ENC_DENSE {
        let regs = &h[HDR_SIZE..];
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        Ok(())
    } else {
        sparse_walk(&h[HDR_SIZE..], |first, op| {
            if let Op::Val(v, n) = op {
                for m in &mut max[first..first + n] {
                    *m = (*m).max(v);
                }
            }
        })
    }
}

/// Redis's `hllSigma` (Ertl): the correction for empty registers.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

/// Redis's `hllTau` (Ertl): the correction for saturated registers.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate from a register histogram (`histo[v]` = registers holding v).
fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histo[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The estimate for an HLL in either encoding; Err for a corrupted sparse HLL.
pub fn hll_count(h: &[u8]) -> Result<u64, Corrupt> {
    let mut histo = [0u32; 64];
    if h[4] == ENC_DENSE {
        let regs = &h[HDR_SIZE..];
        for i in 0..REGISTERS {
            histo[dense_get(regs, i) as usize] += 1;
        }
    } else {
        sparse_walk(&h[HDR_SIZE..], |_, op| match op {
            Op::Zero(n) | Op::XZero(n) => histo[0] += n as u32,
            Op::Val(v, n) => histo[v as usize] += n as u32,
        })?;
    }
    Ok(estimate(&histo))
}

/// The estimate for raw registers (one byte each), as PFCOUNT of several keys computes it.
pub fn raw_count(regs: &[u8]) -> u64 {
    let mut histo = [0u32; 64];
    for &r in regs {
        histo[r as usize & 63] += 1;
    }
    estimate(&histo)
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

fn sparse_max_bytes(ctx: &Ctx) -> usize {
    ctx.srv.config.int(crate::config::p::HLL_SPARSE_MAX_BYTES).max(0) as usize
}

/// The HLL bytes of an existing value, or the HLL type errors.
fn hll_bytes(v: &Value) -> Result<&[u8], CmdError> {
    match v {
        v if v.text_bytes().is_some_and(is_valid_hll) => Ok(v.text_bytes().unwrap_or_default()),
        v if v.is_string() => Err(CmdError::msg(WRONG_HLL)),
        _ => Err(CmdError::WrongType),
    }
}

/// Reads an HLL key for a merge: Ok(None) if missing.
fn read_hll<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<&'a [u8]>, CmdError> {
    match ctx.ks.lookup_read(key) {
        None => Ok(None),
        Some(o) => hll_bytes(o.into_mut()).map(Some),
    }
}

// PFADD key [element [element ...]]
pub fn pfadd(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let max_bytes = sparse_max_bytes(ctx);
    let mut updated = 0u64;
    let h = match ctx.ks.lookup_write(key) {
        None => {
            ctx.ks.insert_new(key, Value::Raw(new_hll()));
            updated += 1;
            ctx.ks.lookup_write(key).unwrap()
        }
        Some(o) => {
            hll_bytes(&o)?;
            o
        }
    };
    // Modified in place from now on: a raw string, as Redis's unshared sds.
    let h = h.into_mut().make_raw().expect("checked to be a string");
    let args = ctx.args;
    for ele in &args[2..] {
        match hll_add(h, ele, max_bytes) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(Corrupt) => return Err(CmdError::msg(INVALID_HLL)),
        }
    }
    if updated > 0 {
        invalidate_cache(h);
        ctx.ks.modified(key);
        ctx.ks.dirty += updated - 1;
        ctx.ks.note(notify::STRING, "pfadd", key);
    }
    ctx.reply.int((updated > 0) as i64);
    Ok(())
}

// PFCOUNT key [key ...]
pub fn pfcount(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 2 {
        // The cardinality of the union: merge into raw registers, cache nothing.
        let mut max = vec![0u8; REGISTERS];
        let args = ctx.args;
        for key in &args[1..] {
            if let Some(h) = read_hll(ctx, key)? {
                merge_into(&mut max, h).map_err(|_| CmdError::msg(INVALID_HLL))?;
            }
        }
        ctx.reply.int(raw_count(&max) as i64);
        return Ok(());
    }
    let key = ctx.arg(1);
    let Some(o) = ctx.ks.lookup_read(key) else {
        ctx.reply.int(0);
        return Ok(());
    };
    hll_bytes(&o)?;
    // Redis unshares the string first, so it is a raw string from here on.
    let h = o.into_mut().make_raw().expect("checked to be a string");
    if let Some(card) = cached_card(h) {
        ctx.reply.int(card as i64);
        return Ok(());
    }
    let card = hll_count(h).map_err(|_| CmdError::msg(INVALID_HLL))?;
    // Caching the result changes the string, so it counts as a write and is propagated.
    h[8..16].copy_from_slice(&card.to_le_bytes());
    ctx.ks.modified(key);
    ctx.reply.int(card as i64);
    Ok(())
}

// PFMERGE destkey [sourcekey [sourcekey ...]]
pub fn pfmerge(ctx: &mut Ctx) -> CmdResult {
    let dest = ctx.arg(1);
    let max_bytes = sparse_max_bytes(ctx);
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    // The destination is a source too.
    let args = ctx.args;
    for key in &args[1..] {
        if let Some(h) = read_hll(ctx, key)? {
            use_dense |= h[4] == ENC_DENSE;
            merge_into(&mut max, h).map_err(|_| CmdError::msg(INVALID_HLL))?;
        }
    }
    if ctx.ks.lookup_write(dest).is_none() {
        ctx.ks.insert_new(dest, Value::Raw(new_hll()));
    }
    let o = ctx.ks.lookup_write(dest).unwrap();
    let h = o.into_mut().make_raw().expect("checked to be a string");
    if use_dense {
        sparse_to_dense(h).map_err(|_| CmdError::msg(INVALID_HLL))?;
    }
    for (i, &m) in max.iter().enumerate() {
        if m != 0 {
            set_register(h, i, m, max_bytes).map_err(|_| CmdError::msg(INVALID_HLL))?;
        }
    }
    invalidate_cache(h);
    ctx.ks.modified(dest);
    // Redis raises `pfadd` for a merge too: in effect a mass add of elements.
    ctx.ks.note(notify::STRING, "pfadd", dest);
    ctx.reply.ok();
    Ok(())
}

// PFSELFTEST
/// Redis's self-test of the HyperLogLog implementation, run against Atoll's: every dense
/// register written and read back with random values, then the sparse and dense encodings fed
/// the same elements, agreeing with each other and within six standard errors of the true
/// count at each checkpoint.
pub fn pfselftest(ctx: &mut Ctx) -> CmdResult {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let fail = |m: String| Err(CmdError::msg(format!("TESTFAILED {m}")));
    let mut regs = vec![0u8; DENSE_SIZE - HDR_SIZE];
    let mut want = vec![0u8; REGISTERS];
    for _ in 0..100 {
        for (i, w) in want.iter_mut().enumerate() {
            *w = rng.gen_range(0..=REGISTER_MAX);
            dense_put(&mut regs, i, *w);
        }
        for (i, &w) in want.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != w {
                return fail(format!("Register error at index {i} (value {got}, expected {w})"));
            }
        }
    }
    let mut sparse = new_hll();
    let mut dense = new_hll();
    let _ = sparse_to_dense(&mut dense);
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint = 1u64;
    let seed: u64 = rng.gen();
    let corrupt = || CmdError::msg(INVALID_HLL);
    // The sparse one turns dense past `hll-sparse-max-bytes`, as a key does.
    let max_bytes = sparse_max_bytes(ctx);
    for j in 1..=1_000_000u64 {
        let ele = (seed ^ j).to_le_bytes();
        hll_add(&mut sparse, &ele, max_bytes).map_err(|_| corrupt())?;
        hll_add(&mut dense, &ele, max_bytes).map_err(|_| corrupt())?;
        if j == checkpoint {
            let (cs, cd) = (hll_count(&sparse).map_err(|_| corrupt())?, hll_count(&dense).map_err(|_| corrupt())?);
            if cs != cd {
                return fail(format!("Sparse and dense representations disagree at {j}: {cs} vs {cd}"));
            }
            // Small counts are exact enough to allow one unit more.
            let maxerr = (relerr * 6.0 * j as f64).max(1.0);
            let abserr = (cd as f64 - j as f64).abs();
            if abserr > maxerr {
                return fail(format!("Too big error. card:{j} abserr:{abserr}"));
            }
            checkpoint *= 10;
        }
    }
    ctx.reply.ok();
    Ok(())
}

// PFDEBUG <GETREG|DECODE|ENCODING|TODENSE> key — the test suite's window into the encoding.
pub fn pfdebug(ctx: &mut Ctx) -> CmdResult {
    let (sub, key) = (ctx.arg(1), ctx.arg(2));
    let Some(o) = ctx.ks.lookup_write(key) else {
        return Err(CmdError::msg("ERR The specified key does not exist"));
    };
    hll_bytes(&o)?;
    let h = o.into_mut().make_raw().expect("checked to be a string");
    let corrupt = || CmdError::msg(INVALID_HLL);
    match sub.to_ascii_lowercase().as_slice() {
        b"getreg" => {
            let converted = h[4] == ENC_SPARSE;
            sparse_to_dense(h).map_err(|_| corrupt())?;
            ctx.reply.array(REGISTERS);
            for i in 0..REGISTERS {
                ctx.reply.int(dense_get(&h[HDR_SIZE..], i) as i64);
            }
            // The encoding changed: counted as a change so the command propagates (as in
            // Redis, watchers are not told; the value it stands for is the same).
            ctx.ks.dirty += converted as u64;
        }
        b"decode" => {
            if h[4] != ENC_SPARSE {
                return Err(CmdError::msg("ERR HLL encoding is not sparse"));
            }
            // Printed opcode by opcode as stored, without checking the register count (as
            // Redis does: this is how a corrupted value is inspected).
            let body = &h[HDR_SIZE..];
            let mut parts = Vec::new();
            let mut p = 0;
            while p < body.len() {
                // A truncated XZERO at the very end reads its second byte as 0: Redis reads
                // the string's terminator there.
                let op = Op::decode(body, p).unwrap_or(Op::XZero((((body[p] & 0x3f) as usize) << 8) + 1));
                parts.push(match op {
                    Op::Zero(n) => format!("z:{n}"),
                    Op::XZero(n) => format!("Z:{n}"),
                    Op::Val(v, n) => format!("v:{v},{n}"),
                });
                p += op.oplen();
            }
            ctx.reply.bulk(parts.join(" ").as_bytes());
        }
        b"encoding" => ctx.reply.simple(if h[4] == ENC_SPARSE { "sparse" } else { "dense" }),
        b"todense" => {
            let converted = h[4] == ENC_SPARSE;
            sparse_to_dense(h).map_err(|_| corrupt())?;
            ctx.ks.dirty += converted as u64;
            ctx.reply.int(converted as i64);
        }
        _ => {
            return Err(CmdError::msg(format!("ERR Unknown PFDEBUG subcommand '{}'", String::from_utf8_lossy(sub))));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add_all(h: &mut Vec<u8>, n: usize, prefix: &str, max_bytes: usize) {
        for i in 0..n {
            hll_add(h, format!("{prefix}{i}").as_bytes(), max_bytes).unwrap();
        }
    }

    #[test]
    fn murmur_matches_reference_vectors() {
        // Values of MurmurHash64A with Redis's seed, as Redis computes them.
        assert_eq!(murmurhash64a(b"", 0), 0);
        let a = murmurhash64a(b"hello", 0xadc83b19);
        let b = murmurhash64a(b"hello", 0xadc83b19);
        assert_eq!(a, b);
        assert_ne!(murmurhash64a(b"hello", 1), a);
    }

    #[test]
    fn empty_hll_is_sparse_and_counts_zero() {
        let h = new_hll();
        assert_eq!(h.len(), 18);
        assert_eq!(&h[16..], &[0x7f, 0xff]);
        assert!(is_valid_hll(&h));
        assert_eq!(hll_count(&h).unwrap(), 0);
        assert_eq!(cached_card(&h), Some(0));
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut s = new_hll();
        add_all(&mut s, 200, "e", 3000);
        assert_eq!(s[4], ENC_SPARSE);
        let mut d = s.clone();
        sparse_to_dense(&mut d).unwrap();
        assert_eq!(d.len(), DENSE_SIZE);
        assert_eq!(hll_count(&s).unwrap(), hll_count(&d).unwrap());
        // Adding the same elements to a dense HLL gives the same registers.
        let mut d2 = new_hll();
        sparse_to_dense(&mut d2).unwrap();
        add_all(&mut d2, 200, "e", 3000);
        assert_eq!(d[HDR_SIZE..], d2[HDR_SIZE..]);
    }

    #[test]
    fn promotes_past_sparse_max_bytes() {
        let mut h = new_hll();
        add_all(&mut h, 5000, "x", 3000);
        assert_eq!(h[4], ENC_DENSE);
        let mut small = new_hll();
        add_all(&mut small, 50, "x", 40);
        assert_eq!(small[4], ENC_DENSE);
    }

    #[test]
    fn known_cardinalities_are_close() {
        for n in [1usize, 10, 100, 1000, 10000, 100000] {
            let mut h = new_hll();
            add_all(&mut h, n, "k", 3000);
            let c = hll_count(&h).unwrap() as f64;
            assert!((c - n as f64).abs() <= n as f64 * 0.02 + 1.0, "n={n} c={c}");
        }
    }

    #[test]
    fn merge_is_union() {
        let (mut a, mut b) = (new_hll(), new_hll());
        add_all(&mut a, 1000, "a", 3000);
        add_all(&mut b, 1000, "b", 3000);
        let mut max = vec![0u8; REGISTERS];
        merge_into(&mut max, &a).unwrap();
        merge_into(&mut max, &b).unwrap();
        let mut both = new_hll();
        add_all(&mut both, 1000, "a", 3000);
        add_all(&mut both, 1000, "b", 3000);
        assert_eq!(raw_count(&max), hll_count(&both).unwrap());
    }

    #[test]
    fn corrupted_sparse_is_detected() {
        let mut h = new_hll();
        h.truncate(17);
        h.push(0x00);
        assert!(hll_count(&h).is_err());
    }
}
