//! Bitmap commands (Redis's `bitops.c`): strings addressed as arrays of bits.
//!
//! Bit 0 is the most significant bit of byte 0. A missing key reads as an infinite run of
//! zero bits. Writes grow the string with zero bytes, never beyond proto-max-bulk-len (the
//! offset is checked before anything is allocated), and leave it `raw`-encoded.

use super::string::{max_bulk_len, reserve_sds};
use crate::engine::Value;
use crate::exec::*;
use crate::services::notify;

// ---------------------------------------------------------------------------------------------
// Argument parsing
// ---------------------------------------------------------------------------------------------

const BIT_OFFSET_ERR: &str = "ERR bit offset is not an integer or out of range";

/// Redis's `getBitOffsetFromArgument`. With `hash` (BITFIELD), `#N` means N times the field
/// width. The offset's byte must lie below proto-max-bulk-len.
fn bit_offset(arg: &[u8], max_bulk: i64, hash: bool, bits: u32) -> Result<u64, CmdError> {
    let use_hash = hash && bits > 0 && arg.first() == Some(&b'#');
    let digits = if use_hash { &arg[1..] } else { arg };
    let mut off = crate::protocol::parse_i64(digits).ok_or(CmdError::msg(BIT_OFFSET_ERR))?;
    if use_hash {
        // C multiplies with wrap-around; a wrapped negative offset is rejected below.
        off = off.wrapping_mul(bits as i64);
    }
    if off < 0 || (off >> 3) >= max_bulk {
        return Err(CmdError::msg(BIT_OFFSET_ERR));
    }
    Ok(off as u64)
}

/// Reads the bit at `offset` (0 beyond the end of the string).
fn bit_at(s: &[u8], offset: u64) -> u8 {
    match s.get((offset >> 3) as usize) {
        Some(&byte) => (byte >> (7 - (offset & 7))) & 1,
        None => 0,
    }
}

/// Looks a key up for a bit write (Redis's `lookupStringForBitCommand`): creates it or grows
/// it with zero bytes so that bit `max_bit` exists. Returns the bytes, and whether the key was
/// created or grown. The caller has already bounded `max_bit` by proto-max-bulk-len.
fn string_for_bit_write<'v>(ks: &'v mut KsView, key: &[u8], max_bit: u64) -> Result<(&'v mut Vec<u8>, bool), CmdError> {
    let need = (max_bit >> 3) as usize + 1;
    let created = match ks.lookup_write(key) {
        Some(o) if !o.is_string() => return Err(CmdError::WrongType),
        Some(_) => false,
        None => {
            // Added without counting a change: the caller counts one only if a bit changed.
            ks.insert_new(key, Value::Raw(vec![0u8; need]));
            true
        }
    };
    let o = ks.lookup_write(key).expect("key just looked up or created");
    let v = o.into_mut().make_raw().expect("string value");
    let mut grown = false;
    if v.len() < need {
        reserve_sds(v, need - v.len());
        v.resize(need, 0);
        grown = true;
    }
    Ok((v, created || grown))
}

// ---------------------------------------------------------------------------------------------
// SETBIT / GETBIT
// ---------------------------------------------------------------------------------------------

// SETBIT key offset value
pub fn setbit(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let offset = bit_offset(ctx.arg(2), max_bulk_len(ctx), false, 0)?;
    let bit_err = || CmdError::msg("ERR bit is not an integer or out of range");
    let on = ctx.arg_i64(3).map_err(|_| bit_err())?;
    if on & !1 != 0 {
        return Err(bit_err());
    }
    let (v, dirty) = string_for_bit_write(&mut ctx.ks, key, offset)?;
    let byte = (offset >> 3) as usize;
    let shift = 7 - (offset & 7);
    let old = (v[byte] >> shift) & 1;
    // Setting a bit to the value it already has changes nothing: not dirty, not propagated,
    // WATCH not touched (unless the string was created or grown).
    let changed = dirty || old as i64 != on;
    if changed {
        v[byte] = (v[byte] & !(1 << shift)) | ((on as u8) << shift);
        ctx.ks.modified(key);
        ctx.ks.note(notify::STRING, "setbit", key);
    }
    ctx.reply.int(old as i64);
    Ok(())
}

