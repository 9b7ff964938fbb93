//! Differential tests (DESIGN §3): the same commands go to a real redis-server and to Atoll,
//! and the replies are compared byte for byte, in RESP2 and RESP3.
//!
//! * Case files `tests/cases/*.txt`: one command per line (redis-cli quoting), `#` comments,
//!   a blank line between independent cases (every DB is flushed between cases). Directives:
//!   `sort: ` compares an aggregate reply as a sorted multiset, `ttl: ` compares integers with a
//!   ±2 tolerance, `any: ` compares only the reply's type (its first byte: for what differs by
//!   chance, SCAN's cursor, RANDOMKEY's key …). A line starting `@N ` (N = 1…9) goes to the
//!   case's N-th extra connection (made on first use, closed when the case ends), so Pub/Sub,
//!   notifications and tracking can be checked across clients; `read:` alone sends nothing
//!   and compares the next message that connection receives (a line that sends compares its
//!   first reply only); `send: ` sends without reading (CLIENT REPLY OFF). An argument
//!   `$id@N` stands for connection N's CLIENT ID on each server (CLIENT TRACKING … REDIRECT).
//! * `tests/known_differences.txt`: where Atoll answers differently from Redis 7.2 on purpose
//!   (the oracle is Redis 7.2.6 itself, `common::redis_bin`).
//! * A seeded random command generator over the same commands and their error cases.
//!   `ATOLL_DIFF_SEED=n` reruns one seed.

mod common;
use common::*;
use std::collections::HashMap;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Exact,
    Sort,
    Ttl,
    Any,
    /// Send nothing; compare the next reply or message that arrives.
    Read,
    /// Send without reading (a command that does not reply: CLIENT REPLY OFF).
    Send,
}

struct Line {
    /// 0: the case's main connection; N: its N-th extra one.
    conn: usize,
    mode: Mode,
    args: Vec<Vec<u8>>,
    text: String,
    origin: String,
}

fn parse_cases(path: &std::path::Path) -> Vec<Vec<Line>> {
    let content = std::fs::read_to_string(path).unwrap();
    let mut cases = vec![Vec::new()];
    for (n, raw) in content.lines().enumerate() {
        let t = raw.trim();
        if t.is_empty() {
            if !cases.last().unwrap().is_empty() {
                cases.push(Vec::new());
            }
            continue;
        }
        if t.starts_with('#') {
            continue;
        }
        let (conn, t) = match t.strip_prefix('@').and_then(|r| r.split_once(' ')) {
            Some((n, rest)) => (n.parse::<usize>().expect("@N connection number"), rest.trim()),
            None => (0, t),
        };
        let (mode, rest) = if t == "read:" {
            (Mode::Read, "")
        } else if let Some(r) = t.strip_prefix("send:") {
            (Mode::Send, r.trim())
        } else if let Some(r) = t.strip_prefix("sort:") {
            (Mode::Sort, r.trim())
        } else if let Some(r) = t.strip_prefix("ttl:") {
            (Mode::Ttl, r.trim())
        } else if let Some(r) = t.strip_prefix("any:") {
            (Mode::Any, r.trim())
        } else {
            (Mode::Exact, t)
        };
        let mut args = Vec::new();
        assert!(
            atoll::protocol::parser::split_args(rest.as_bytes(), &mut args),
            "{}:{}: bad quoting",
            path.display(),
            n + 1
        );
        cases.last_mut().unwrap().push(Line {
            conn,
            mode,
            args,
            text: rest.to_string(),
            origin: format!("{}:{}", path.file_name().unwrap().to_string_lossy(), n + 1),
        });
    }
    cases.retain(|c| !c.is_empty());
    cases
}

/// Unescapes `\r \n \t \\ \xHH` in the known-differences file.
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'\\' => out.push(b'\\'),
                b'x' => {
                    out.push(u8::from_str_radix(&s[i + 2..i + 4], 16).unwrap());
                    i += 2;
                }
                c => out.push(c),
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// (case file or "*", command text, protocol) → the reply Redis 7.2 gives. An entry written
/// `sets.txt: OBJECT ENCODING d` applies to that case file only.
type Known = HashMap<(String, String, u8), Vec<u8>>;

fn known_differences() -> Known {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/known_differences.txt");
    let mut map = HashMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split('\t').collect();
        assert_eq!(parts.len(), 3, "known_differences.txt: command<TAB>resp2<TAB>resp3: {line}");
        let (file, cmd) = match parts[0].split_once(".txt: ") {
            Some((f, c)) => (format!("{f}.txt"), c.to_string()),
            None => ("*".to_string(), parts[0].to_string()),
        };
        map.insert((file.clone(), cmd.clone(), 2), unescape(parts[1]));
        map.insert((file, cmd, 3), unescape(parts[2]));
    }
    map
}

fn normalise(mode: Mode, reply: &[u8]) -> Vec<u8> {
    match mode {
        Mode::Sort => match split_aggregate(reply) {
            Some((hdr, mut elems)) => {
                elems.sort();
                let mut out = hdr;
                for e in elems {
                    out.extend(e);
                }
                out
            }
            None => reply.to_vec(),
        },
        _ => reply.to_vec(),
    }
}

fn ttl_close(a: &[u8], b: &[u8]) -> bool {
    let parse = |x: &[u8]| -> Option<i64> {
        if x.first() == Some(&b':') {
            std::str::from_utf8(&x[1..x.len() - 2]).ok()?.parse().ok()
        } else {
            None
        }
    };
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => (x - y).abs() <= 2 || ((x - y).abs() <= 2000 && x > 1000 && y > 1000),
        _ => a == b,
    }
}

