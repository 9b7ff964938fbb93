//! Key specifications (Redis 7's `key_specs`): where a command's keys are in its arguments.
//! They drive the lock plan (which shards to lock) and COMMAND GETKEYS.

use super::eq_ic;
use serde_json::Value as Json;

#[derive(Debug, Clone)]
pub enum Begin {
    Index(i64),
    /// Search for `keyword` from `startfrom` (negative: from the end, backwards).
    Keyword {
        keyword: String,
        startfrom: i64,
    },
    Unknown,
}

#[derive(Debug, Clone)]
pub enum Find {
    Range { lastkey: i64, step: i64, limit: i64 },
    Keynum { keynumidx: i64, firstkey: i64, step: i64 },
    Unknown,
}

/// `KeySpec::acl` bit of a spec whose "keys" are not keys (SSUBSCRIBE's shard channels).
pub const NOT_KEY: u8 = 0x80;

#[derive(Debug, Clone)]
pub struct KeySpec {
    pub begin: Begin,
    pub find: Find,
    pub flags: Vec<String>,
    /// The ACL permission the keys need: read (1) for ACCESS, write (2) for INSERT, DELETE or
    /// UPDATE (Redis's `ACLSelectorCheckKey`); `NOT_KEY` (a shard channel) is no key to ACL.
    pub acl: u8,
}

impl KeySpec {
    pub fn from_json(j: &Json) -> KeySpec {
        let bs = &j["begin_search"];
        let begin = if let Some(i) = bs.get("index") {
            Begin::Index(i["pos"].as_i64().unwrap_or(0))
        } else if let Some(k) = bs.get("keyword") {
            Begin::Keyword {
                keyword: k["keyword"].as_str().unwrap_or("").to_string(),
                startfrom: k["startfrom"].as_i64().unwrap_or(0),
            }
        } else {
            Begin::Unknown
        };
        let fk = &j["find_keys"];
        let find = if let Some(r) = fk.get("range") {
            Find::Range {
                lastkey: r["lastkey"].as_i64().unwrap_or(0),
                step: r["step"].as_i64().unwrap_or(1),
                limit: r["limit"].as_i64().unwrap_or(0),
            }
        } else if let Some(k) = fk.get("keynum") {
            Find::Keynum {
                keynumidx: k["keynumidx"].as_i64().unwrap_or(0),
                firstkey: k["firstkey"].as_i64().unwrap_or(1),
                step: k["step"].as_i64().unwrap_or(1),
            }
        } else {
            Find::Unknown
        };
        let flags: Vec<String> = j["flags"]
            .as_array()
            .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let has = |f: &str| flags.iter().any(|x: &String| x == f);
        let acl = u8::from(has("ACCESS"))
            | (u8::from(has("INSERT") || has("DELETE") || has("UPDATE")) << 1)
            | (u8::from(has("NOT_KEY")) * NOT_KEY);
        KeySpec { begin, find, flags, acl }
    }
}

/// Why keys could not be found: the command's own argument error.
#[derive(Debug, PartialEq)]
pub enum KeysError {
    /// A keynum argument that is not a number or is out of range.
    BadNumKeys,
}

/// Collects the argument indexes of keys (Redis's `getKeysUsingKeySpecs`). Positions past the
/// end of the arguments are ignored: the command itself will report the syntax error.
pub fn key_positions(specs: &[KeySpec], args: &[&[u8]], out: &mut impl Extend<usize>) -> Result<(), KeysError> {
    key_positions_with(specs, args, |i, _| out.extend(std::iter::once(i))).map(|_| ())
}

