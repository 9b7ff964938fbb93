//! `cmsgpack`: MessagePack for Lua scripts, compatible with lua-cmsgpack 0.4.0 as built into Redis 7.2.
//!
//! Written by hand because no maintained crate ships lua-cmsgpack for mlua. Reproduced behaviour: `pack`
//! concatenates the encodings of all its arguments; numbers that are exact 64-bit integers use the smallest
//! integer format, other numbers a 32-bit float when that is lossless and a double otherwise; strings use
//! fixstr/str8/str16/str32; a table is an array when its keys are exactly 1..n, otherwise a map; tables
//! nested 16 deep are encoded as nil (which also cuts reference cycles); unsupported types become nil.
//! `unpack`, `unpack_one` and `unpack_limit` return values (plus the next offset for the latter two), with
//! the original's error messages and its Lua-stack limit (about 8000 values or 4000 nesting levels).

use mlua::{Lua, MultiValue, Table, Value};

use super::LUA_MAX_C_STACK;
use super::{arg_err, exact_number, located, number_to_integer, ret1, Args, Builder, LibError, LibResult};

const MAX_NESTING: usize = 16;

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    // "(int64_t)n == n" as it evaluates on x86-64 (out-of-range conversions give INT64_MIN).
    if !n.is_infinite() && number_to_integer(n) as f64 == n {
        encode_int(number_to_integer(n), out);
    } else if f64::from(n as f32) == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_header(n: usize, fix: u8, b16: u8, b32: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// Number of elements if the keys are exactly 1..n (an empty table counts as an array).
fn array_len(t: &Table) -> LibResult<Option<usize>> {
    let mut count: i64 = 0;
    let mut max: i64 = 0;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        // "(int)n == n" with 32-bit int.
        if n <= 0.0 || f64::from(super::number_to_int(n)) != n {
            return Ok(None);
        }
        max = max.max(n as i64);
        count += 1;
    }
    Ok(if max == count { Some(count as usize) } else { None })
}