struct Pair {
    redis: RawConn,
    atoll: RawConn,
    /// The case's extra connections (`@N` lines), to each server.
    extra: Vec<Option<(RawConn, RawConn)>>,
    ports: (u16, u16),
    proto: u8,
    /// CLIENT ID of each extra connection on (redis, atoll), for `$id@N`.
    ids: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Pair {
    /// Connection `n` of the case to each server (0: the main one).
    fn conns(&mut self, n: usize) -> (&mut RawConn, &mut RawConn) {
        if n == 0 {
            return (&mut self.redis, &mut self.atoll);
        }
        if self.extra.len() < n {
            self.extra.resize_with(n, || None);
        }
        let (ports, proto) = (self.ports, self.proto);
        if self.ids.len() < n {
            self.ids.resize(n, Default::default());
        }
        let ids = &mut self.ids[n - 1];
        let slot = self.extra[n - 1].get_or_insert_with(|| {
            let mut c = (RawConn::connect(ports.0), RawConn::connect(ports.1));
            for x in [&mut c.0, &mut c.1] {
                let r = x.cmd(&[b"HELLO", proto.to_string().as_bytes()]);
                assert!(!r.starts_with(b"-"), "HELLO failed: {}", show(&r));
            }
            // `:<id>\r\n`
            let id = |r: Vec<u8>| r[1..r.len() - 2].to_vec();
            *ids = (id(c.0.cmd(&[b"CLIENT", b"ID"])), id(c.1.cmd(&[b"CLIENT", b"ID"])));
            c
        });
        (&mut slot.0, &mut slot.1)
    }

    fn reset(&mut self, proto: u8) {
        self.extra.clear();
        self.ids.clear();
        self.proto = proto;
        for c in [&mut self.redis, &mut self.atoll] {
            // Out of Pub/Sub mode, should the last case have left the connection there.
            assert_eq!(c.cmd(&[b"RESET"]), b"+RESET\r\n");
            let r = c.cmd(&[b"HELLO", proto.to_string().as_bytes()]);
            assert!(!r.starts_with(b"-"), "HELLO failed: {}", show(&r));
            let r = c.cmd(&[b"FLUSHALL"]);
            assert_eq!(r, b"+OK\r\n");
            // Scripts and function libraries are server state too.
            assert_eq!(c.cmd(&[b"SCRIPT", b"FLUSH"]), b"+OK\r\n");
            assert_eq!(c.cmd(&[b"FUNCTION", b"FLUSH"]), b"+OK\r\n");
            // ACL users other than `default` go, with the ACL log.
            let users = c.cmd(&[b"ACL", b"USERS"]);
            for name in
                String::from_utf8_lossy(&users).split("\r\n").filter(|l| !l.is_empty() && !l.starts_with(['*', '$']))
            {
                if name != "default" {
                    c.cmd(&[b"ACL", b"DELUSER", name.as_bytes()]);
                }
            }
            c.cmd(&[b"ACL", b"SETUSER", b"default", b"reset", b"on", b"nopass", b"~*", b"&*", b"+@all"]);
            assert_eq!(c.cmd(&[b"ACL", b"LOG", b"RESET"]), b"+OK\r\n");
            // Keyspace notifications are off unless a case turns them on.
            assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"notify-keyspace-events", b""]), b"+OK\r\n");
            let r = c.cmd(&[b"SELECT", b"0"]);
            assert_eq!(r, b"+OK\r\n");
        }
    }

    /// Sends one command to both on connection `conn`; returns a mismatch description.
    #[allow(clippy::too_many_arguments)]
    fn check(
        &mut self,
        mode: Mode,
        args: &[Vec<u8>],
        text: &str,
        file: &str,
        proto: u8,
        known: &Known,
        conn: usize,
    ) -> Option<String> {
        // `$id@N`: each server's id of connection N (made now if it is not yet).
        let mut per = (args.to_vec(), args.to_vec());
        for (i, a) in args.iter().enumerate() {
            if let Some(n) = a.strip_prefix(b"$id@").and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok()) {
                self.conns(n);
                per.0[i] = self.ids[n - 1].0.clone();
                per.1[i] = self.ids[n - 1].1.clone();
            }
        }
        let (redis, atoll) = self.conns(conn);
        if mode == Mode::Read {
            let wait = std::time::Duration::from_millis(1500);
            let r = redis.try_read_reply(wait).unwrap_or_else(|| b"(nothing)".to_vec());
            let a = atoll.try_read_reply(wait).unwrap_or_else(|| b"(nothing)".to_vec());
            return (r != a)
                .then(|| format!("RESP{proto} @{conn} read\n   redis: {}\n   atoll: {}", show(&r), show(&a)));
        }
        redis.send(&per.0);
        atoll.send(&per.1);
        if mode == Mode::Send {
            return None;
        }
        let r = redis.read_reply();
        let a = atoll.read_reply();
        let expected = known
            .get(&(file.to_string(), text.to_string(), proto))
            .or_else(|| known.get(&("*".to_string(), text.to_string(), proto)))
            .cloned()
            .unwrap_or(r);
        if same_reply(mode, &expected, &a) {
            None
        } else {
            Some(format!("RESP{proto} `{text}`\n   redis: {}\n   atoll: {}", show(&expected), show(&a)))
        }
    }
}

/// Whether Atoll's reply `a` matches the expected one under the line's comparison mode.
fn same_reply(mode: Mode, expected: &[u8], a: &[u8]) -> bool {
    match mode {
        // Nondeterministic content (SCAN's cursor, RANDOMKEY …): the reply's type at least.
        Mode::Any => expected.first() == a.first(),
        Mode::Ttl => ttl_close(expected, a),
        m => normalise(m, expected) == normalise(m, a),
    }
}

fn start_pair() -> (ServerProc, ServerProc, Pair) {
    pair_with(start_redis(&[]))
}

/// Atoll beside `oracle` (Redis 7.2.6, or Valkey 9.1.2 for what came after 7.2).
fn pair_with(oracle: ServerProc) -> (ServerProc, ServerProc, Pair) {
    let atoll = start_atoll(&["--enable-debug-command", "yes"]);
    let pair = Pair {
        redis: RawConn::connect(oracle.port),
        atoll: RawConn::connect(atoll.port),
        extra: Vec::new(),
        ports: (oracle.port, atoll.port),
        proto: 2,
        ids: Vec::new(),
    };
    (oracle, atoll, pair)
}

#[test]
fn case_files_match_redis() {
    let (_r, _a, mut pair) = start_pair();
    run_case_files(&mut pair, "tests/cases");
}

/// The commands Redis 7.2 lacks, against Valkey 9.1.2 (`tests/cases/valkey/*.txt`).
#[test]
fn case_files_beyond_72_match_valkey() {
    let (_v, _a, mut pair) = pair_with(start_valkey(&[]));
    run_case_files(&mut pair, "tests/cases/valkey");
}

