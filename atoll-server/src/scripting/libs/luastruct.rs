//! `struct`: binary packing for Lua scripts, compatible with Roberto Ierusalimschy's struct library as built
//! into Redis 7.2 (on x86-64: `long` and `size_t` are 8 bytes, `int` 4, maximum alignment 8).
//!
//! Written by hand because no maintained crate ships this module for mlua. Reproduced behaviour: the format
//! language (`<` `>` `!n` endianness and alignment, `x b B h H l L T i[n] I[n] f d s c[n]`, spaces ignored),
//! integers of up to 32 bytes built from a 64-bit value, `c0` taking its length from the argument or from
//! the previously unpacked number, `unpack`'s optional 1-based start position and trailing next-position
//! result, and the C library's error messages (including its quirks, such as `string too short` naming the
//! following argument).

use mlua::{Lua, MultiValue, Table, Value};

use super::{arg_err, located, number_to_integer, ret1, to_number, Args, Builder, LibResult, LUA_MAX_C_STACK};

const MAX_INT_SIZE: usize = 32;
const MAX_ALIGN: usize = 8;

struct Header {
    little: bool,
    align: usize,
}

impl Header {
    fn new() -> Self {
        Header { little: true, align: 1 }
    }
}

/// The format string as C sees it (it stops at the first NUL byte).
fn format_arg(lua: &Lua, args: &Args) -> LibResult<Vec<u8>> {
    let mut f = args.check_bytes(lua, 1)?;
    if let Some(p) = f.iter().position(|&b| b == 0) {
        f.truncate(p);
    }
    Ok(f)
}

/// Read a decimal count at `fmt[*pos..]`, or `default` when there is none.
fn getnum(fmt: &[u8], pos: &mut usize, default: usize) -> LibResult<usize> {
    if !fmt.get(*pos).is_some_and(u8::is_ascii_digit) {
        return Ok(default);
    }
    let mut a: i32 = 0;
    while let Some(&c) = fmt.get(*pos).filter(|c| c.is_ascii_digit()) {
        let d = i32::from(c - b'0');
        if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
            return located("integral size overflow");
        }
        a = a * 10 + d;
        *pos += 1;
    }
    Ok(a as usize)
}

fn optsize(opt: u8, fmt: &[u8], pos: &mut usize) -> LibResult<usize> {
    Ok(match opt {
        b'B' | b'b' | b'x' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => getnum(fmt, pos, 1)?,
        b'i' | b'I' => {
            let sz = getnum(fmt, pos, 4)?;
            if sz > MAX_INT_SIZE {
                return located(format!("integral size {} is larger than limit of {}", sz, MAX_INT_SIZE));
            }
            sz
        }
        _ => 0,
    })
}

/// Padding needed to align an item of `size` bytes at offset `len`.
fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

fn controloptions(opt: u8, fmt: &[u8], pos: &mut usize, h: &mut Header) -> LibResult<()> {
    match opt {
        b' ' => {}
        b'>' => h.little = false,
        b'<' => h.little = true,
        b'!' => {
            let a = getnum(fmt, pos, MAX_ALIGN)?;
            if a == 0 || a & (a - 1) != 0 {
                return located(format!("alignment {} is not a power of 2", a));
            }
            h.align = a;
        }
        _ => return arg_err(1, format!("invalid format option '{}'", char::from(opt))),
    }
    Ok(())
}

