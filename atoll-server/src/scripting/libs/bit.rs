//! `bit`: 32-bit bitwise operations for Lua scripts, compatible with LuaBitOp 1.0.2 as built into Redis 7.2.
//!
//! Written by hand because no maintained crate ships LuaBitOp for mlua. Reproduced behaviour: arguments are
//! Lua 5.1 doubles converted to 32 bits the way LuaBitOp does it (adding 2^52+2^51 and keeping the low word,
//! so fractions round to nearest-even and values wrap modulo 2^32), results are signed 32-bit numbers, shift
//! counts use their low five bits, `tohex` takes an optional digit count (negative for upper case), and a
//! non-number argument raises `bad argument #n to 'f' (number expected, got T)`.

use mlua::{Lua, MultiValue, Table, Value};

use super::{ret1, Args, Builder, LibResult};

/// LuaBitOp's conversion of an argument to a 32-bit pattern.
fn barg(lua: &Lua, args: &Args, i: usize) -> LibResult<u32> {
    let n = args.to_number(lua, i)?;
    let b = to_bits(n.unwrap_or(0.0));
    if b == 0 && n.is_none() {
        return args.type_error(i, "number");
    }
    Ok(b)
}

/// Normalise a double to 32 bits: add 2^52+2^51 and take the low word of the IEEE representation.
pub(crate) fn to_bits(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

fn bret(b: u32) -> LibResult<MultiValue> {
    ret1(Value::Number(f64::from(b as i32)))
}

fn fold(lua: &Lua, args: &Args, op: fn(u32, u32) -> u32) -> LibResult<MultiValue> {
    let mut b = barg(lua, args, 1)?;
    let mut i = args.len();
    while i > 1 {
        b = op(b, barg(lua, args, i)?);
        i -= 1;
    }
    bret(b)
}

fn shift(lua: &Lua, args: &Args, op: fn(u32, u32) -> u32) -> LibResult<MultiValue> {
    let b = barg(lua, args, 1)?;
    let n = barg(lua, args, 2)? & 31;
    bret(op(b, n))
}

pub(super) fn create(lua: &Lua, builder: &Builder) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    builder.add(lua, &t, "tobit", |lua, args| bret(barg(lua, &args, 1)?))?;
    builder.add(lua, &t, "bnot", |lua, args| bret(!barg(lua, &args, 1)?))?;
    builder.add(lua, &t, "band", |lua, args| fold(lua, &args, |a, b| a & b))?;
    builder.add(lua, &t, "bor", |lua, args| fold(lua, &args, |a, b| a | b))?;
    builder.add(lua, &t, "bxor", |lua, args| fold(lua, &args, |a, b| a ^ b))?;
    builder.add(lua, &t, "lshift", |lua, args| shift(lua, &args, |b, n| b << n))?;
    builder.add(lua, &t, "rshift", |lua, args| shift(lua, &args, |b, n| b >> n))?;
    builder.add(lua, &t, "arshift", |lua, args| shift(lua, &args, |b, n| ((b as i32) >> n) as u32))?;
    builder.add(lua, &t, "rol", |lua, args| shift(lua, &args, |b, n| b.rotate_left(n)))?;
    builder.add(lua, &t, "ror", |lua, args| shift(lua, &args, |b, n| b.rotate_right(n)))?;
    builder.add(lua, &t, "bswap", |lua, args| bret(barg(lua, &args, 1)?.swap_bytes()))?;
    builder.add(lua, &t, "tohex", |lua, args| {
        let mut b = barg(lua, &args, 1)?;
        let mut n: i32 = if args.is_none(2) { 8 } else { barg(lua, &args, 2)? as i32 };
        let mut digits = b"0123456789abcdef";
        if n == i32::MIN {
            n = i32::MIN + 1;
        }
        if n < 0 {
            n = -n;
            digits = b"0123456789ABCDEF";
        }
        let n = n.min(8) as usize;
        let mut buf = vec![0u8; n];
        for slot in buf.iter_mut().rev() {
            *slot = digits[(b & 15) as usize];
            b >>= 4;
        }
        ret1(Value::String(lua.create_string(&buf)?))
    })?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::check_cases;
    use super::to_bits;

    #[test]
    fn conversion_rounds_and_wraps() {
        assert_eq!(to_bits(2.5) as i32, 2);
        assert_eq!(to_bits(-2.5) as i32, -2);
        assert_eq!(to_bits(4294967295.0) as i32, -1);
        assert_eq!(to_bits(1e300) as i32, -2013235812);
    }

    #[test]
    fn matches_redis_7_2_6() {
        check_cases(&[
            (
                r##"bit.tobit(0xffffffff), bit.tobit(2^32 + 5), bit.tobit(-1), bit.tobit(1.5), bit.tobit(2.5), bit.tobit(-2.5), bit.tobit(2^53)"##,
                r##"true,-1,5,-1,2,2,-2,0"##,
            ),
            (r##"bit.tobit('12'), bit.tobit('0x10'), bit.tobit(' 7 ')"##, r##"true,12,16,7"##),
            (
                r##"bit.tobit('abc')"##,
                r##"false,"user_script:28: bad argument #1 to 'tobit' (number expected, got string)""##,
            ),
            (
                r##"bit.tobit()"##,
                r##"false,"user_script:28: bad argument #1 to 'tobit' (number expected, got no value)""##,
            ),
            (
                r##"bit.tobit(nil)"##,
                r##"false,"user_script:28: bad argument #1 to 'tobit' (number expected, got nil)""##,
            ),
            (
                r##"bit.tobit({})"##,
                r##"false,"user_script:28: bad argument #1 to 'tobit' (number expected, got table)""##,
            ),
            (r##"bit.tobit(1/0), bit.tobit(0/0), bit.tobit(-1/0), bit.tobit(1e300)"##, r##"true,0,0,0,-2013235812"##),
            (r##"bit.bnot(0), bit.bnot(5), bit.bnot(-1)"##, r##"true,-1,-6,0"##),
            (
                r##"bit.band(0xff, 0x0f), bit.band(-1, 7, 3), bit.band(5), bit.bor(1, 2, 4, 8), bit.bxor(0xff, 0x0f, 1), bit.bor(0x80000000, 0)"##,
                r##"true,15,3,5,15,241,-2147483648"##,
            ),
            (
                r##"bit.band()"##,
                r##"false,"user_script:28: bad argument #1 to 'band' (number expected, got no value)""##,
            ),
            (
                r##"bit.band(1, 'x')"##,
                r##"false,"user_script:28: bad argument #2 to 'band' (number expected, got string)""##,
            ),
            (
                r##"bit.bor(1, nil)"##,
                r##"false,"user_script:28: bad argument #2 to 'bor' (number expected, got nil)""##,
            ),
            (
                r##"bit.lshift(1, 31), bit.lshift(1, 32), bit.lshift(1, 33), bit.lshift(1, -1), bit.rshift(-1, 28), bit.rshift(0x80000000, 31), bit.arshift(-256, 4), bit.arshift(0x80000000, 31)"##,
                r##"true,-2147483648,1,2,-2147483648,15,1,-16,-1"##,
            ),
            (
                r##"bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.rol(1, 0), bit.ror(1, 32), bit.rol(-1, 5)"##,
                r##"true,878082066,2014458966,1,1,-1"##,
            ),
            (r##"bit.bswap(0x12345678), bit.bswap(-1), bit.bswap(0xff)"##, r##"true,2018915346,-1,-16777216"##),
            (
                r##"bit.tohex(255), bit.tohex(255, 2), bit.tohex(255, -2), bit.tohex(-1), bit.tohex(0x12345678, 10), bit.tohex(0x12345678, -10), bit.tohex(1, 0), bit.tohex(0xabc, 3)"##,
                r##"true,"000000ff","ff","FF","ffffffff","12345678","12345678","","abc""##,
            ),
            (
                r##"bit.tohex(1, -2^31), bit.tohex(255, nil)"##,
                r##"false,"user_script:28: bad argument #2 to 'tohex' (number expected, got nil)""##,
            ),
            (
                r##"bit.lshift(1)"##,
                r##"false,"user_script:28: bad argument #2 to 'lshift' (number expected, got no value)""##,
            ),
            (
                r##"bit.tohex()"##,
                r##"false,"user_script:28: bad argument #1 to 'tohex' (number expected, got no value)""##,
            ),
            (r##"@return bit.tobit('1e2'), bit.tobit('  0x7fffffff  ')"##, r##"true,100,2147483647"##),
            (
                r##"@local t = {} for k in pairs(bit) do t[#t+1] = k end table.sort(t) return table.concat(t, ',')"##,
                r##"true,"arshift,band,bnot,bor,bswap,bxor,lshift,rol,ror,rshift,tobit,tohex""##,
            ),
            (
                r##"@local t = {} for k in pairs(cjson) do t[#t+1] = k end table.sort(t) return table.concat(t, ',')"##,
                r##"true,"_NAME,_VERSION,decode,decode_invalid_numbers,decode_max_depth,encode,encode_invalid_numbers,encode_keep_buffer,encode_max_depth,encode_number_precision,encode_sparse_array,new,null""##,
            ),
            (
                r##"@local t = {} for k in pairs(cmsgpack) do t[#t+1] = k end table.sort(t) return table.concat(t, ',')"##,
                r##"true,"_COPYRIGHT,_DESCRIPTION,_NAME,_VERSION,pack,unpack,unpack_limit,unpack_one""##,
            ),
            (
                r##"@local t = {} for k in pairs(struct) do t[#t+1] = k end table.sort(t) return table.concat(t, ',')"##,
                r##"true,"pack,size,unpack""##,
            ),
        ]);
    }
}