/// The facts of the commands Redis 7.2 lacks (arity, flags, ACL categories, tips, key specs),
/// as COMMAND INFO gives them in RESP2, against Valkey 9.1.2. (In RESP3 Valkey sends empty
/// tips and subcommands as arrays where Redis 7.2, and Atoll with it, send sets.)
#[test]
fn facts_of_commands_beyond_72_match_valkey() {
    let (_v, _a, mut pair) = pair_with(start_valkey(&[]));
    for name in [
        "delifeq",
        "msetex",
        "script|show",
        "hgetdel",
        "commandlog",
        "commandlog|get",
        "commandlog|len",
        "commandlog|reset",
        "commandlog|help",
        "client|capa",
        "hexpire",
        "hpexpire",
        "hexpireat",
        "hpexpireat",
        "httl",
        "hpttl",
        "hexpiretime",
        "hpexpiretime",
        "hpersist",
        "hgetex",
        "hsetex",
    ] {
        let cmd: &[&[u8]] = &[b"COMMAND", b"INFO", name.as_bytes()];
        let (v, a) = (pair.redis.cmd(cmd), pair.atoll.cmd(cmd));
        assert_eq!(show(&a), show(&v), "COMMAND INFO {name}: Atoll (left) against Valkey 9.1.2 (right)");
    }
}

fn run_case_files(pair: &mut Pair, folder: &str) {
    let known = known_differences();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let only = std::env::var("ATOLL_DIFF_FILE").ok();
    let mut failures = Vec::new();
    let mut checked = 0;
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "txt")) {
        if only.as_ref().is_some_and(|o| !f.to_string_lossy().contains(o.as_str())) {
            continue;
        }
        let fname = f.file_name().unwrap().to_string_lossy().to_string();
        for case in parse_cases(f) {
            for proto in [2u8, 3] {
                pair.reset(proto);
                for line in &case {
                    checked += 1;
                    if let Some(m) = pair.check(line.mode, &line.args, &line.text, &fname, proto, &known, line.conn) {
                        failures.push(format!("{}: {}", line.origin, m));
                    }
                }
            }
        }
    }
    assert!(checked > 0, "no differential cases found in {}", dir.display());
    println!("differential: {checked} replies compared");
    assert!(failures.is_empty(), "{} of {checked} replies differ:\n{}", failures.len(), failures.join("\n"));
}

/// A small deterministic PRNG (xorshift64*), so a seed reproduces a stream exactly.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len())]
    }
}

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "{t}a", "{t}b", "nokey"];
const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "42",
    "007",
    "9223372036854775807",
    "-9223372036854775808",
    "3.14",
    "-0.5",
    "1e3",
    "abc",
    "hello world",
    "\u{0}\u{ff}",
    "inf",
    "nan",
    " 1",
];
const INTS: &[&str] =
    &["0", "1", "-1", "5", "-3", "100", "9223372036854775807", "-9223372036854775808", "x", "1.5", ""];
const FLOATS: &[&str] = &["0", "1.5", "-2.25", "0.1", "1e2", "abc", "inf", "-inf", "1e308", "3"];

/// One random command over the string and keyspace families (deterministic replies only).
fn random_command(r: &mut Rng) -> (Mode, Vec<String>) {
    let k = |r: &mut Rng| r.pick(KEYS).to_string();
    let v = |r: &mut Rng| r.pick(VALUES).to_string();
    let i = |r: &mut Rng| r.pick(INTS).to_string();
    let small = |r: &mut Rng| (r.below(40) as i64 - 10).to_string();
    let mut mode = Mode::Exact;
    let cmd: Vec<String> = match r.below(80) {
        0 | 1 => vec!["SET".into(), k(r), v(r)],
        2 => {
            let mut c = vec!["SET".into(), k(r), v(r)];
            for _ in 0..r.below(3) {
                match r.below(8) {
                    0 => c.push("NX".into()),
                    1 => c.push("XX".into()),
                    2 => c.push("GET".into()),
                    3 => c.extend(["EX".into(), i(r)]),
                    4 => c.extend(["PX".into(), "100000".into()]),
                    5 => c.push("KEEPTTL".into()),
                    6 => c.extend(["EXAT".into(), "99999999999".into()]),
                    _ => c.push("BOGUS".into()),
                }
            }
            c
        }
        3 | 4 => vec!["GET".into(), k(r)],
        5 => vec!["DEL".into(), k(r), k(r)],
        6 => vec!["EXISTS".into(), k(r), k(r), k(r)],
        7 => vec!["INCR".into(), k(r)],
        8 => vec!["INCRBY".into(), k(r), i(r)],
        9 => vec!["DECRBY".into(), k(r), i(r)],
        10 => vec!["APPEND".into(), k(r), v(r)],
        11 => vec!["STRLEN".into(), k(r)],
        12 => vec!["GETRANGE".into(), k(r), small(r), small(r)],
        13 => vec!["SETRANGE".into(), k(r), r.below(20).to_string(), v(r)],
        14 => vec!["MSET".into(), k(r), v(r), k(r), v(r)],
        15 => vec!["MGET".into(), k(r), k(r), k(r)],
        16 => vec!["MSETNX".into(), k(r), v(r), k(r), v(r)],
        17 => vec!["SETNX".into(), k(r), v(r)],
        18 => vec!["GETSET".into(), k(r), v(r)],
        19 => vec!["GETDEL".into(), k(r)],
        20 => {
            mode = Mode::Ttl;
            vec!["TTL".into(), k(r)]
        }
        21 => vec![
            "EXPIRE".into(),
            k(r),
            (1000 + r.below(5000)).to_string(),
            r.pick(&["NX", "XX", "GT", "LT", "", "NX"]).to_string(),
        ],
        22 => vec!["PERSIST".into(), k(r)],
        23 => vec!["TYPE".into(), k(r)],
        24 => vec!["RENAME".into(), k(r), k(r)],
        25 => vec!["RENAMENX".into(), k(r), k(r)],
        26 => vec!["COPY".into(), k(r), k(r), r.pick(&["REPLACE", ""]).to_string()],
        27 => vec!["INCRBYFLOAT".into(), k(r), r.pick(FLOATS).to_string()],
        28 => vec!["SETBIT".into(), k(r), r.below(64).to_string(), r.pick(&["0", "1", "2"]).to_string()],
        29 => vec!["GETBIT".into(), k(r), r.below(64).to_string()],
        30 => vec!["BITCOUNT".into(), k(r), small(r), small(r)],
        31 => vec!["BITPOS".into(), k(r), r.pick(&["0", "1"]).to_string()],
        32 => vec!["BITOP".into(), r.pick(&["AND", "OR", "XOR", "NOT"]).to_string(), k(r), k(r)],
        33 => vec!["LCS".into(), k(r), k(r)],
        34 => {
            mode = Mode::Sort;
            vec!["KEYS".into(), r.pick(&["*", "k*", "{t}*", "?0"]).to_string()]
        }
        35 => vec!["DBSIZE".into()],
        36 => vec!["TOUCH".into(), k(r), k(r)],
        37 => {
            vec!["OBJECT".into(), "ENCODING".into(), k(r)]
        }
        38 => vec!["GETEX".into(), k(r), r.pick(&["PERSIST", "EX", ""]).to_string(), "1000".into()],
        39 => vec!["DECR".into(), k(r)],
        _ => return random_type_command(r),
    };
    (mode, cmd)
}