// GETBIT key offset
pub fn getbit(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let offset = bit_offset(ctx.arg(2), max_bulk_len(ctx), false, 0)?;
    let mut ibuf = itoa::Buffer::new();
    let bit = match ctx.ks.get_string(key)? {
        Some(v) => bit_at(v.as_bytes(&mut ibuf).unwrap_or(b""), offset),
        None => 0,
    };
    ctx.reply.int(bit as i64);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// BITCOUNT / BITPOS
// ---------------------------------------------------------------------------------------------

/// A range of BITCOUNT/BITPOS resolved to bytes `start..=end` of the string, with masks of
/// the bits of the first and last byte that lie outside a BIT-unit range.
#[derive(Debug, PartialEq, Eq)]
struct BitRange {
    start: i64,
    end: i64,
    /// Bits of byte `start` before the range (set bits of the mask are excluded).
    first_mask: u8,
    /// Bits of byte `end` after the range.
    last_mask: u8,
}

/// Redis's index rules for BITCOUNT/BITPOS ranges: negative indexes count from the end,
/// out-of-range ones are clamped; in BIT units the range is then converted to bytes plus
/// edge masks. `start > end` in the result means an empty range.
fn resolve_range(start: i64, end: i64, strlen: usize, is_bit: bool) -> BitRange {
    let mut total = strlen as i64;
    if is_bit {
        total <<= 3;
    }
    let (mut start, mut end) = (start, end);
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    let (mut first_mask, mut last_mask) = (0u8, 0u8);
    if is_bit && start <= end {
        first_mask = !((1u16 << (8 - (start & 7))) - 1) as u8;
        last_mask = ((1u16 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    BitRange { start, end, first_mask, last_mask }
}

/// Parses a BYTE | BIT unit argument.
fn parse_unit(arg: &[u8]) -> Result<bool, CmdError> {
    if eq_ic(arg, "BIT") {
        Ok(true)
    } else if eq_ic(arg, "BYTE") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Number of set bits in a resolved range.
fn count_bits(s: &[u8], r: &BitRange) -> i64 {
    if r.start > r.end {
        return 0;
    }
    let bytes = &s[r.start as usize..=r.end as usize];
    let mut count: i64 = bytes.iter().map(|b| b.count_ones() as i64).sum();
    // Subtract the bits of the edge bytes that fall outside a BIT range.
    count -= (bytes[0] & r.first_mask).count_ones() as i64;
    count -= (bytes[bytes.len() - 1] & r.last_mask).count_ones() as i64;
    count
}

// BITCOUNT key [start end [BYTE | BIT]]
pub fn bitcount(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let key = args[1];
    let mut ibuf = itoa::Buffer::new();
    // Redis 7.2 looks the key up first: a missing key answers 0 whatever the other arguments.
    let v = match ctx.ks.get_string(key)? {
        None => {
            ctx.reply.int(0);
            return Ok(());
        }
        Some(v) => v,
    };
    let s = v.as_bytes(&mut ibuf).unwrap_or(b"");
    let range = match args.len() {
        2 => BitRange { start: 0, end: s.len() as i64 - 1, first_mask: 0, last_mask: 0 },
        4 | 5 => {
            let start = parse_int(args[2])?;
            let end = parse_int(args[3])?;
            let is_bit = if args.len() == 5 { parse_unit(args[4])? } else { false };
            if start < 0 && end < 0 && start > end {
                ctx.reply.int(0);
                return Ok(());
            }
            resolve_range(start, end, s.len(), is_bit)
        }
        _ => return Err(CmdError::Syntax),
    };
    let n = count_bits(s, &range);
    ctx.reply.int(n);
    Ok(())
}

/// First bit equal to `bit` in the resolved range, as an absolute bit position. When none is
/// found: -1 when looking for 1; when looking for 0, the first bit after the range if the
/// caller gave no explicit end (the string is considered padded with zeros), else -1.
fn find_bit(s: &[u8], r: &BitRange, bit: u8, end_given: bool) -> i64 {
    if r.start > r.end {
        return -1;
    }
    let (start, end) = (r.start as usize, r.end as usize);
    for (i, &byte) in s[start..=end].iter().enumerate() {
        let pos = start + i;
        // Force the out-of-range edge bits to the value we are not looking for.
        let mut b = byte;
        let mut outside = 0u8;
        if pos == start {
            outside |= r.first_mask;
        }
        if pos == end {
            outside |= r.last_mask;
        }
        if bit == 1 {
            b &= !outside;
        } else {
            b |= outside;
        }
        let candidate = if bit == 1 { b } else { !b };
        if candidate != 0 {
            return (pos as i64) * 8 + candidate.leading_zeros() as i64;
        }
    }
    if bit == 0 && !end_given {
        (end as i64 + 1) * 8
    } else {
        -1
    }
}

// BITPOS key bit [start [end [BYTE | BIT]]]
pub fn bitpos(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let key = args[1];
    let bit = parse_int(args[2])?;
    if bit != 0 && bit != 1 {
        return Err(CmdError::msg("ERR The bit argument must be 1 or 0."));
    }
    let mut ibuf = itoa::Buffer::new();
    // A missing key is an infinite run of zeros: 0 is found at once, 1 never. Redis 7.2
    // answers that before looking at the range arguments.
    let v = match ctx.ks.get_string(key)? {
        None => {
            ctx.reply.int(if bit == 1 { -1 } else { 0 });
            return Ok(());
        }
        Some(v) => v,
    };
    let s = v.as_bytes(&mut ibuf).unwrap_or(b"");
    let (range, end_given) = match args.len() {
        3 => (BitRange { start: 0, end: s.len() as i64 - 1, first_mask: 0, last_mask: 0 }, false),
        4..=6 => {
            let start = parse_int(args[3])?;
            let is_bit = if args.len() == 6 { parse_unit(args[5])? } else { false };
            let end = if args.len() >= 5 { parse_int(args[4])? } else { s.len() as i64 - 1 };
            (resolve_range(start, end, s.len(), is_bit), args.len() >= 5)
        }
        _ => return Err(CmdError::Syntax),
    };
    let pos = find_bit(s, &range, bit as u8, end_given);
    ctx.reply.int(pos);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// BITOP
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
    // Redis 8.2's, on the first source X and the others Y1…Yn: DIFF = X ∧ ¬(Y1 ∨ … ∨ Yn),
    // DIFF1 = ¬X ∧ (Y1 ∨ … ∨ Yn), ANDOR = X ∧ (Y1 ∨ … ∨ Yn); ONE: the bits set in exactly one
    // source.
    Diff,
    Diff1,
    AndOr,
    One,
}

impl BitOp {
    fn name(self) -> &'static str {
        match self {
            BitOp::And => "AND",
            BitOp::Or => "OR",
            BitOp::Xor => "XOR",
            BitOp::Not => "NOT",
            BitOp::Diff => "DIFF",
            BitOp::Diff1 => "DIFF1",
            BitOp::AndOr => "ANDOR",
            BitOp::One => "ONE",
        }
    }

    /// The operations that set the first source against the disjunction of the others.
    fn against_the_rest(self) -> bool {
        matches!(self, BitOp::Diff | BitOp::Diff1 | BitOp::AndOr)
    }
}

/// A BITOP under way: `res` is the result so far (for DIFF, DIFF1 and ANDOR: the first
/// source), `aux` the disjunction of the other sources (DIFF, DIFF1, ANDOR) or the bits seen
/// in two sources or more (ONE). Sources shorter than the result count as zero-padded.
#[derive(Default)]
struct Fold {
    res: Vec<u8>,
    aux: Vec<u8>,
}

impl Fold {
    fn add(&mut self, src: &[u8], op: BitOp, first: bool) {
        let res = &mut self.res;
        if first {
            res.extend_from_slice(src);
            if op == BitOp::Not {
                res.iter_mut().for_each(|b| *b = !*b);
            }
            return;
        }
        if op.against_the_rest() {
            if src.len() > self.aux.len() {
                self.aux.resize(src.len(), 0);
            }
            self.aux.iter_mut().zip(src).for_each(|(d, s)| *d |= s);
            return;
        }
        if src.len() > res.len() {
            res.resize(src.len(), 0);
        }
        match op {
            BitOp::And => {
                for (i, r) in res.iter_mut().enumerate() {
                    *r &= src.get(i).copied().unwrap_or(0);
                }
            }
            BitOp::Or => res.iter_mut().zip(src).for_each(|(r, s)| *r |= s),
            BitOp::Xor => res.iter_mut().zip(src).for_each(|(r, s)| *r ^= s),
            BitOp::One => {
                // A bit already set (in the running XOR) and set again is seen twice: it stays
                // out whatever comes after (the XOR alone would let a third source back in).
                self.aux.resize(res.len(), 0);
                for ((r, c), s) in res.iter_mut().zip(self.aux.iter_mut()).zip(src) {
                    *c |= *r & s;
                    *r ^= s;
                }
            }
            BitOp::Not | BitOp::Diff | BitOp::Diff1 | BitOp::AndOr => unreachable!("handled above"),
        }
    }

    fn finish(self, op: BitOp) -> Vec<u8> {
        let Fold { res, aux } = self;
        let byte = |v: &[u8], i: usize| v.get(i).copied().unwrap_or(0);
        match op {
            BitOp::Diff | BitOp::Diff1 | BitOp::AndOr => (0..res.len().max(aux.len()))
                .map(|i| {
                    let (x, d) = (byte(&res, i), byte(&aux, i));
                    match op {
                        BitOp::Diff => x & !d,
                        BitOp::Diff1 => !x & d,
                        _ => x & d,
                    }
                })
                .collect(),
            BitOp::One => res.iter().enumerate().map(|(i, r)| r & !byte(&aux, i)).collect(),
            _ => res,
        }
    }
}

// BITOP <AND | OR | XOR | NOT | DIFF | DIFF1 | ANDOR | ONE> destkey key [key ...]
// (DIFF, DIFF1, ANDOR and ONE are Redis 8.2's.)
pub fn bitop(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let op = [BitOp::And, BitOp::Or, BitOp::Xor, BitOp::Not, BitOp::Diff, BitOp::Diff1, BitOp::AndOr, BitOp::One]
        .into_iter()
        .find(|o| eq_ic(args[1], o.name()))
        .ok_or(CmdError::Syntax)?;
    if op == BitOp::Not && args.len() != 4 {
        return Err(CmdError::msg("ERR BITOP NOT must be called with a single source key."));
    }
    if op.against_the_rest() && args.len() < 5 {
        return Err(CmdError::msg(format!("ERR BITOP {} must be called with at least two source keys.", op.name())));
    }
    let dest = args[2];
    let mut fold = Fold::default();
    let mut ibuf = itoa::Buffer::new();
    for (j, &key) in args[3..].iter().enumerate() {
        // Missing keys are empty strings; a key of another type aborts before any write.
        let v = ctx.ks.get_string(key)?;
        let src = match &v {
            Some(v) => v.as_bytes(&mut ibuf).unwrap_or(b""),
            None => b"",
        };
        fold.add(src, op, j == 0);
    }
    let res = fold.finish(op);
    let len = res.len();
    if len > 0 {
        ctx.ks.set(dest, Value::Raw(res), false);
        ctx.ks.note(notify::STRING, "set", dest);
    } else if ctx.ks.delete_unlooked(dest).is_some() {
        // An empty result deletes the destination (a change only if it existed), with no
        // lookup first: one past its time is deleted too, raising `del`.
        ctx.ks.note(notify::GENERIC, "del", dest);
    }
    ctx.reply.int(len as i64);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// BITFIELD
// ---------------------------------------------------------------------------------------------

/// What BITFIELD does on overflow (OVERFLOW WRAP | SAT | FAIL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set,
    IncrBy,
}

#[derive(Debug, Clone, Copy)]
struct FieldCmd {
    op: FieldOp,
    offset: u64,
    value: i64,
    bits: u32,
    signed: bool,
    overflow: Overflow,
}

/// Reads a `bits`-wide unsigned field at bit `offset`, most significant bit first. Bytes past
/// the end of `s` read as zero.
pub fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for i in 0..bits as u64 {
        v = (v << 1) | bit_at(s, offset + i) as u64;
    }
    v
}

/// Reads a `bits`-wide two's-complement field.
pub fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let mut v = get_unsigned(s, offset, bits);
    if bits < 64 && v & (1u64 << (bits - 1)) != 0 {
        v |= u64::MAX << bits;
    }
    v as i64
}

/// Writes the low `bits` bits of `value` at bit `offset` (the string is long enough).
pub fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let bitval = (value >> (bits as u64 - 1 - i)) & 1;
        let pos = offset + i;
        let byte = (pos >> 3) as usize;
        let shift = 7 - (pos & 7);
        s[byte] = (s[byte] & !(1 << shift)) | ((bitval as u8) << shift);
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: whether `value + incr` leaves the range of a
/// `bits`-wide unsigned field, and the value WRAP or SAT would store instead (None for FAIL).
/// `value` may itself be out of range (SET of a value too large for the field).
pub fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<u64>> {
    let max: u64 = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = (value as i64).wrapping_neg();
    let wrap = || {
        let mask = if bits >= 64 { 0 } else { u64::MAX << bits };
        value.wrapping_add(incr as u64) & !mask
    };
    if value > max || (incr > 0 && incr > max_incr) {
        Some(match ow {
            Overflow::Wrap => Some(wrap()),
            Overflow::Sat => Some(max),
            Overflow::Fail => None,
        })
    } else if incr < 0 && incr < min_incr {
        Some(match ow {
            Overflow::Wrap => Some(wrap()),
            Overflow::Sat => Some(0),
            Overflow::Fail => None,
        })
    } else {
        None
    }
}

/// Redis's `checkSignedBitfieldOverflow`, the signed counterpart of [`unsigned_overflow`].
pub fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<i64>> {
    let max: i64 = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    // These may wrap when `value` is out of range, but are only used once it is known not to
    // be (the C code computes them the same way).
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Some(match ow {
            Overflow::Wrap => Some(wrap()),
            Overflow::Sat => Some(max),
            Overflow::Fail => None,
        })
    } else if value < min || (bits != 64 && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr) {
        Some(match ow {
            Overflow::Wrap => Some(wrap()),
            Overflow::Sat => Some(min),
            Overflow::Fail => None,
        })
    } else {
        None
    }
}

/// Parses a field type: `i1`..`i64` or `u1`..`u63`.
fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let err = || {
        CmdError::msg(
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let signed = match arg.first() {
        Some(b'i') | Some(b'I') => true,
        Some(b'u') | Some(b'U') => false,
        _ => return Err(err()),
    };
    let bits = crate::protocol::parse_i64(&arg[1..]).ok_or_else(err)?;
    if bits < 1 || (signed && bits > 64) || (!signed && bits > 63) {
        return Err(err());
    }
    Ok((signed, bits as u32))
}

/// Applies one SET or INCRBY to `s`. Returns the reply value (None when OVERFLOW FAIL
/// refused it) and whether the stored bits changed.
fn field_write(s: &mut [u8], c: &FieldCmd) -> (Option<i64>, bool) {
    if c.signed {
        let old = get_signed(s, c.offset, c.bits);
        let (new, ov, reply_new) = match c.op {
            FieldOp::IncrBy => {
                let ov = signed_overflow(old, c.value, c.bits, c.overflow);
                let new = match ov {
                    Some(Some(w)) => w,
                    _ => old.wrapping_add(c.value),
                };
                (new, ov, true)
            }
            _ => {
                let ov = signed_overflow(c.value, 0, c.bits, c.overflow);
                (ov.flatten().unwrap_or(c.value), ov, false)
            }
        };
        if matches!(ov, Some(None)) {
            return (None, false);
        }
        set_field(s, c.offset, c.bits, new as u64);
        (Some(if reply_new { new } else { old }), old != new)
    } else {
        let old = get_unsigned(s, c.offset, c.bits);
        let (new, ov, reply_new) = match c.op {
            FieldOp::IncrBy => {
                let ov = unsigned_overflow(old, c.value, c.bits, c.overflow);
                let new = match ov {
                    Some(Some(w)) => w,
                    _ => old.wrapping_add(c.value as u64),
                };
                (new, ov, true)
            }
            _ => {
                let v = c.value as u64;
                let ov = unsigned_overflow(v, 0, c.bits, c.overflow);
                (ov.flatten().unwrap_or(v), ov, false)
            }
        };
        if matches!(ov, Some(None)) {
            return (None, false);
        }
        set_field(s, c.offset, c.bits, new);
        (Some(if reply_new { new } else { old } as i64), old != new)
    }
}

/// Reads one GET field.
fn field_read(s: &[u8], c: &FieldCmd) -> i64 {
    if c.signed {
        get_signed(s, c.offset, c.bits)
    } else {
        get_unsigned(s, c.offset, c.bits) as i64
    }
}

/// BITFIELD and BITFIELD_RO: parse every subcommand first (any error aborts the whole
/// command), then run them in order on one string.
fn bitfield_generic(ctx: &mut Ctx, read_only_cmd: bool) -> CmdResult {
    let args = ctx.args;
    let key = args[1];
    let max_bulk = max_bulk_len(ctx);
    let mut ops: Vec<FieldCmd> = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut read_only = true;
    let mut highest_write: u64 = 0;
    let mut j = 2;
    while j < args.len() {
        let rem = args.len() - j - 1;
        let sub = args[j];
        let op = if eq_ic(sub, "GET") && rem >= 2 {
            FieldOp::Get
        } else if eq_ic(sub, "SET") && rem >= 3 {
            FieldOp::Set
        } else if eq_ic(sub, "INCRBY") && rem >= 3 {
            FieldOp::IncrBy
        } else if eq_ic(sub, "OVERFLOW") && rem >= 1 {
            let t = args[j + 1];
            overflow = if eq_ic(t, "WRAP") {
                Overflow::Wrap
            } else if eq_ic(t, "SAT") {
                Overflow::Sat
            } else if eq_ic(t, "FAIL") {
                Overflow::Fail
            } else {
                return Err(CmdError::msg("ERR Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(args[j + 1])?;
        let offset = bit_offset(args[j + 2], max_bulk, true, bits)?;
        let mut value = 0;
        if op != FieldOp::Get {
            read_only = false;
            highest_write = highest_write.max(offset + bits as u64 - 1);
            value = parse_int(args[j + 3])?;
        }
        ops.push(FieldCmd { op, offset, value, bits, signed, overflow });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }

    if read_only {
        let mut ibuf = itoa::Buffer::new();
        let v = ctx.ks.get_string(key)?;
        let s = match &v {
            Some(v) => v.as_bytes(&mut ibuf).unwrap_or(b""),
            None => b"",
        };
        ctx.reply.array(ops.len());
        for c in &ops {
            ctx.reply.int(field_read(s, c));
        }
        return Ok(());
    }
    if read_only_cmd {
        return Err(CmdError::msg("ERR BITFIELD_RO only supports the GET subcommand"));
    }
    // Make room up to the farthest bit written (bounded: every offset is below
    // proto-max-bulk-len bytes and a field is at most 64 bits).
    let (s, dirty) = string_for_bit_write(&mut ctx.ks, key, highest_write)?;
    ctx.reply.array(ops.len());
    let mut changes = 0u64;
    for c in &ops {
        if c.op == FieldOp::Get {
            ctx.reply.int(field_read(s, c));
            continue;
        }
        match field_write(s, c) {
            (Some(v), changed) => {
                ctx.reply.int(v);
                if dirty || changed {
                    changes += 1;
                }
            }
            (None, _) => ctx.reply.null(),
        }
    }
    if changes > 0 {
        ctx.ks.modified(key);
        ctx.ks.dirty += changes - 1;
        ctx.ks.note(notify::STRING, "setbit", key);
    }
    Ok(())
}

// BITFIELD key [GET encoding offset | [OVERFLOW <WRAP | SAT | FAIL>]
//     <SET encoding offset value | INCRBY encoding offset increment> [...]]
pub fn bitfield(ctx: &mut Ctx) -> CmdResult {
    bitfield_generic(ctx, false)
}

// BITFIELD_RO key [GET encoding offset [GET encoding offset ...]]
pub fn bitfield_ro(ctx: &mut Ctx) -> CmdResult {
    bitfield_generic(ctx, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::string::tests::Harness;

    #[test]
    fn unchanged_bits_are_not_writes() {
        let mut h = Harness::new();
        assert_eq!(h.run("SETBIT k 3 1"), ":0\r\n");
        let d = h.dirty();
        // Same value again: no dirty, no effect.
        assert_eq!(h.run("SETBIT k 3 1"), ":1\r\n");
        assert_eq!(h.run("SETBIT k 4 0"), ":0\r\n");
        assert_eq!(h.dirty(), d);
        // Growing the string is a change even when the bit written is 0.
        h.run("SETBIT k 100 0");
        assert_eq!(h.dirty(), d + 1);
        // BITFIELD counts one change per field that changed.
        h.run("BITFIELD k SET u8 0 1 SET u8 0 1 SET u8 8 7 GET u8 0");
        assert_eq!(h.dirty(), d + 3);
        // Only refused writes: the string exists and does not grow, so nothing changes.
        h.run("BITFIELD k OVERFLOW FAIL INCRBY u8 0 1000");
        assert_eq!(h.dirty(), d + 3);
        // BITOP with an empty result on a missing destination changes nothing.
        h.run("BITOP OR dest missing");
        assert_eq!(h.dirty(), d + 3);
        assert_eq!(
            h.take_effects(),
            vec!["SETBIT k 3 1", "SETBIT k 100 0", "BITFIELD k SET u8 0 1 SET u8 0 1 SET u8 8 7 GET u8 0"]
        );
        assert_eq!(h.run("BITOP NOT dest k"), ":13\r\n");
        assert_eq!(h.run("BITOP AND dest missing"), ":0\r\n");
        assert_eq!(h.run("EXISTS dest"), ":0\r\n");
        assert_eq!(h.take_effects(), vec!["BITOP NOT dest k", "BITOP AND dest missing"]);
    }

    #[test]
    fn unsigned_overflow_math() {
        use Overflow::*;
        // u8 at 250 + 10.
        assert_eq!(unsigned_overflow(250, 10, 8, Wrap), Some(Some(4)));
        assert_eq!(unsigned_overflow(250, 10, 8, Sat), Some(Some(255)));
        assert_eq!(unsigned_overflow(250, 10, 8, Fail), Some(None));
        assert_eq!(unsigned_overflow(250, 5, 8, Wrap), None);
        // Below zero.
        assert_eq!(unsigned_overflow(3, -5, 8, Wrap), Some(Some(254)));
        assert_eq!(unsigned_overflow(3, -5, 8, Sat), Some(Some(0)));
        // SET of a negative value: seen as a huge unsigned value, so SAT gives the maximum.
        assert_eq!(unsigned_overflow(-1i64 as u64, 0, 8, Sat), Some(Some(255)));
        assert_eq!(unsigned_overflow(-1i64 as u64, 0, 8, Wrap), Some(Some(255)));
        assert_eq!(unsigned_overflow(256, 0, 8, Wrap), Some(Some(0)));
        // u63 limits.
        let max63 = (1u64 << 63) - 1;
        assert_eq!(unsigned_overflow(max63, 1, 63, Wrap), Some(Some(0)));
        assert_eq!(unsigned_overflow(max63, 0, 63, Wrap), None);
        assert_eq!(unsigned_overflow(0, i64::MIN, 63, Sat), Some(Some(0)));
    }

    #[test]
    fn signed_overflow_math() {
        use Overflow::*;
        assert_eq!(signed_overflow(120, 10, 8, Wrap), Some(Some(-126)));
        assert_eq!(signed_overflow(120, 10, 8, Sat), Some(Some(127)));
        assert_eq!(signed_overflow(-120, -10, 8, Wrap), Some(Some(126)));
        assert_eq!(signed_overflow(-120, -10, 8, Sat), Some(Some(-128)));
        assert_eq!(signed_overflow(-120, -8, 8, Sat), None);
        assert_eq!(signed_overflow(200, 0, 8, Wrap), Some(Some(-56)));
        assert_eq!(signed_overflow(-129, 0, 8, Sat), Some(Some(-128)));
        // i1 holds -1 and 0 only.
        assert_eq!(signed_overflow(0, 1, 1, Wrap), Some(Some(-1)));
        assert_eq!(signed_overflow(-1, 0, 1, Wrap), None);
        // i64: overflow is detected without any wider arithmetic.
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Wrap), Some(Some(i64::MIN)));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Sat), Some(Some(i64::MAX)));
        assert_eq!(signed_overflow(i64::MIN, -1, 64, Sat), Some(Some(i64::MIN)));
        assert_eq!(signed_overflow(i64::MIN, -1, 64, Wrap), Some(Some(i64::MAX)));
        assert_eq!(signed_overflow(-5, i64::MAX, 64, Fail), None);
        assert_eq!(signed_overflow(5, i64::MIN, 64, Fail), None);
    }

    #[test]
    fn field_get_set_roundtrip() {
        let mut s = vec![0u8; 3];
        set_field(&mut s, 5, 8, 0xAB);
        assert_eq!(get_unsigned(&s, 5, 8), 0xAB);
        assert_eq!(s, vec![0b0000_0101, 0b0101_1000, 0]);
        assert_eq!(get_signed(&s, 5, 8), 0xABu8 as i8 as i64);
        // Reading past the end gives zeros.
        assert_eq!(get_unsigned(&s, 20, 16), 0);
        let mut s = vec![0u8; 8];
        set_field(&mut s, 0, 64, i64::MIN as u64);
        assert_eq!(get_signed(&s, 0, 64), i64::MIN);
    }

    #[test]
    fn bitfield_offsets_and_types() {
        assert_eq!(bit_offset(b"#2", 512 << 20, true, 8), Ok(16));
        assert_eq!(bit_offset(b"#2", 512 << 20, false, 8).unwrap_err().text(), BIT_OFFSET_ERR);
        assert!(bit_offset(b"-1", 512 << 20, false, 0).is_err());
        assert!(bit_offset(b"4294967296", 512 << 20, false, 0).is_err());
        assert_eq!(bit_offset(b"4294967295", 512 << 20, false, 0), Ok(4294967295));
        assert_eq!(field_type(b"i64"), Ok((true, 64)));
        assert_eq!(field_type(b"U63"), Ok((false, 63)));
        assert!(field_type(b"u64").is_err());
        assert!(field_type(b"i0").is_err());
        assert!(field_type(b"x8").is_err());
        assert!(field_type(b"").is_err());
    }

    fn pos(s: &[u8], start: i64, end: Option<i64>, is_bit: bool, bit: u8) -> i64 {
        let r = resolve_range(start, end.unwrap_or(s.len() as i64 - 1), s.len(), is_bit);
        find_bit(s, &r, bit, end.is_some())
    }

    #[test]
    fn bitpos_edge_cases() {
        // All ones: looking for 0 without an end runs past the string; with an end, -1.
        assert_eq!(pos(b"\xff\xff", 0, None, false, 0), 16);
        assert_eq!(pos(b"\xff\xff", 0, Some(-1), false, 0), -1);
        assert_eq!(pos(b"\x00\x00", 0, None, false, 1), -1);
        assert_eq!(pos(b"\x00\x01", 0, None, false, 1), 15);
        // BIT ranges mask the edges of their first and last byte.
        assert_eq!(pos(b"\xff\x00", 2, Some(9), true, 0), 8);
        assert_eq!(pos(b"\x80\x00", 1, Some(15), true, 1), -1);
        assert_eq!(pos(b"\x40", 1, Some(1), true, 1), 1);
        assert_eq!(pos(b"\x40", 2, Some(7), true, 1), -1);
        assert_eq!(pos(b"\xfe", 0, Some(7), true, 0), 7);
        assert_eq!(pos(b"\xfe", 0, Some(6), true, 0), -1);
        // Start beyond the end, negative indexes.
        assert_eq!(pos(b"\x00", 5, None, false, 0), -1);
        assert_eq!(pos(b"\x00\xff", -1, None, false, 1), 8);
        assert_eq!(pos(b"", 0, None, false, 0), -1);
    }

    #[test]
    fn bitcount_ranges() {
        let s = b"foobar";
        let count = |start, end, is_bit| count_bits(s, &resolve_range(start, end, s.len(), is_bit));
        assert_eq!(count(0, -1, false), 26);
        assert_eq!(count(1, 1, false), 6);
        assert_eq!(count(5, 30, true), 17);
        assert_eq!(count(-100, 100, false), 26);
        assert_eq!(count(7, 7, true), 0);
        assert_eq!(count(6, 6, true), 1);
        assert_eq!(count(10, 5, false), 0);
    }

    #[test]
    fn bitop_folding() {
        let run = |op, srcs: &[&[u8]]| {
            let mut f = Fold::default();
            for (i, s) in srcs.iter().enumerate() {
                f.add(s, op, i == 0);
            }
            f.finish(op)
        };
        assert_eq!(run(BitOp::And, &[b"\xff\xff", b"\x0f"]), b"\x0f\x00");
        assert_eq!(run(BitOp::And, &[b"", b"\xff"]), b"\x00");
        assert_eq!(run(BitOp::Or, &[b"\x01", b"\x10\x20"]), b"\x11\x20");
        assert_eq!(run(BitOp::Xor, &[b"\xff", b"\x0f", b"\x01"]), b"\xf1");
        assert_eq!(run(BitOp::Not, &[b"\x0f\x00"]), b"\xf0\xff");
        // Redis's own example for ONE: 0x17, 0x26, 0x4d → 0x78.
        assert_eq!(run(BitOp::One, &[b"\x17", b"\x26", b"\x4d"]), b"\x78");
        assert_eq!(run(BitOp::Diff, &[b"\xf0", b"\x30", b"\x00\xff"]), b"\xc0\x00");
        assert_eq!(run(BitOp::Diff1, &[b"\xf0", b"\x3c"]), b"\x0c");
        assert_eq!(run(BitOp::AndOr, &[b"", b"\xff"]), b"\x00");
    }
}