fn encode_value(v: &Value, level: usize, out: &mut Vec<u8>) -> LibResult<()> {
    match v {
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(*i as f64, out),
        Value::Number(n) => encode_number(*n, out),
        Value::Table(t) if level < MAX_NESTING => match array_len(t)? {
            Some(len) => {
                encode_header(len, 0x90, 0xdc, 0xdd, out);
                for i in 1..=len as i64 {
                    let key = Value::Integer(i);
                    let item = exact_number(t, &key, t.raw_get::<Value>(key.clone())?);
                    encode_value(&item, level + 1, out)?;
                }
            }
            None => {
                let len = t.clone().pairs::<Value, Value>().count();
                encode_header(len, 0x80, 0xde, 0xdf, out);
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, item) = pair?;
                    encode_value(&k, level + 1, out)?;
                    encode_value(&item, level + 1, out)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

fn pack(lua: &Lua, args: &Args) -> LibResult<MultiValue> {
    if args.len() == 0 {
        return arg_err(0, "MessagePack pack needs input.");
    }
    let mut out = Vec::new();
    for i in 1..=args.len() {
        encode_value(&args.value(i), 0, &mut out)?;
    }
    ret1(Value::String(lua.create_string(&out)?))
}

enum DecodeError {
    Eof,
    BadFormat,
    Lib(LibError),
}

impl From<LibError> for DecodeError {
    fn from(e: LibError) -> Self {
        DecodeError::Lib(e)
    }
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lib(e.into())
    }
}

/// A decoder over a byte buffer that also tracks how many Lua stack slots the C version would be using,
/// so that it fails with the same "stack overflow" errors (and bounds recursion to ~4000 levels).
struct Decoder<'a> {
    lua: &'a Lua,
    data: &'a [u8],
    pos: usize,
}

fn stack_overflow(what: &str) -> DecodeError {
    DecodeError::Lib(LibError::Located(format!("stack overflow ({})", what)))
}

impl Decoder<'_> {
    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.data.len() - self.pos < n {
            return Err(DecodeError::Eof);
        }
        Ok(())
    }

    fn be(&self, offset: usize, n: usize) -> u64 {
        self.data[self.pos + offset..self.pos + offset + n].iter().fold(0u64, |a, &b| (a << 8) | u64::from(b))
    }

    fn bytes(&mut self, header: usize, len: usize) -> Result<Value, DecodeError> {
        self.need(header.saturating_add(len))?;
        let start = self.pos + header;
        let s = self.lua.create_string(&self.data[start..start + len])?;
        self.pos = start + len;
        Ok(Value::String(s))
    }

    /// Decode one value; `height` is the emulated Lua stack height before it is pushed.
    fn value(&mut self, height: usize) -> Result<Value, DecodeError> {
        self.need(1)?;
        if height + 1 > LUA_MAX_C_STACK {
            return Err(stack_overflow("too many return values at once; use unpack_one or unpack_limit instead."));
        }
        let c = self.data[self.pos];
        let num = |n: f64| Ok(Value::Number(n));
        match c {
            0xcc | 0xd0 => {
                self.need(2)?;
                let b = self.data[self.pos + 1];
                self.pos += 2;
                num(if c == 0xcc { f64::from(b) } else { f64::from(b as i8) })
            }
            0xcd | 0xd1 => {
                self.need(3)?;
                let v = self.be(1, 2) as u16;
                self.pos += 3;
                num(if c == 0xcd { f64::from(v) } else { f64::from(v as i16) })
            }
            0xce | 0xd2 => {
                self.need(5)?;
                let v = self.be(1, 4) as u32;
                self.pos += 5;
                num(if c == 0xce { f64::from(v) } else { f64::from(v as i32) })
            }
            0xcf | 0xd3 => {
                // Both are pushed through a signed 64-bit integer.
                self.need(9)?;
                let v = self.be(1, 8) as i64;
                self.pos += 9;
                num(v as f64)
            }
            0xc0 | 0xc2 | 0xc3 => {
                self.pos += 1;
                Ok(match c {
                    0xc0 => Value::Nil,
                    0xc2 => Value::Boolean(false),
                    _ => Value::Boolean(true),
                })
            }
            0xca => {
                self.need(5)?;
                let v = f32::from_bits(self.be(1, 4) as u32);
                self.pos += 5;
                num(f64::from(v))
            }
            0xcb => {
                self.need(9)?;
                let v = f64::from_bits(self.be(1, 8));
                self.pos += 9;
                num(v)
            }
            0xd9 => {
                self.need(2)?;
                let len = self.be(1, 1) as usize;
                self.bytes(2, len)
            }
            0xda => {
                self.need(3)?;
                let len = self.be(1, 2) as usize;
                self.bytes(3, len)
            }
            0xdb => {
                self.need(5)?;
                let len = self.be(1, 4) as usize;
                self.bytes(5, len)
            }
            0xdc | 0xde => {
                self.need(3)?;
                let len = self.be(1, 2) as usize;
                self.pos += 3;
                self.container(c == 0xdc, len, height)
            }
            0xdd | 0xdf => {
                self.need(5)?;
                let len = self.be(1, 4) as usize;
                self.pos += 5;
                self.container(c == 0xdd, len, height)
            }
            _ if c & 0x80 == 0 => {
                self.pos += 1;
                num(f64::from(c))
            }
            _ if c & 0xe0 == 0xe0 => {
                self.pos += 1;
                num(f64::from(c as i8))
            }
            _ if c & 0xe0 == 0xa0 => self.bytes(1, usize::from(c & 0x1f)),
            _ if c & 0xf0 == 0x90 || c & 0xf0 == 0x80 => {
                self.pos += 1;
                self.container(c & 0xf0 == 0x90, usize::from(c & 0xf), height)
            }
            _ => Err(DecodeError::BadFormat),
        }
    }

    fn container(&mut self, array: bool, len: usize, height: usize) -> Result<Value, DecodeError> {
        let t = self.lua.create_table()?;
        if array {
            if height + 2 > LUA_MAX_C_STACK {
                return Err(stack_overflow("in function mp_decode_to_lua_array"));
            }
            for i in 1..=len {
                let v = self.value(height + 2)?;
                t.raw_set(i as i64, v)?;
            }
        } else {
            for _ in 0..len {
                let k = self.value(height + 1)?;
                let v = self.value(height + 2)?;
                match &k {
                    Value::Nil => return Err(DecodeError::Lib(LibError::Plain("table index is nil".into()))),
                    Value::Number(n) if n.is_nan() => {
                        return Err(DecodeError::Lib(LibError::Plain("table index is NaN".into())))
                    }
                    _ => {}
                }
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

fn unpack_full(lua: &Lua, args: &Args, limit: i64, offset: i64) -> LibResult<MultiValue> {
    let data = args.check_bytes(lua, 1)?;
    let len = data.len();
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return located(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        ));
    }
    if offset as u64 > len as u64 {
        return located(format!("Start offset {} greater than input length {}.", offset as i32, len as i32));
    }
    let limit = if decode_all { i64::from(i32::MAX) } else { limit };
    // unpack() leaves all its arguments on the stack; unpack_one/unpack_limit keep only the string.
    let base = if decode_all { args.len() } else { 1 };
    let mut d = Decoder { lua, data: &data, pos: offset as usize };
    let mut out = MultiValue::new();
    let mut count: i64 = 0;
    while d.pos < len && count < limit {
        match d.value(base + out.len()) {
            Ok(v) => out.push_back(v),
            Err(DecodeError::Eof) => return located("Missing bytes in input."),
            Err(DecodeError::BadFormat) => return located("Bad data format in input."),
            Err(DecodeError::Lib(e)) => return Err(e),
        }
        count += 1;
    }
    if !decode_all {
        let next = if d.pos == len { -1 } else { d.pos as i64 };
        out.push_front(Value::Integer(next));
    }
    Ok(out)
}

pub(super) fn create(lua: &Lua, builder: &Builder) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    builder.add(lua, &t, "pack", |lua, args| pack(lua, &args))?;
    builder.add(lua, &t, "unpack", |lua, args| unpack_full(lua, &args, 0, 0))?;
    builder.add(lua, &t, "unpack_one", |lua, args| {
        let offset = args.opt_integer(lua, 2, 0)?;
        unpack_full(lua, &args, 1, offset)
    })?;
    builder.add(lua, &t, "unpack_limit", |lua, args| {
        let limit = args.check_integer(lua, 2)?;
        let offset = args.opt_integer(lua, 3, 0)?;
        unpack_full(lua, &args, limit, offset)
    })?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::check_cases;

    #[test]
    fn matches_redis_7_2_6() {
        check_cases(&[
            (r##"H(cmsgpack.pack(1.5,'x',{1,2}))"##, r##"true,"ca3fc00000a178920102""##),
            (
                r##"H(cmsgpack.pack(0, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296))"##,
                r##"true,"007fcc80ccffcd0100cdffffce00010000ceffffffffcf0000000100000000""##,
            ),
            (
                r##"H(cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649))"##,
                r##"true,"ffe0d0dfd080d1ff7fd18000d2ffff7fffd280000000d3ffffffff7fffffff""##,
            ),
            (
                r##"H(cmsgpack.pack(2^53, -2^53, 2^63, -2^63, 2^64, 1e300))"##,
                r##"true,"cf0020000000000000d3ffe0000000000000ca5f000000d38000000000000000ca5f800000cb7e37e43c8800759c""##,
            ),
            (
                r##"H(cmsgpack.pack(0.5, 0.1, -0.0, 1/0, -1/0, 3.4028234663852886e38))"##,
                r##"true,"ca3f000000cb3fb999999999999a00caff800000ca7f800000ca7f7fffff""##,
            ),
            (r##"H(cmsgpack.pack(0/0)):sub(1,2)"##, r##"true,"cb""##),
            (r##"H(cmsgpack.pack(true, false, nil, function() end, cjson.null))"##, r##"true,"c3c2c0c0c0""##),
            (r##"H(cmsgpack.pack(''))"##, r##"true,"a0""##),
            (
                r##"H(cmsgpack.pack(string.rep('a', 31))):sub(1,4), H(cmsgpack.pack(string.rep('a', 32))):sub(1,6), H(cmsgpack.pack(string.rep('a', 255))):sub(1,6), H(cmsgpack.pack(string.rep('a', 256))):sub(1,8), H(cmsgpack.pack(string.rep('a', 65536))):sub(1,12)"##,
                r##"true,"bf61","d92061","d9ff61","da010061","db0001000061""##,
            ),
            (r##"H(cmsgpack.pack({}))"##, r##"true,"90""##),
            (r##"H(cmsgpack.pack({a=1}))"##, r##"true,"81a16101""##),
            (r##"H(cmsgpack.pack({1,2,nil,4}))"##, r##"true,"83010102020404""##),
            (r##"H(cmsgpack.pack({[1]=1,[3]=3}))"##, r##"true,"8201010303""##),
            (r##"H(cmsgpack.pack({[1.5]=1}))"##, r##"true,"81ca3fc0000001""##),
            (r##"H(cmsgpack.pack({[2^31]=1}))"##, r##"true,"81ce8000000001""##),
            (r##"H(cmsgpack.pack({[0]=1}))"##, r##"true,"810001""##),
            (
                r##"H(cmsgpack.pack({1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}))"##,
                r##"true,"dc00100102030405060708090a0b0c0d0e0f10""##,
            ),
            (
                r##"@local t = {} for i = 1, 20 do t['k' .. i] = true end return H(cmsgpack.pack(t)):sub(1, 6)"##,
                r##"true,"de0014""##,
            ),
            (
                r##"@local t = {} for i = 1, 70000 do t[i] = 0 end return H(cmsgpack.pack(t)):sub(1, 12)"##,
                r##"true,"dd0001117000""##,
            ),
            (
                r##"@local t = {} for i = 1, 70000 do t[i] = 0 end t.x = 1 return H(cmsgpack.pack(t)):sub(1, 12)"##,
                r##"true,"df0001117101""##,
            ),
            (
                r##"@local t = {} local c = t for i = 1, 20 do c[1] = {} c = c[1] end return H(cmsgpack.pack(t))"##,
                r##"true,"91919191919191919191919191919191c0""##,
            ),
            (
                r##"@local t = {} t[1] = t return H(cmsgpack.pack(t))"##,
                r##"true,"91919191919191919191919191919191c0""##,
            ),
            (r##"H(cmsgpack.pack({[{}]=1}))"##, r##"true,"819001""##),
            (
                r##"cmsgpack.pack()"##,
                r##"false,"user_script:28: bad argument #0 to 'pack' (MessagePack pack needs input.)""##,
            ),
            (
                r##"cmsgpack.unpack(X('01ff7fcc80cd0100ce00010000cf0000000100000000'))"##,
                r##"true,1,-1,127,128,256,65536,4294967296"##,
            ),
            (
                r##"cmsgpack.unpack(X('e0d080d1ff7fd1ff80d28000000d3ffffffffffffffff'))"##,
                r##"true,-32,-128,-129,-128,-2147483635,63,-1,-1,-1,-1,-1,-1,-1,102"##,
            ),
            (r##"cmsgpack.unpack(X('cfffffffffffffffff'))"##, r##"true,-1"##),
            (r##"cmsgpack.unpack(X('cf8000000000000000'))"##, r##"true,-9.2233720368547758e+18"##),
            (r##"cmsgpack.unpack(X('d38000000000000000'))"##, r##"true,-9.2233720368547758e+18"##),
            (r##"cmsgpack.unpack(X('ca3fc00000cb3ff8000000000000'))"##, r##"true,1.5,1.5"##),
            (r##"cmsgpack.unpack(X('c0c2c3'))"##, r##"true,nil,false,true"##),
            (
                r##"cmsgpack.unpack(X('a3616263d903616263da0003616263db00000003616263'))"##,
                r##"true,"abc","abc","abc","abc""##,
            ),
            (r##"cmsgpack.unpack(X('92010293c0c0c0'))"##, r##"true,{1=1,2=2},{}"##),
            (r##"cmsgpack.unpack(X('82a16101a16202'))"##, r##"true,{"a"=1,"b"=2}"##),
            (r##"cmsgpack.unpack(X('dc000201028101c0'))"##, r##"true,{1=1,2=2},{}"##),
            (r##"cmsgpack.unpack(X('de0001a1610a'))"##, r##"true,{"a"=10}"##),
            (r##"cmsgpack.unpack(X('dd0000000101df00000001c3c2'))"##, r##"true,{1=1},{true=false}"##),
            (r##"cmsgpack.unpack(X('81c001'))"##, r##"false,"table index is nil""##),
            (r##"cmsgpack.unpack(X('81ca7fc0000001'))"##, r##"false,"table index is NaN""##),
            (r##"cmsgpack.unpack(X('c1'))"##, r##"false,"user_script:28: Bad data format in input.""##),
            (r##"cmsgpack.unpack(X('c4'))"##, r##"false,"user_script:28: Bad data format in input.""##),
            (r##"cmsgpack.unpack(X('d4'))"##, r##"false,"user_script:28: Bad data format in input.""##),
            (r##"cmsgpack.unpack(X('a3ab'))"##, r##"false,"user_script:28: Missing bytes in input.""##),
            (r##"cmsgpack.unpack(X('cd01'))"##, r##"false,"user_script:28: Missing bytes in input.""##),
            (r##"cmsgpack.unpack(X('92'))"##, r##"false,"user_script:28: Missing bytes in input.""##),
            (r##"cmsgpack.unpack(X('9201'))"##, r##"false,"user_script:28: Missing bytes in input.""##),
            (r##"cmsgpack.unpack(X('01c1'))"##, r##"false,"user_script:28: Bad data format in input.""##),
            (r##"cmsgpack.unpack(X('db0000000561'))"##, r##"false,"user_script:28: Missing bytes in input.""##),
            (r##"cmsgpack.unpack('')"##, r##"true"##),
            (
                r##"cmsgpack.unpack()"##,
                r##"false,"user_script:28: bad argument #1 to 'unpack' (string expected, got no value)""##,
            ),
            (r##"cmsgpack.unpack(5)"##, r##"true,53"##),
            (
                r##"cmsgpack.unpack({})"##,
                r##"false,"user_script:28: bad argument #1 to 'unpack' (string expected, got table)""##,
            ),
            (r##"cmsgpack.unpack(X('0102'), 'extra')"##, r##"true,1,2"##),
            (r##"cmsgpack.unpack_one(X('010203'))"##, r##"true,1,1"##),
            (r##"cmsgpack.unpack_one(X('010203'), 1)"##, r##"true,2,2"##),
            (r##"cmsgpack.unpack_one(X('010203'), 2)"##, r##"true,-1,3"##),
            (r##"cmsgpack.unpack_one(X('010203'), 3)"##, r##"true,-1"##),
            (
                r##"cmsgpack.unpack_one(X('010203'), 4)"##,
                r##"false,"user_script:28: Start offset 4 greater than input length 3.""##,
            ),
            (
                r##"cmsgpack.unpack_one(X('010203'), -1)"##,
                r##"false,"user_script:28: Invalid request to unpack with offset of -1 and limit of 3.""##,
            ),
            (
                r##"cmsgpack.unpack_one(X('010203'), 'x')"##,
                r##"false,"user_script:28: bad argument #2 to 'unpack_one' (number expected, got string)""##,
            ),
            (r##"cmsgpack.unpack_one('')"##, r##"true,-1"##),
            (r##"cmsgpack.unpack_limit(X('010203'), 2)"##, r##"true,2,1,2"##),
            (r##"cmsgpack.unpack_limit(X('010203'), 2, 2)"##, r##"true,-1,3"##),
            (r##"cmsgpack.unpack_limit(X('010203'), 0)"##, r##"true,1,2,3"##),
            (r##"cmsgpack.unpack_limit(X('010203'), 0, 1)"##, r##"true,1"##),
            (r##"cmsgpack.unpack_limit(X('010203'), 5)"##, r##"true,-1,1,2,3"##),
            (
                r##"cmsgpack.unpack_limit(X('010203'), -1)"##,
                r##"false,"user_script:28: Invalid request to unpack with offset of 0 and limit of 3.""##,
            ),
            (
                r##"cmsgpack.unpack_limit(X('010203'))"##,
                r##"false,"user_script:28: bad argument #2 to 'unpack_limit' (number expected, got no value)""##,
            ),
            (r##"cmsgpack.unpack_limit(X('010203'), 1.7, 1.2)"##, r##"true,2,2"##),
            (
                r##"cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION"##,
                r##"true,"cmsgpack","lua-cmsgpack 0.4.0","Copyright (C) 2012, Salvatore Sanfilippo","MessagePack C implementation for Lua""##,
            ),
            (
                r##"cmsgpack.unpack(cmsgpack.pack({a={b={1,2,{c=true}}}, 'x', 3.25, -7}))"##,
                r##"true,{"a"={"b"={1=1,2=2,3={"c"=true}}},1="x",2=3.25,3=-7}"##,
            ),
            (
                r##"@local s = string.rep(X('91'), 3999) .. '01' local t = cmsgpack.unpack(s) return type(t)"##,
                r##"true,"table""##,
            ),
            (
                r##"@local s = string.rep(X('91'), 4000) .. '01' return pcall(cmsgpack.unpack, s)"##,
                r##"true,false,"stack overflow (in function mp_decode_to_lua_array)""##,
            ),
            (
                r##"@local s = string.rep(X('91'), 5000) .. '01' local ok, e = pcall(cmsgpack.unpack, s) return ok, e"##,
                r##"true,false,"stack overflow (in function mp_decode_to_lua_array)""##,
            ),
            (
                r##"@local s = string.rep(X('81c3'), 3000) .. '01' local ok, e = pcall(cmsgpack.unpack, s) return ok, e"##,
                r##"true,true,{true={true={true={true={true={true={true={true={true={true={true={true={true={true={true={true={true={true={true={true={true={...}}}}}}}}}}}}}}}}}}}}}}"##,
            ),
            (
                r##"@local s = string.rep(X('81c3'), 2665) .. '01' local ok, e = pcall(cmsgpack.unpack, s) return ok, type(e)"##,
                r##"true,true,"table""##,
            ),
            (r##"@local s = string.rep('01', 7998) local r = {cmsgpack.unpack(X(s))} return #r"##, r##"true,7998"##),
            (r##"@local s = string.rep('01', 7999) local r = {cmsgpack.unpack(X(s))} return #r"##, r##"true,7999"##),
            (
                r##"@local s = string.rep('01', 8000) local ok, e = pcall(function() return select('#', cmsgpack.unpack(X(s))) end) return ok, e"##,
                r##"true,false,"user_script:28: stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)""##,
            ),
        ]);
    }
}