const MEMBERS: &[&str] = &["a", "b", "c", "d", "1", "2", "10", "-5", "", "long-member-name-xx"];
/// Scores that print the same in Redis 7.0 and 7.2 (integers and halves).
const SCORES: &[&str] = &["0", "1", "-1", "1.5", "2", "-2.5", "10", "+inf", "-inf", "3", "x"];

/// One random command over lists, hashes, sets and sorted sets, on the same keys as the string
/// commands (so WRONGTYPE comes up naturally). Unordered replies are compared sorted.
fn random_type_command(r: &mut Rng) -> (Mode, Vec<String>) {
    let k = |r: &mut Rng| r.pick(KEYS).to_string();
    let m = |r: &mut Rng| r.pick(MEMBERS).to_string();
    let sc = |r: &mut Rng| r.pick(SCORES).to_string();
    let idx = |r: &mut Rng| (r.below(12) as i64 - 6).to_string();
    let mut mode = Mode::Exact;
    let cmd: Vec<String> = match r.below(50) {
        40 => vec!["PFADD".into(), k(r), m(r), m(r)],
        41 => vec!["PFCOUNT".into(), k(r), k(r)],
        42 => vec!["PFMERGE".into(), k(r), k(r)],
        43 => vec!["XADD".into(), k(r), r.pick(&["1-1", "2-0", "2-5", "7-1", "0-0", "x"]).into(), "f".into(), m(r)],
        44 => vec!["XRANGE".into(), k(r), "-".into(), "+".into()],
        45 => vec![r.pick(&["XLEN", "PFCOUNT", "LLEN"]).into(), k(r)],
        46 => vec!["XDEL".into(), k(r), r.pick(&["1-1", "2-0", "7-1"]).into()],
        47 => vec![
            "GEOADD".into(),
            k(r),
            r.pick(&["13.361389", "15.087269", "2.35", "200"]).into(),
            r.pick(&["38.115556", "37.502669", "48.85"]).into(),
            m(r),
        ],
        48 => vec!["GEODIST".into(), k(r), m(r), m(r), r.pick(&["m", "km", "mi"]).into()],
        49 => vec!["GEOHASH".into(), k(r), m(r), m(r)],
        0 | 1 => vec![r.pick(&["LPUSH", "RPUSH"]).into(), k(r), m(r), m(r)],
        2 => vec![r.pick(&["LPOP", "RPOP"]).into(), k(r)],
        3 => vec![r.pick(&["LPOP", "RPOP"]).into(), k(r), r.below(4).to_string()],
        4 => vec!["LRANGE".into(), k(r), idx(r), idx(r)],
        5 => vec!["LINDEX".into(), k(r), idx(r)],
        6 => vec!["LSET".into(), k(r), idx(r), m(r)],
        7 => vec!["LINSERT".into(), k(r), r.pick(&["BEFORE", "AFTER"]).into(), m(r), m(r)],
        8 => vec!["LREM".into(), k(r), idx(r), m(r)],
        9 => vec!["LTRIM".into(), k(r), idx(r), idx(r)],
        10 => {
            vec!["LPOS".into(), k(r), m(r), "RANK".into(), r.pick(&["1", "-1", "2"]).into(), "COUNT".into(), "0".into()]
        }
        11 => vec!["LMOVE".into(), k(r), k(r), r.pick(&["LEFT", "RIGHT"]).into(), r.pick(&["LEFT", "RIGHT"]).into()],
        12 => vec!["LLEN".into(), k(r)],
        13 | 14 => vec!["HSET".into(), k(r), m(r), m(r)],
        15 => vec!["HGET".into(), k(r), m(r)],
        16 => vec!["HDEL".into(), k(r), m(r), m(r)],
        17 => vec!["HINCRBY".into(), k(r), m(r), idx(r)],
        18 => vec!["HINCRBYFLOAT".into(), k(r), m(r), r.pick(&["0.5", "-1.25", "3", "x"]).into()],
        19 => vec!["HMGET".into(), k(r), m(r), m(r)],
        20 => {
            mode = Mode::Sort;
            vec![r.pick(&["HGETALL", "HKEYS", "HVALS"]).into(), k(r)]
        }
        21 => vec![r.pick(&["HLEN", "SCARD", "ZCARD"]).into(), k(r)],
        22 | 23 => vec!["SADD".into(), k(r), m(r), m(r)],
        24 => vec!["SREM".into(), k(r), m(r)],
        25 => vec!["SISMEMBER".into(), k(r), m(r)],
        26 => {
            mode = Mode::Sort;
            vec![r.pick(&["SMEMBERS", "SINTER", "SUNION", "SDIFF"]).into(), k(r), k(r)]
        }
        27 => vec![r.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]).into(), k(r), k(r), k(r)],
        28 => vec!["SMOVE".into(), k(r), k(r), m(r)],
        29 | 30 => {
            let mut c = vec!["ZADD".into(), k(r)];
            for _ in 0..r.below(2) {
                c.push(r.pick(&["NX", "XX", "GT", "LT", "CH"]).into());
            }
            c.extend([sc(r), m(r)]);
            c
        }
        31 => vec!["ZINCRBY".into(), k(r), r.pick(&["1", "-0.5", "2"]).into(), m(r)],
        32 => vec!["ZSCORE".into(), k(r), m(r)],
        33 => vec!["ZRANGE".into(), k(r), idx(r), idx(r), "WITHSCORES".into()],
        34 => vec!["ZRANGEBYSCORE".into(), k(r), sc(r), sc(r)],
        35 => vec![r.pick(&["ZRANK", "ZREVRANK"]).into(), k(r), m(r)],
        36 => vec!["ZREM".into(), k(r), m(r)],
        37 => vec![r.pick(&["ZPOPMIN", "ZPOPMAX"]).into(), k(r)],
        38 => vec!["ZCOUNT".into(), k(r), sc(r), sc(r)],
        _ => vec!["ZUNIONSTORE".into(), k(r), "2".into(), k(r), k(r)],
    };
    (mode, cmd)
}