/// `key_positions`, telling `found` each key's position and the spec that found it. `Ok(false)`:
/// a spec's keys run past the arguments (Redis then finds the keys another way, which for such
/// a malformed request finds none).
pub fn key_positions_with(
    specs: &[KeySpec],
    args: &[&[u8]],
    mut found: impl FnMut(usize, &KeySpec),
) -> Result<bool, KeysError> {
    let argc = args.len() as i64;
    let mut complete = true;
    for spec in specs {
        let first = match &spec.begin {
            Begin::Index(p) => *p,
            Begin::Keyword { keyword, startfrom } => {
                let (start, end, dir): (i64, i64, i64) =
                    if *startfrom >= 0 { (*startfrom, argc, 1) } else { (argc + startfrom, 0, -1) };
                let mut i = start;
                let mut found = None;
                while (dir > 0 && i < end) || (dir < 0 && i > end) {
                    if i >= 0 && i < argc && eq_ic(args[i as usize], keyword) {
                        found = Some(i + 1);
                        break;
                    }
                    i += dir;
                }
                match found {
                    Some(f) => f,
                    None => continue,
                }
            }
            Begin::Unknown => continue,
        };
        if first >= argc || first < 0 {
            continue;
        }
        let (first, last, step) = match &spec.find {
            Find::Range { lastkey, step, limit } => {
                let last = if *lastkey >= 0 {
                    first + lastkey
                } else if *limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (first, last, *step)
            }
            Find::Keynum { keynumidx, firstkey, step } => {
                let idx = first + keynumidx;
                if idx >= argc {
                    continue;
                }
                let n = crate::protocol::parse_i64(args[idx as usize]).ok_or(KeysError::BadNumKeys)?;
                if n < 0 || n > argc {
                    return Err(KeysError::BadNumKeys);
                }
                let f = first + firstkey;
                (f, f + (n - 1) * step, *step)
            }
            Find::Unknown => continue,
        };
        if step <= 0 {
            continue;
        }
        if last >= argc || last < first {
            complete = false;
        }
        let mut i = first;
        while i <= last && i < argc {
            found(i as usize, spec);
            i += step;
        }
    }
    Ok(complete)
}

/// SET's key is read as well as written when GET is among its options (Redis's setGetKeys:
/// the key spec's VARIABLE_FLAGS).
pub fn set_reads_its_key(argv: &[&[u8]]) -> bool {
    argv.iter().skip(3).any(|a| eq_ic(a, "get"))
}

/// BITFIELD only reads its key when GET (and OVERFLOW) subcommands are all that follow; a
/// SET, an INCRBY or a syntax error makes it a write (Redis's bitfieldGetKeys).
pub fn bitfield_is_readonly(argv: &[&[u8]]) -> bool {
    let mut i = 2;
    while i < argv.len() {
        let rem = argv.len() - i - 1;
        if eq_ic(argv[i], "get") && rem >= 2 {
            i += 2;
        } else if eq_ic(argv[i], "overflow") && rem >= 1 {
            i += 1;
        } else {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(j: &str) -> Vec<KeySpec> {
        let v: Json = serde_json::from_str(j).unwrap();
        v.as_array().unwrap().iter().map(KeySpec::from_json).collect()
    }

    #[test]
    fn range_and_keynum() {
        let mset =
            specs(r#"[{"begin_search":{"index":{"pos":1}},"find_keys":{"range":{"lastkey":-1,"step":2,"limit":0}}}]"#);
        let args: Vec<&[u8]> = vec![b"MSET", b"a", b"1", b"b", b"2"];
        let mut out = vec![];
        key_positions(&mset, &args, &mut out).unwrap();
        assert_eq!(out, vec![1, 3]);
        let lcs =
            specs(r#"[{"begin_search":{"index":{"pos":1}},"find_keys":{"range":{"lastkey":1,"step":1,"limit":0}}}]"#);
        out.clear();
        key_positions(&lcs, &[b"LCS", b"a", b"b"], &mut out).unwrap();
        assert_eq!(out, vec![1, 2]);
        let keynum = specs(
            r#"[{"begin_search":{"index":{"pos":2}},"find_keys":{"keynum":{"keynumidx":0,"firstkey":1,"step":1}}}]"#,
        );
        out.clear();
        key_positions(&keynum, &[b"ZUNION", b"2", b"a", b"b", b"WEIGHTS"], &mut out).unwrap_err();
        out.clear();
        key_positions(&keynum, &[b"EVAL", b"s", b"2", b"a", b"b", b"x"], &mut out).unwrap();
        assert_eq!(out, vec![3, 4]);
        let kw = specs(
            r#"[{"begin_search":{"keyword":{"keyword":"STORE","startfrom":1}},"find_keys":{"range":{"lastkey":0,"step":1,"limit":0}}}]"#,
        );
        out.clear();
        key_positions(&kw, &[b"SORT", b"k", b"store", b"dst"], &mut out).unwrap();
        assert_eq!(out, vec![3]);
    }
}