fn pack(lua: &Lua, mut args: Args) -> LibResult<MultiValue> {
    let fmt = format_arg(lua, &args)?;
    // The C code pushes a nil after its arguments, so a missing argument is reported as "nil".
    args.push_nil();
    let mut h = Header::new();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    let mut pos = 0;
    while pos < fmt.len() {
        let opt = fmt[pos];
        pos += 1;
        let mut size = optsize(opt, &fmt, &mut pos)?;
        let pad = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = args.check_number(lua, arg)?;
                arg += 1;
                // (unsigned long)n for non-negative values, (unsigned long)(long)n otherwise, as on x86-64.
                let mut value: u64 = if n.is_nan() {
                    1 << 63
                } else if n < 0.0 {
                    number_to_integer(n) as u64
                } else if n < 9_223_372_036_854_775_808.0 {
                    n as u64
                } else if n < 18_446_744_073_709_551_616.0 {
                    (number_to_integer(n - 9_223_372_036_854_775_808.0) as u64) ^ (1 << 63)
                } else {
                    0
                };
                let mut bytes = vec![0u8; size];
                for b in bytes.iter_mut() {
                    *b = (value & 0xff) as u8;
                    value >>= 8;
                }
                if !h.little {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = args.check_number(lua, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little { f.to_le_bytes() } else { f.to_be_bytes() });
            }
            b'd' => {
                let d = args.check_number(lua, arg)?;
                arg += 1;
                out.extend_from_slice(&if h.little { d.to_le_bytes() } else { d.to_be_bytes() });
            }
            b'c' | b's' => {
                let s = args.check_bytes(lua, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return arg_err(arg as i32, "string too short");
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => controloptions(opt, &fmt, &mut pos, &mut h)?,
        }
    }
    ret1(Value::String(lua.create_string(&out)?))
}

fn get_integer(bytes: &[u8], little: bool, signed: bool) -> f64 {
    let size = bytes.len();
    let mut l: u64 = 0;
    let mut push = |b: u8| l = (l << 8) | u64::from(b);
    if little {
        bytes.iter().rev().for_each(|&b| push(b));
    } else {
        bytes.iter().for_each(|&b| push(b));
    }
    if !signed {
        return l as f64;
    }
    // x86-64 masks the shift count to six bits, which matters for sizes above 8 bytes.
    let mask = u64::MAX << ((size * 8).wrapping_sub(1) & 63);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &Args) -> LibResult<MultiValue> {
    let fmt = format_arg(lua, args)?;
    let data = args.check_bytes(lua, 2)?;
    let ld = data.len();
    let start = args.opt_integer(lua, 3, 1)? as u64 as usize;
    if start == 0 {
        return arg_err(3, "offset must be 1 or greater");
    }
    let mut pos = start - 1;
    let mut h = Header::new();
    let mut results: Vec<Value> = Vec::new();
    let mut fpos = 0;
    let too_short = |size: usize, pos: usize| !(size <= ld && pos <= ld - size);
    while fpos < fmt.len() {
        let opt = fmt[fpos];
        fpos += 1;
        let mut size = optsize(opt, &fmt, &mut fpos)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if too_short(size, pos) {
            return arg_err(2, "data string too short");
        }
        if args.len() + results.len() + 2 > LUA_MAX_C_STACK {
            return located("stack overflow (too many results)");
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = get_integer(&data[pos..pos + size], h.little, opt.is_ascii_lowercase());
                results.push(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let f = if h.little { f32::from_le_bytes(b) } else { f32::from_be_bytes(b) };
                results.push(Value::Number(f64::from(f)));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                results.push(Value::Number(if h.little { f64::from_le_bytes(b) } else { f64::from_be_bytes(b) }));
            }
            b'c' => {
                if size == 0 {
                    let prev = match results.last() {
                        Some(v) => to_number(lua, v)?,
                        None => None,
                    };
                    let Some(n) = prev else {
                        return located("format 'c0' needs a previous size");
                    };
                    results.pop();
                    size = if n >= 0.0 { n as usize } else { number_to_integer(n) as u64 as usize };
                    if too_short(size, pos) {
                        return arg_err(2, "data string too short");
                    }
                }
                results.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(nul) = data[pos..].iter().position(|&b| b == 0) else {
                    return located("unfinished string in data");
                };
                results.push(Value::String(lua.create_string(&data[pos..pos + nul])?));
                size = nul + 1;
            }
            _ => controloptions(opt, &fmt, &mut fpos, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    results.push(Value::Integer(pos.wrapping_add(1) as i64));
    Ok(MultiValue::from_iter(results))
}

fn size(lua: &Lua, args: &Args) -> LibResult<MultiValue> {
    let fmt = format_arg(lua, args)?;
    let mut h = Header::new();
    let mut pos: usize = 0;
    let mut fpos = 0;
    while fpos < fmt.len() {
        let opt = fmt[fpos];
        fpos += 1;
        let size = optsize(opt, &fmt, &mut fpos)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if opt == b's' {
            return arg_err(1, "option 's' has no fixed size");
        } else if opt == b'c' && size == 0 {
            return arg_err(1, "option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            controloptions(opt, &fmt, &mut fpos, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    ret1(Value::Integer(pos as i64))
}

pub(super) fn create(lua: &Lua, builder: &Builder) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    builder.add_packed(lua, &t, "pack", pack)?;
    builder.add(lua, &t, "unpack", |lua, args| unpack(lua, &args))?;
    builder.add(lua, &t, "size", |lua, args| size(lua, &args))?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::check_cases;

    #[test]
    fn matches_redis_7_2_6() {
        check_cases(&[
            (
                r##"H(struct.pack('>I2', 258)), H(struct.pack('<I2', 258)), H(struct.pack('<i', -2)), H(struct.pack('>l', 1)), H(struct.pack('b', -1)), H(struct.pack('B', 256))"##,
                r##"true,"0102","0201","feffffff","0000000000000001","ff","00""##,
            ),
            (
                r##"H(struct.pack('<I3', 0x123456)), H(struct.pack('>i3', -1)), H(struct.pack('<i16', -1)), H(struct.pack('>I9', 1)), H(struct.pack('<i0', 5))"##,
                r##"true,"563412","ffffff","ffffffffffffffff0000000000000000","000000000000000001","""##,
            ),
            (
                r##"H(struct.pack('<H', 2^16+1)), H(struct.pack('<L', 2^64)), H(struct.pack('<L', 2^63)), H(struct.pack('<l', -2^63)), H(struct.pack('<l', -2^64)), H(struct.pack('<L', 0/0)), H(struct.pack('<l', 1.9)), H(struct.pack('<l', -1.9))"##,
                r##"true,"0100","0000000000000000","0000000000000080","0000000000000080","0000000000000080","0000000000000080","0100000000000000","ffffffffffffffff""##,
            ),
            (
                r##"H(struct.pack('<f', 1.5)), H(struct.pack('>f', 1.5)), H(struct.pack('<d', 1.5)), H(struct.pack('>d', -0.0)), H(struct.pack('<f', 1e300))"##,
                r##"true,"0000c03f","3fc00000","000000000000f83f","8000000000000000","0000807f""##,
            ),
            (
                r##"H(struct.pack('s', 'ab')), H(struct.pack('c', 'ab')), H(struct.pack('c3', 'abcd')), H(struct.pack('c0', 'abc')), H(struct.pack('xx'))"##,
                r##"true,"616200","61","616263","616263","0000""##,
            ),
            (
                r##"struct.pack('c5', 'ab')"##,
                r##"false,"user_script:28: bad argument #3 to 'pack' (string too short)""##,
            ),
            (
                r##"struct.pack('s')"##,
                r##"false,"user_script:28: bad argument #2 to 'pack' (string expected, got nil)""##,
            ),
            (
                r##"struct.pack('i', 'x')"##,
                r##"false,"user_script:28: bad argument #2 to 'pack' (number expected, got string)""##,
            ),
            (
                r##"struct.pack('i')"##,
                r##"false,"user_script:28: bad argument #2 to 'pack' (number expected, got nil)""##,
            ),
            (
                r##"struct.pack('z', 1)"##,
                r##"false,"user_script:28: bad argument #1 to 'pack' (invalid format option 'z')""##,
            ),
            (r##"struct.pack('i33', 1)"##, r##"false,"user_script:28: integral size 33 is larger than limit of 32""##),
            (r##"struct.pack('i99999999999', 1)"##, r##"false,"user_script:28: integral size overflow""##),
            (r##"struct.pack('!3')"##, r##"false,"user_script:28: alignment 3 is not a power of 2""##),
            (r##"struct.pack('!0')"##, r##"false,"user_script:28: alignment 0 is not a power of 2""##),
            (
                r##"H(struct.pack('!4 b i', 1, 2)), H(struct.pack('!b i', 1, 2)), H(struct.pack('!8 b d', 1, 1)), H(struct.pack('!2 b i', 1, 2)), H(struct.pack('b i', 1, 2))"##,
                r##"true,"0100000002000000","0100000002000000","0100000000000000000000000000f03f","010002000000","0102000000""##,
            ),
            (
                r##"H(struct.pack('!4 b i3', 1, 2)), H(struct.pack('!4 b c2 h', 1, 'ab', 3)), H(struct.pack('!4 b s h', 1, 'ab', 3))"##,
                r##"true,"010000020000","016162000300","016162000300""##,
            ),
            (
                r##"H(struct.pack('>!4 b h b I', 1, 2, 3, 4)), H(struct.pack('T', 7))"##,
                r##"true,"010000020300000000000004","0700000000000000""##,
            ),
            (r##"H(struct.pack('b', '12'))"##, r##"true,"0c""##),
            (r##"H(struct.pack(''))"##, r##"true,"""##),
            (
                r##"struct.pack()"##,
                r##"false,"user_script:28: bad argument #1 to 'pack' (string expected, got no value)""##,
            ),
            (
                r##"struct.pack(5, 1)"##,
                r##"false,"user_script:28: bad argument #1 to 'pack' (invalid format option '5')""##,
            ),
            (r##"H(struct.pack('i\0i', 1, 2))"##, r##"true,"01000000""##),
            (
                r##"struct.unpack('>I2', X('0102')), struct.unpack('<I2', X('0102')), struct.unpack('<i', X('feffffff')), struct.unpack('b', X('ff')), struct.unpack('B', X('ff'))"##,
                r##"true,258,513,-2,-1,255,2"##,
            ),
            (
                r##"struct.unpack('<i3', X('ffffff')), struct.unpack('<I3', X('ffffff')), struct.unpack('>i9', X('000000000000000080')), struct.unpack('<i16', X('ffffffffffffffffffffffffffffffff')), struct.unpack('<i0', '')"##,
                r##"true,-1,16777215,-128,-1,0,1"##,
            ),
            (
                r##"struct.unpack('<l', X('0000000000000080')), struct.unpack('<L', X('ffffffffffffffff')), struct.unpack('>L', X('0000000000000001'))"##,
                r##"true,-9.2233720368547758e+18,1.8446744073709552e+19,1,9"##,
            ),
            (
                r##"struct.unpack('<f', X('0000c03f')), struct.unpack('>d', X('3ff8000000000000')), struct.unpack('>f', X('3dcccccd'))"##,
                r##"true,1.5,1.5,0.10000000149011612,5"##,
            ),
            (
                r##"struct.unpack('s', 'ab\0cd'), struct.unpack('c2', 'abcd'), struct.unpack('bc0', X('03') .. 'abcd')"##,
                r##"true,"ab","ab","abc",5"##,
            ),
            (r##"struct.unpack('s', 'abc')"##, r##"false,"user_script:28: unfinished string in data""##),
            (r##"struct.unpack('c0', 'abc')"##, r##"false,"user_script:28: format 'c0' needs a previous size""##),
            (
                r##"struct.unpack('bc0', X('05') .. 'abcd')"##,
                r##"false,"user_script:28: bad argument #2 to 'unpack' (data string too short)""##,
            ),
            (
                r##"struct.unpack('i', 'ab')"##,
                r##"false,"user_script:28: bad argument #2 to 'unpack' (data string too short)""##,
            ),
            (
                r##"struct.unpack('i', 'abcd', 2)"##,
                r##"false,"user_script:28: bad argument #2 to 'unpack' (data string too short)""##,
            ),
            (
                r##"struct.unpack('b', 'abcd', 4), struct.unpack('b', 'abcd', 5)"##,
                r##"false,"user_script:28: bad argument #2 to 'unpack' (data string too short)""##,
            ),
            (r##"struct.unpack('', 'abcd', 5), struct.unpack('', 'abcd', 9)"##, r##"true,5,9"##),
            (
                r##"struct.unpack('b', 'abcd', 0)"##,
                r##"false,"user_script:28: bad argument #3 to 'unpack' (offset must be 1 or greater)""##,
            ),
            (
                r##"struct.unpack('b', 'abcd', -1)"##,
                r##"false,"user_script:28: bad argument #2 to 'unpack' (data string too short)""##,
            ),
            (r##"struct.unpack('', 'abcd', -1)"##, r##"true,-1"##),
            (
                r##"struct.unpack('b', 'abcd', 'x')"##,
                r##"false,"user_script:28: bad argument #3 to 'unpack' (number expected, got string)""##,
            ),
            (r##"struct.unpack('b', 'abcd', 2.9)"##, r##"true,98,3"##),
            (
                r##"struct.unpack('b')"##,
                r##"false,"user_script:28: bad argument #2 to 'unpack' (string expected, got no value)""##,
            ),
            (
                r##"struct.unpack('z', 'a')"##,
                r##"false,"user_script:28: bad argument #1 to 'unpack' (invalid format option 'z')""##,
            ),
            (r##"struct.unpack('!4 b i', X('0100000002000000'))"##, r##"true,1,2,9"##),
            (
                r##"struct.unpack('!4 b i', X('01000000020000'))"##,
                r##"false,"user_script:28: bad argument #2 to 'unpack' (data string too short)""##,
            ),
            (r##"struct.unpack('xxb', 'abc')"##, r##"true,99,4"##),
            (r##"struct.unpack('c1c1c0', '1' .. '2' .. 'abc')"##, r##"true,"1","ab",5"##),
            (
                r##"struct.unpack('c1c0', 'x' .. 'abc')"##,
                r##"false,"user_script:28: format 'c0' needs a previous size""##,
            ),
            (
                r##"struct.size('i'), struct.size('!4 b i'), struct.size('bhlT'), struct.size('<c7'), struct.size('z'), struct.size(''), struct.size('!8bd'), struct.size('x i3')"##,
                r##"true,4,8,19,7,0,0,16,4"##,
            ),
            (
                r##"struct.size('s')"##,
                r##"false,"user_script:28: bad argument #1 to 'size' (option 's' has no fixed size)""##,
            ),
            (
                r##"struct.size('c0')"##,
                r##"false,"user_script:28: bad argument #1 to 'size' (option 'c0' has no fixed size)""##,
            ),
            (
                r##"struct.size('#')"##,
                r##"false,"user_script:28: bad argument #1 to 'size' (invalid format option '#')""##,
            ),
            (r##"struct.size('!5')"##, r##"false,"user_script:28: alignment 5 is not a power of 2""##),
            (
                r##"struct.size()"##,
                r##"false,"user_script:28: bad argument #1 to 'size' (string expected, got no value)""##,
            ),
            (
                r##"H(struct.pack('>i', 2^31)), H(struct.pack('>i', 2^32 + 1)), H(struct.pack('>I', -1))"##,
                r##"true,"80000000","00000001","ffffffff""##,
            ),
            (
                r##"@local r = {struct.unpack(string.rep('b', 7997), string.rep('a', 7997))} return #r"##,
                r##"true,7998"##,
            ),
            (
                r##"@local r = {pcall(struct.unpack, string.rep('b', 7998), string.rep('a', 7998))} return #r, r[1], r[2]"##,
                r##"true,2,false,"stack overflow (too many results)""##,
            ),
        ]);
    }
}