/// A generated command's arguments, without the empty placeholder options the generators may
/// produce.
fn to_args(cmd: &[String]) -> Vec<Vec<u8>> {
    cmd.iter().enumerate().filter(|(j, a)| *j < 3 || !a.is_empty()).map(|(_, a)| a.clone().into_bytes()).collect()
}

#[test]
fn seeded_random_streams_match_redis() {
    let (_r, _a, mut pair) = start_pair();
    let known = known_differences();
    let seeds: Vec<u64> = match std::env::var("ATOLL_DIFF_SEED") {
        Ok(s) => vec![s.parse().expect("ATOLL_DIFF_SEED is a number")],
        Err(_) => (1..=8).collect(),
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for seed in seeds {
        let proto = if seed % 2 == 0 { 3 } else { 2 };
        pair.reset(proto);
        let mut rng = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
        for step in 0..1500 {
            let (mode, cmd) = random_command(&mut rng);
            let args = to_args(&cmd);
            let text = cmd.join(" ");
            checked += 1;
            if let Some(m) = pair.check(mode, &args, &text, "random", proto, &known, 0) {
                failures.push(format!("seed {seed} step {step}: {m}"));
                if failures.len() > 30 {
                    break;
                }
            }
        }
    }
    println!("random differential: {checked} replies compared");
    assert!(failures.is_empty(), "{} of {checked} replies differ:\n{}", failures.len(), failures.join("\n"));
}

/// A random command among those Redis 7.2 lacks and the hash commands they mix with, for
/// `seeded_random_streams_beyond_72_match_valkey`. Deadlines are far away or already past
/// (where Atoll and Valkey agree to the byte; see `tests/known_differences.txt` for a field
/// that passes its deadline between commands), times are compared as absolute ones.
fn random_beyond72_command(r: &mut Rng) -> (Mode, Vec<String>) {
    let k = |r: &mut Rng| r.pick(&["h0", "h1", "s0", "nokey"]).to_string();
    let f = |r: &mut Rng| r.pick(&["a", "b", "c", "d", "zz"]).to_string();
    let v = |r: &mut Rng| r.pick(&["1", "2", "x", "10", ""]).to_string();
    let when = |r: &mut Rng| r.pick(&["4102444800000", "4102444900000", "1", "0"]).to_string();
    let cond = |r: &mut Rng| r.pick(&["", "NX", "XX", "GT", "LT", "XX GT"]).to_string();
    let fields = |r: &mut Rng, per: usize| {
        let n = 1 + r.below(3);
        let mut out = vec!["FIELDS".to_string(), n.to_string()];
        for _ in 0..n {
            out.push(r.pick(&["a", "b", "c", "d", "zz"]).to_string());
            if per == 2 {
                out.push(r.pick(&["1", "2", "x"]).to_string());
            }
        }
        out
    };
    let mut mode = Mode::Exact;
    let split = |s: String| s.split(' ').filter(|w| !w.is_empty()).map(String::from).collect::<Vec<_>>();
    let cmd: Vec<String> = match r.below(22) {
        0..=2 => vec!["HSET".into(), k(r), f(r), v(r), f(r), v(r)],
        3 => vec!["HGET".into(), k(r), f(r)],
        4 => vec!["HDEL".into(), k(r), f(r), f(r)],
        5 => vec!["HLEN".into(), k(r)],
        6 => {
            mode = Mode::Sort;
            vec!["HGETALL".into(), k(r)]
        }
        7 => vec!["HINCRBY".into(), k(r), f(r), r.pick(&["1", "-2", "x"]).to_string()],
        8 | 9 => {
            let mut c = vec![r.pick(&["HPEXPIREAT", "HEXPIREAT"]).to_string(), k(r), when(r)];
            c.extend(split(cond(r)));
            c.extend(fields(r, 1));
            c
        }
        10 => {
            let mut c = vec!["HEXPIRE".into(), k(r), r.pick(&["0", "-1", "x"]).to_string()];
            c.extend(fields(r, 1));
            c
        }
        11 | 12 => {
            let mut c = vec![r.pick(&["HPEXPIRETIME", "HEXPIRETIME", "HPERSIST"]).to_string(), k(r)];
            c.extend(fields(r, 1));
            c
        }
        13 | 14 => {
            let mut c = vec!["HGETEX".into(), k(r)];
            c.extend(split(r.pick(&["", "PXAT 4102444800000", "EXAT 1", "PERSIST", "PX 0", "EX -1"]).to_string()));
            c.extend(fields(r, 1));
            c
        }
        15 | 16 => {
            let mut c = vec!["HSETEX".into(), k(r)];
            c.extend(split(r.pick(&["", "NX", "XX", "FNX", "FXX", "XX FXX"]).to_string()));
            c.extend(split(r.pick(&["", "PXAT 4102444800000", "KEEPTTL", "PXAT 1", "EX 0"]).to_string()));
            c.extend(fields(r, 2));
            c
        }
        17 => {
            let mut c = vec!["HGETDEL".into(), k(r)];
            c.extend(fields(r, 1));
            c
        }
        18 => vec!["SET".into(), k(r), v(r), "IFEQ".into(), v(r)],
        19 => vec!["DELIFEQ".into(), k(r), v(r)],
        20 => vec!["EXISTS".into(), k(r)],
        _ => vec!["TYPE".into(), k(r)],
    };
    (mode, cmd)
}

/// Random streams of the hash-field expiry commands and Valkey's other additions mixed with
/// plain hash writes, compared with Valkey 9.1.2 reply by reply in RESP2 and RESP3.
#[test]
fn seeded_random_streams_beyond_72_match_valkey() {
    let (_v, _a, mut pair) = pair_with(start_valkey(&[]));
    let known = known_differences();
    let mut failures = Vec::new();
    let mut checked = 0;
    for seed in 1..=6u64 {
        let proto = if seed % 2 == 0 { 3 } else { 2 };
        pair.reset(proto);
        let mut rng = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
        for step in 0..1500 {
            let (mode, cmd) = random_beyond72_command(&mut rng);
            let args: Vec<Vec<u8>> = cmd.iter().map(|a| a.clone().into_bytes()).collect();
            let text = cmd.join(" ");
            checked += 1;
            if let Some(m) = pair.check(mode, &args, &text, "random", proto, &known, 0) {
                failures.push(format!("seed {seed} step {step}: {m}"));
                if failures.len() > 30 {
                    break;
                }
            }
        }
    }
    println!("random differential beyond 7.2: {checked} replies compared");
    assert!(failures.is_empty(), "{} of {checked} replies differ:\n{}", failures.len(), failures.join("\n"));
}

/// Sends `stream` in chunks of the given sizes from a second thread (so neither side waits on
/// the other's socket buffer) and reads `n` replies.
fn pipeline(conn: &mut RawConn, stream: Vec<u8>, chunks: Vec<usize>, n: usize) -> Vec<Vec<u8>> {
    let mut w = conn.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut pos = 0;
        for c in chunks.into_iter().chain(std::iter::repeat(usize::MAX)) {
            if pos >= stream.len() {
                break;
            }
            let end = pos.saturating_add(c).min(stream.len());
            w.write_all(&stream[pos..end]).unwrap();
            pos = end;
        }
    });
    let replies = (0..n).map(|_| conn.read_reply()).collect();
    writer.join().unwrap();
    replies
}

/// The same random commands as above, but pipelined: hundreds of requests in one stream cut
/// at random byte positions, mixing RESP and inline requests, SELECTs and commands with many
/// arguments, so the worker's look-ahead (which parses requests ahead and replays them) sees
/// complete, partial and unrecorded requests. Replies must match Redis's, in order.
#[test]
fn pipelined_streams_match_redis() {
    let (_r, _a, mut pair) = start_pair();
    let mut failures = Vec::new();
    let mut checked = 0;
    for seed in 1..=4u64 {
        let proto = if seed % 2 == 0 { 3 } else { 2 };
        pair.reset(proto);
        let mut rng = Rng(seed.wrapping_mul(0xD1B54A32D192ED03) | 1);
        let mut stream = Vec::new();
        let mut cmds: Vec<(Mode, String)> = Vec::new();
        for _ in 0..800 {
            let (mode, cmd, inline) = match rng.below(20) {
                0 => (Mode::Exact, vec!["SELECT".to_string(), rng.below(3).to_string()], rng.below(2) == 0),
                1 => (Mode::Exact, vec!["PING".to_string()], true),
                2 => {
                    // More arguments than the look-ahead records.
                    let mut c = vec!["MSET".to_string()];
                    for _ in 0..6 {
                        c.push(rng.pick(KEYS).to_string());
                        c.push(rng.pick(VALUES).to_string());
                    }
                    (Mode::Exact, c, false)
                }
                3..=9 => {
                    let (m, c) = random_type_command(&mut rng);
                    (m, c, false)
                }
                _ => {
                    let (m, c) = random_command(&mut rng);
                    (m, c, false)
                }
            };
            let args = to_args(&cmd);
            if inline {
                stream.extend_from_slice(cmd.join(" ").as_bytes());
                stream.extend_from_slice(b"\r\n");
            } else {
                stream.extend_from_slice(&encode(&args));
            }
            cmds.push((mode, cmd.join(" ")));
        }
        let chunks: Vec<usize> = (0..stream.len()).map(|_| 1 + rng.below(3000)).collect();
        let r = pipeline(&mut pair.redis, stream.clone(), chunks.clone(), cmds.len());
        let a = pipeline(&mut pair.atoll, stream, chunks, cmds.len());
        for (i, (mode, text)) in cmds.iter().enumerate() {
            checked += 1;
            if !same_reply(*mode, &r[i], &a[i]) {
                failures.push(format!(
                    "seed {seed} #{i} RESP{proto} `{text}`\n   redis: {}\n   atoll: {}",
                    show(&r[i]),
                    show(&a[i])
                ));
            }
        }
    }
    println!("pipelined differential: {checked} replies compared");
    assert!(failures.is_empty(), "{} of {checked} replies differ:\n{}", failures.len(), failures.join("\n"));
}

/// Keys of every length class the key table stores differently (inline in one node up to
/// 65,534 bytes, with an outside length from 65,535), taken through every value layout: short
/// strings, integers, longer strings, raw strings modified in place, aggregates, and back.
#[test]
fn key_layouts_match_redis() {
    let (_r, _a, mut pair) = start_pair();
    let known = known_differences();
    let mut failures = Vec::new();
    let mut checked = 0;
    for len in [0usize, 1, 16, 22, 23, 100, 65_534, 65_535, 70_000] {
        pair.reset(2);
        let k = "k".repeat(len);
        let k2 = format!("{k}2");
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<String>>();
        let v38 = "v".repeat(38);
        let v39 = "v".repeat(39);
        let x40 = "x".repeat(40);
        let script: Vec<Vec<String>> = vec![
            s(&["SET", &k, "abc"]),
            s(&["OBJECT", "ENCODING", &k]),
            s(&["GET", &k]),
            s(&["SET", &k, "xyz"]),
            s(&["APPEND", &k, &x40]),
            s(&["OBJECT", "ENCODING", &k]),
            s(&["STRLEN", &k]),
            s(&["SET", &k, "12345"]),
            s(&["OBJECT", "ENCODING", &k]),
            s(&["INCR", &k]),
            s(&["INCRBYFLOAT", &k, "1.5"]),
            s(&["GET", &k]),
            s(&["SET", &k, &v38]),
            s(&["OBJECT", "ENCODING", &k]),
            s(&["GETRANGE", &k, "30", "-1"]),
            s(&["SET", &k, &v39]),
            s(&["OBJECT", "ENCODING", &k]),
            s(&["SETRANGE", &k, "1", "zz"]),
            s(&["GET", &k]),
            s(&["HSET", &k, "f", "v"]),
            s(&["LPUSH", &k, "a"]),
            s(&["SET", &k, "7"]),
            s(&["SETBIT", &k, "100", "1"]),
            s(&["BITCOUNT", &k]),
            s(&["SET", &k, "7"]),
            s(&["EXPIRE", &k, "1000"]),
            s(&["SET", &k, "8", "KEEPTTL"]),
            s(&["TTL", &k]),
            s(&["COPY", &k, &k2]),
            s(&["GET", &k2]),
            s(&["RENAME", &k2, &k]),
            s(&["GET", &k]),
            s(&["DEL", &k]),
            s(&["HSET", &k, "f", "v"]),
            s(&["TYPE", &k]),
            s(&["GET", &k]),
            s(&["SET", &k, "short"]),
            s(&["TYPE", &k]),
            s(&["GETDEL", &k]),
            s(&["EXISTS", &k]),
            s(&["PFADD", &k, "a", "b"]),
            s(&["PFCOUNT", &k]),
            s(&["SET", &k, "abc"]),
            s(&["PFCOUNT", &k]),
        ];
        for cmd in script {
            let args = to_args(&cmd);
            let text: String = cmd.join(" ").chars().take(120).collect();
            checked += 1;
            if let Some(m) = pair.check(Mode::Exact, &args, &text, "layouts", 2, &known, 0) {
                failures.push(format!("key length {len}: {m}"));
            }
        }
    }
    println!("key layout differential: {checked} replies compared");
    assert!(failures.is_empty(), "{} of {checked} replies differ:\n{}", failures.len(), failures.join("\n"));
}

/// Lex ranges over sorted sets whose members have different scores (Redis documents the result
/// as unspecified, but it is deterministic for listpack-encoded sets and clients see it):
/// ZRANGEBYLEX, ZREVRANGEBYLEX, ZRANGE … BYLEX [REV] LIMIT, ZLEXCOUNT, ZREMRANGEBYLEX, seeded.
#[test]
fn lex_ranges_on_mixed_score_sets_match_redis() {
    let (_r, _a, mut pair) = start_pair();
    let known = known_differences();
    let members = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let bound = |r: &mut Rng| -> String {
        match r.below(6) {
            0 => "-".into(),
            1 => "+".into(),
            2 | 3 => format!("[{}", r.pick(&members)),
            _ => format!("({}", r.pick(&members)),
        }
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for seed in 1..=200u64 {
        pair.reset(if seed % 2 == 0 { 3 } else { 2 });
        let mut rng = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
        // A small set (listpack), members in random order of random small scores.
        let mut add = vec!["ZADD".to_string(), "z".into()];
        for m in members.iter().take(3 + rng.below(6)) {
            add.push(rng.below(4).to_string());
            add.push(m.to_string());
        }
        let mut cmds = vec![add];
        for _ in 0..30 {
            let (min, max) = (bound(&mut rng), bound(&mut rng));
            let cmd: Vec<String> = match rng.below(6) {
                0 => vec!["ZRANGEBYLEX".into(), "z".into(), min, max],
                1 => vec!["ZREVRANGEBYLEX".into(), "z".into(), max, min],
                2 => vec!["ZLEXCOUNT".into(), "z".into(), min, max],
                3 => {
                    let (off, n) = (rng.below(3).to_string(), (rng.below(4) as i64 - 1).to_string());
                    vec!["ZRANGE".into(), "z".into(), min, max, "BYLEX".into(), "LIMIT".into(), off, n]
                }
                4 => vec!["ZRANGE".into(), "z".into(), max, min, "BYLEX".into(), "REV".into()],
                _ => vec!["ZRANGE".into(), "z".into(), "0".into(), "-1".into(), "WITHSCORES".into()],
            };
            cmds.push(cmd);
        }
        if rng.below(2) == 0 {
            let (min, max) = (bound(&mut rng), bound(&mut rng));
            cmds.push(vec!["ZREMRANGEBYLEX".into(), "z".into(), min, max]);
            cmds.push(vec!["ZRANGE".into(), "z".into(), "0".into(), "-1".into(), "WITHSCORES".into()]);
        }
        for cmd in cmds {
            let text = cmd.join(" ");
            checked += 1;
            if let Some(m) = pair.check(Mode::Exact, &to_args(&cmd), &text, "lex", 2, &known, 0) {
                failures.push(format!("seed {seed}: {m}"));
            }
        }
    }
    assert!(checked > 5000, "{checked}");
    assert!(failures.is_empty(), "{} of {checked} replies differ:\n{}", failures.len(), failures.join("\n"));
}

/// `list-compress-depth` (1 and 2) against Redis 7.2.6: the same pushes, pops, LSETs,
/// LINSERTs, LREMs, LTRIMs, LPOS and LRANGEs on a list whose middle is compressed answer as
/// Redis's, also after DEBUG RELOAD; DEBUG OBJECT's `ql_compressed` follows the depth each list
/// was made with (a list made before CONFIG SET keeps its own, in both); and the compressed
/// list takes a fraction of the memory the same elements take uncompressed, by Atoll's own
/// MEMORY USAGE.
#[test]
fn compressed_lists_match_redis_and_take_less_memory() {
    let (r, a) = (start_redis(&[]), start_atoll(&["--enable-debug-command", "yes"]));
    let mut c = [RawConn::connect(r.port), RawConn::connect(a.port)];
    let both = |c: &mut [RawConn; 2], args: &[Vec<u8>]| -> Vec<u8> {
        let out: Vec<Vec<u8>> = c
            .iter_mut()
            .map(|x| {
                x.send(args);
                x.read_reply()
            })
            .collect();
        let cmd: Vec<_> = args.iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect();
        assert_eq!(show(&out[1]), show(&out[0]), "{cmd:?}: Atoll (right) differs from Redis (left)");
        out[1].clone()
    };
    // Job-like JSON values: similar across elements (what a node-wide compressor finds), a few
    // repeated (LREM and LINSERT find them in the middle too).
    let elem = |i: u64| -> Vec<u8> {
        format!(
            r#"{{"id":{},"queue":"mail","state":"waiting","attempts":{},"data":"{}"}}"#,
            i % 997,
            i % 3,
            "x".repeat((i % 7 * 20) as usize)
        )
        .into_bytes()
    };
    let fill = |c: &mut [RawConn; 2], key: &str, n: u64| {
        for x in c.iter_mut() {
            let cmds: Vec<Vec<Vec<u8>>> =
                (0..n).map(|i| vec![b"RPUSH".to_vec(), key.as_bytes().to_vec(), elem(i)]).collect();
            run_all(x, &cmds);
        }
    };
    fn compressed_flag(c: &mut [RawConn; 2], key: &str) -> String {
        let f: Vec<String> = c
            .iter_mut()
            .map(|x| {
                let o = String::from_utf8_lossy(&x.cmd(&[b"DEBUG", b"OBJECT", key.as_bytes()])).into_owned();
                o.split_whitespace().find(|w| w.starts_with("ql_compressed:")).unwrap_or("none").to_string()
            })
            .collect();
        assert_eq!(f[1], f[0], "DEBUG OBJECT {key}: Atoll's ql_compressed differs from Redis's");
        f[1].clone()
    }
    both(&mut c, &v(&["CONFIG", "SET", "list-compress-depth", "0"]));
    fill(&mut c, "plain", 6000);
    both(&mut c, &v(&["CONFIG", "SET", "list-compress-depth", "1"]));
    fill(&mut c, "d1", 6000);
    both(&mut c, &v(&["CONFIG", "SET", "list-compress-depth", "2"]));
    fill(&mut c, "d2", 6000);
    assert_eq!(compressed_flag(&mut c, "plain"), "ql_compressed:0");
    assert_eq!(compressed_flag(&mut c, "d1"), "ql_compressed:1");
    let int = |b: Vec<u8>| -> u64 { String::from_utf8_lossy(&b[1..b.len() - 2]).parse().unwrap() };
    let plain = int(c[1].cmd(&[b"MEMORY", b"USAGE", b"plain", b"SAMPLES", b"0"]));
    let packed = int(c[1].cmd(&[b"MEMORY", b"USAGE", b"d1", b"SAMPLES", b"0"]));
    println!("MEMORY USAGE of 6000 job-like elements: {plain} bytes plain, {packed} with depth 1");
    assert!(packed * 4 < plain, "depth 1 should take well under a quarter: {packed} vs {plain}");
    for key in ["d1", "d2"] {
        both(&mut c, &v(&["LRANGE", key, "0", "-1"]));
    }
    // A seeded walk over the list commands on both compressed lists.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    // Uncompressed (its middle packed as it is) and compressed lists, with integer elements
    // among the JSON (packed as integers).
    for step in 0..2100u64 {
        let key = ["d1", "d2", "plain"][(step % 3) as usize];
        let e = if rnd(4) == 0 { (rnd(200_000) as i64 - 1000).to_string().into_bytes() } else { elem(rnd(2000)) };
        let idx = (rnd(12000) as i64 - 6000).to_string();
        let e = String::from_utf8(e).unwrap();
        let args: Vec<String> = match rnd(11) {
            0 => vec!["LPUSH".into(), key.into(), e],
            1 => vec!["RPUSH".into(), key.into(), e],
            2 => vec!["LPOP".into(), key.into(), (rnd(3) + 1).to_string()],
            3 => vec!["RPOP".into(), key.into()],
            4 => vec!["LSET".into(), key.into(), idx, e],
            5 => vec![
                "LINSERT".into(),
                key.into(),
                if rnd(2) == 0 { "BEFORE" } else { "AFTER" }.into(),
                String::from_utf8(elem(rnd(997))).unwrap(),
                e,
            ],
            6 => vec![
                "LREM".into(),
                key.into(),
                (rnd(5) as i64 - 2).to_string(),
                String::from_utf8(elem(rnd(997))).unwrap(),
            ],
            7 if step % 100 == 7 => {
                vec!["LTRIM".into(), key.into(), rnd(40).to_string(), (-1 - rnd(40) as i64).to_string()]
            }
            8 => vec!["LINDEX".into(), key.into(), idx],
            9 => vec![
                "LPOS".into(),
                key.into(),
                String::from_utf8(elem(rnd(997))).unwrap(),
                "RANK".into(),
                "-1".into(),
                "COUNT".into(),
                "3".into(),
            ],
            _ => vec![
                "LRANGE".into(),
                key.into(),
                idx.clone(),
                (idx.parse::<i64>().unwrap() + rnd(50) as i64).to_string(),
            ],
        };
        both(&mut c, &args.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>());
    }
    for key in ["d1", "d2", "plain"] {
        both(&mut c, &v(&["LRANGE", key, "0", "-1"]));
    }
    both(&mut c, &v(&["DEBUG", "RELOAD"]));
    for key in ["d1", "d2", "plain"] {
        both(&mut c, &v(&["LRANGE", key, "0", "-1"]));
        both(&mut c, &v(&["LLEN", key]));
    }
    // Loaded with depth 2 configured now: every quicklist compresses, in both.
    assert_eq!(compressed_flag(&mut c, "plain"), "ql_compressed:1");
}

/// A long list takes no more memory in Atoll than in Redis 7.2.6 (INFO's used_memory before
/// and after, each server measuring its own allocations): 100,000 job IDs, which a quicklist
/// packs as integers (Atoll's elements were boxed one by one until 2026-11-30: 5.5 times
/// Redis's), and 20,000 job-like JSON elements.
#[test]
fn long_lists_take_no_more_memory_than_redis() {
    let (r, a) = (start_redis(&[]), start_atoll(&[]));
    let used = |c: &mut RawConn| -> f64 {
        let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"memory"])).into_owned();
        info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap()
    };
    type Elem = Box<dyn Fn(u64) -> Vec<u8>>;
    let kinds: [(&str, u64, Elem, f64); 2] = [
        ("ids", 100_000, Box::new(|i| (1_000_000 + i * 7).to_string().into_bytes()), 1.05),
        (
            "jobs",
            20_000,
            Box::new(|i| {
                format!(
                    r#"{{"id":{i},"queue":"mail","state":"waiting","data":"{}"}}"#,
                    "x".repeat((i % 7 * 20) as usize)
                )
                .into_bytes()
            }),
            1.10,
        ),
    ];
    for (key, n, elem, most) in &kinds {
        let mut grew = Vec::new();
        for port in [r.port, a.port] {
            let mut c = RawConn::connect(port);
            // The connection's buffers and the server's batch arrays grow to a 1,000-command
            // pipeline first (about 300 KB in Atoll, 60 KB in Redis), outside the measure.
            let warm: Vec<Vec<Vec<u8>>> =
                (0..1000).map(|i| vec![b"RPUSH".to_vec(), b"warm".to_vec(), elem(i)]).collect();
            run_all(&mut c, &warm);
            assert_eq!(c.cmd(&[b"DEL", b"warm"]), b":1\r\n");
            let before = used(&mut c);
            for start in (0..*n).step_by(1000) {
                let cmds: Vec<Vec<Vec<u8>>> =
                    (start..start + 1000).map(|i| vec![b"RPUSH".to_vec(), key.as_bytes().to_vec(), elem(i)]).collect();
                run_all(&mut c, &cmds);
            }
            grew.push(used(&mut c) - before);
            assert_eq!(
                c.cmd(&[b"LINDEX", key.as_bytes(), b"5000"]),
                [
                    b"$".to_vec(),
                    elem(5000).len().to_string().into_bytes(),
                    b"\r\n".to_vec(),
                    elem(5000),
                    b"\r\n".to_vec()
                ]
                .concat()
            );
        }
        let ratio = grew[1] / grew[0];
        println!("{key}: {n} elements, Redis grew {} bytes, Atoll {} ({ratio:.2}×)", grew[0], grew[1]);
        assert!(ratio <= *most, "{key}: Atoll's list takes {ratio:.2}× Redis's memory");
    }
}
