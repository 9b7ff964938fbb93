//! ACL beyond single replies (those are in `cases/acl.txt`): the ACL log's entries, ACL files
//! and `user` lines moving between Atoll and Redis 7.2.6 (the oracle of `common::redis_bin`),
//! start-up refusals, and the connections ACL changes close.

mod common;

use common::*;
use std::time::Duration;

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// Runs the same commands on both servers, comparing replies byte for byte.
fn both(r: &mut RawConn, a: &mut RawConn, cmds: &[&[&str]]) {
    for c in cmds {
        let args: Vec<Vec<u8>> = c.iter().map(|s| b(s)).collect();
        r.send(&args);
        a.send(&args);
        let (x, y) = (r.read_reply(), a.read_reply());
        assert_eq!(show(&x), show(&y), "reply to {c:?}");
    }
}

/// An ACL LOG reply (RESP2) as a list of field → value maps; nested values stay raw.
fn log_entries(reply: &[u8]) -> Vec<Vec<(String, Vec<u8>)>> {
    let (_, entries) = split_aggregate(reply).expect("ACL LOG is an array");
    entries
        .iter()
        .map(|e| {
            let (_, fields) = split_aggregate(e).expect("an entry is a map");
            fields
                .chunks(2)
                .map(|p| {
                    let k = parse_array(&[b"*1\r\n".as_slice(), &p[0]].concat()).remove(0);
                    (String::from_utf8_lossy(&k).into_owned(), p[1].clone())
                })
                .collect()
        })
        .collect()
}

/// The `field=value` names of a CLIENT LIST line.
fn info_fields(v: &[u8]) -> Vec<String> {
    let text = parse_array(&[b"*1\r\n".as_slice(), v].concat()).remove(0);
    String::from_utf8_lossy(&text).split(' ').map(|f| f.split('=').next().unwrap().to_string()).collect()
}

#[test]
fn acl_log_entries_match_redis() {
    let rs = start_redis(&[]);
    let at = start_atoll(&[]);
    let (mut r, mut a) = (RawConn::connect(rs.port), RawConn::connect(at.port));
    let (mut r1, mut a1) = (RawConn::connect(rs.port), RawConn::connect(at.port));
    both(
        &mut r,
        &mut a,
        &[&[
            "ACL", "SETUSER", "ann", "on", ">pw", "~k*", "&ch*", "-@all", "+get", "+set", "+publish", "+multi",
            "+exec", "+eval",
        ]],
    );
    both(
        &mut r1,
        &mut a1,
        &[
            &["AUTH", "ann", "wrong"],
            &["AUTH", "nobody", "x"],
            &["AUTH", "ann", "pw"],
            &["GET", "other"],
            &["GET", "other"],
            &["SET", "k1", "v"],
            &["PUBLISH", "nope", "m"],
            &["DEL", "k1"],
            &["MULTI"],
            &["GET", "secret"],
            &["EXEC"],
            &["EVAL", "return redis.pcall('get', 'hidden')", "0"],
        ],
    );
    let (x, y) = (r.cmd(&[b"ACL", b"LOG"]), a.cmd(&[b"ACL", b"LOG"]));
    let (ex, ey) = (log_entries(&x), log_entries(&y));
    assert_eq!(ex.len(), ey.len(), "redis: {}\natoll: {}", show(&x), show(&y));
    assert_eq!(ex.len(), 7, "{}", show(&x));
    for (er, ea) in ex.iter().zip(&ey) {
        let keys = |e: &Vec<(String, Vec<u8>)>| e.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(keys(er), keys(ea));
        for ((k, vr), (_, va)) in er.iter().zip(ea) {
            match k.as_str() {
                // The same kind of value; the figures depend on timing and on each server's
                // connection (ids, ports).
                "age-seconds" | "timestamp-created" | "timestamp-last-updated" => assert_eq!(vr[0], va[0], "{k}"),
                "client-info" => assert_eq!(info_fields(vr), info_fields(va), "client-info fields"),
                _ => assert_eq!(show(vr), show(va), "field {k}"),
            }
        }
    }
    // The repeated GET is one entry counted twice; the newest entry comes first.
    let count = |e: &Vec<(String, Vec<u8>)>| e.iter().find(|(k, _)| k == "count").unwrap().1.clone();
    assert!(ey.iter().any(|e| count(e) == b":2\r\n"), "{}", show(&y));
    // The client-info of an entry is the client that was refused.
    let info = String::from_utf8_lossy(&ey[0].iter().find(|(k, _)| k == "client-info").unwrap().1).into_owned();
    assert!(info.contains("user=ann"), "{info}");
    assert_eq!(log_entries(&a.cmd(&[b"ACL", b"LOG", b"2"])).len(), 2);
    both(&mut r, &mut a, &[&["ACL", "LOG", "RESET"], &["ACL", "LOG"]]);
    let stats = |c: &mut RawConn| {
        let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"stats"])).into_owned();
        info.lines().filter(|l| l.starts_with("acl_access_denied")).map(String::from).collect::<Vec<_>>()
    };
    assert_eq!(stats(&mut r), stats(&mut a));
    // acllog-max-len trims the log.
    both(&mut r, &mut a, &[&["CONFIG", "SET", "acllog-max-len", "2"]]);
    both(&mut r1, &mut a1, &[&["GET", "x1"], &["GET", "k1", "k2"], &["SET", "x2", "v"], &["SET", "x3", "v"]]);
    let (x, y) = (r.cmd(&[b"ACL", b"LOG"]), a.cmd(&[b"ACL", b"LOG"]));
    assert_eq!(log_entries(&x).len(), 2);
    assert_eq!(log_entries(&y).len(), 2);
}

/// Writes `text` to a fresh file in the server-independent scratch space.
fn scratch_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("atoll-acl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn acl_list(port: u16) -> Vec<u8> {
    RawConn::connect(port).cmd(&[b"ACL", b"LIST"])
}

#[test]
fn acl_files_move_between_atoll_and_redis() {
    // Atoll writes the file (ACL SAVE); Redis loads it at start-up and sees the same users.
    let file = scratch_file("users.acl", "");
    let at = start_atoll(&["--aclfile", &file]);
    let mut a = RawConn::connect(at.port);
    for rule in [
        &["ACL", "SETUSER", "ann", "on", ">pw", "~k*", "%R~r*", "&ch*", "-@all", "+@string", "-incr", "+config|get"][..],
        &[
            "ACL",
            "SETUSER",
            "bob",
            "off",
            "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
            "allkeys",
        ],
        &["ACL", "SETUSER", "cy", "on", "nopass", "+@all", "-@dangerous", "(~s* +get)", "(%W~w* +set)"],
        &["ACL", "SETUSER", "default", "on", ">defpw"],
    ] {
        let args: Vec<Vec<u8>> = rule.iter().map(|s| b(s)).collect();
        a.send(&args);
        assert_eq!(a.read_reply(), b"+OK\r\n", "{rule:?}");
    }
    assert_eq!(a.cmd(&[b"AUTH", b"defpw"]), b"+OK\r\n");
    assert_eq!(a.cmd(&[b"ACL", b"SAVE"]), b"+OK\r\n");
    let atoll_list = a.cmd(&[b"ACL", b"LIST"]);
    let rs = start_redis(&["--aclfile", &file]);
    let mut r = RawConn::connect(rs.port);
    assert_eq!(r.cmd(&[b"AUTH", b"defpw"]), b"+OK\r\n");
    assert_eq!(show(&r.cmd(&[b"ACL", b"LIST"])), show(&atoll_list));
    // Redis writes it back (after a change); ACL LOAD in Atoll reads it.
    assert_eq!(r.cmd(&[b"ACL", b"SETUSER", b"dee", b"on", b">x", b"~d*", b"+get"]), b"+OK\r\n");
    assert_eq!(r.cmd(&[b"ACL", b"SAVE"]), b"+OK\r\n");
    assert_eq!(a.cmd(&[b"ACL", b"LOAD"]), b"+OK\r\n");
    assert_eq!(show(&a.cmd(&[b"ACL", b"LIST"])), show(&r.cmd(&[b"ACL", b"LIST"])));
    // A bad file changes nothing, and both say why in the same words.
    std::fs::write(&file, "user ok on nopass +get\nuser bad on +nosuchcmd\nnot-a-user line\nuser ok on\n").unwrap();
    let before = a.cmd(&[b"ACL", b"LIST"]);
    let (x, y) = (r.cmd(&[b"ACL", b"LOAD"]), a.cmd(&[b"ACL", b"LOAD"]));
    assert!(x.starts_with(b"-ERR"), "{}", show(&x));
    assert_eq!(show(&x), show(&y));
    assert_eq!(a.cmd(&[b"ACL", b"LIST"]), before);
    // Connections of users the load removes are closed.
    std::fs::write(&file, "user default on >defpw ~* &* +@all\n").unwrap();
    let mut ann = RawConn::connect(at.port);
    assert_eq!(ann.cmd(&[b"AUTH", b"ann", b"pw"]), b"+OK\r\n");
    assert_eq!(a.cmd(&[b"ACL", b"LOAD"]), b"+OK\r\n");
    assert_eq!(ann.read_to_close(), b"");
}

#[test]
fn config_user_lines_load_and_rewrite_as_redis() {
    let conf = "user ann on >pw ~k* +get\nuser default on nopass ~* &* +@all -flushall\n";
    let (fr, fa) = (scratch_file("r.conf", conf), scratch_file("a.conf", conf));
    let spawn = |bin: &str, file: &str| {
        let port = free_port();
        let child = std::process::Command::new(bin)
            .arg(file)
            .args(["--port", &port.to_string(), "--save", "", "--loglevel", "warning"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for_port(port);
        ServerProc { child, port, name: "either" }
    };
    let rs = spawn(&redis_bin(), &fr);
    let at = spawn(env!("CARGO_BIN_EXE_atoll-server"), &fa);
    assert_eq!(show(&acl_list(rs.port)), show(&acl_list(at.port)));
    let (mut r, mut a) = (RawConn::connect(rs.port), RawConn::connect(at.port));
    both(
        &mut r,
        &mut a,
        &[
            &["FLUSHALL"],
            &["ACL", "SETUSER", "bob", "on", "nopass", "+ping"],
            &["ACL", "DELUSER", "ann"],
            &["CONFIG", "REWRITE"],
        ],
    );
    let users = |f: &str| {
        std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("user "))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(users(&fr), users(&fa));
    assert_eq!(users(&fa).len(), 2, "{:?}", users(&fa));
    drop((r, a, rs, at));
    // The rewritten file starts both again with the same users.
    let rs = spawn(&redis_bin(), &fr);
    let at = spawn(env!("CARGO_BIN_EXE_atoll-server"), &fa);
    assert_eq!(show(&acl_list(rs.port)), show(&acl_list(at.port)));
}

#[test]
fn bad_acl_setups_stop_start_up_as_redis() {
    let acl = scratch_file("startup.acl", "user a on nopass +get\n");
    let bad = scratch_file("bad.acl", "user a on +nosuch\n");
    let conf = scratch_file("users-and-file.conf", &format!("user x on nopass +get\naclfile {acl}\n"));
    let bad_rule = scratch_file("bad-rule.conf", "user x on nopass +nosuchcmd\n");
    let dup = scratch_file("dup.conf", "user x on\nuser x off\n");
    for args in [vec![conf.clone()], vec![bad_rule], vec![dup], vec!["--aclfile".into(), bad]] {
        let status = |bin: &str| {
            let mut c = std::process::Command::new(bin);
            c.args(&args).args(["--port", &free_port().to_string(), "--save", ""]);
            let mut child = c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
            let start = std::time::Instant::now();
            loop {
                if let Some(s) = child.try_wait().unwrap() {
                    return Some(s.code());
                }
                if start.elapsed() > Duration::from_secs(5) {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let (r, a) = (status(&redis_bin()), status(env!("CARGO_BIN_EXE_atoll-server")));
        assert_eq!(r, Some(Some(1)), "redis with {args:?}");
        assert_eq!(a, r, "atoll with {args:?}");
    }
}

#[test]
fn acl_changes_close_the_connections_they_must() {
    let at = start_atoll(&[]);
    let mut admin = RawConn::connect(at.port);
    assert_eq!(admin.cmd(&[b"ACL", b"SETUSER", b"sub", b"on", b"nopass", b"&news.*", b"+@all"]), b"+OK\r\n");
    // A subscriber whose channel the user loses is disconnected; one that keeps it is not.
    let mut s1 = RawConn::connect(at.port);
    assert_eq!(s1.cmd(&[b"AUTH", b"sub", b"x"]), b"+OK\r\n");
    s1.cmd(&[b"SUBSCRIBE", b"news.sport"]);
    let mut s2 = RawConn::connect(at.port);
    assert_eq!(s2.cmd(&[b"AUTH", b"sub", b"x"]), b"+OK\r\n");
    s2.cmd(&[b"SUBSCRIBE", b"news.weather"]);
    assert_eq!(admin.cmd(&[b"ACL", b"SETUSER", b"sub", b"resetchannels", b"&news.weather"]), b"+OK\r\n");
    assert_eq!(s1.read_to_close(), b"");
    assert_eq!(admin.cmd(&[b"PUBLISH", b"news.weather", b"sun"]), b":1\r\n");
    assert!(s2.read_reply().ends_with(b"sun\r\n"));
    // CLIENT LIST shows the user; CLIENT KILL USER closes its connections.
    let list = String::from_utf8_lossy(&admin.cmd(&[b"CLIENT", b"LIST"])).into_owned();
    assert!(list.contains("user=sub"), "{list}");
    assert!(list.contains("user=default"), "{list}");
    assert_eq!(admin.cmd(&[b"CLIENT", b"KILL", b"USER", b"sub"]), b":1\r\n");
    assert_eq!(s2.read_to_close(), b"");
    assert_eq!(show(&admin.cmd(&[b"CLIENT", b"KILL", b"USER", b"nobody"])), show(b"-ERR No such user 'nobody'\r\n"));
    // ACL DELUSER closes the user's connections, its own caller's after the reply.
    let mut c = RawConn::connect(at.port);
    assert_eq!(c.cmd(&[b"AUTH", b"sub", b"x"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"ACL", b"DELUSER", b"sub"]), b":1\r\n");
    assert_eq!(c.read_to_close(), b"");
    // requirepass is the default user's password.
    assert_eq!(admin.cmd(&[b"CONFIG", b"SET", b"requirepass", b"pw"]), b"+OK\r\n");
    let mut n = RawConn::connect(at.port);
    assert!(n.cmd(&[b"GET", b"k"]).starts_with(b"-NOAUTH"));
    assert_eq!(n.cmd(&[b"AUTH", b"pw"]), b"+OK\r\n");
    let list = String::from_utf8_lossy(&admin.cmd(&[b"ACL", b"LIST"])).into_owned();
    assert!(list.contains("#30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4"), "{list}");
    assert_eq!(admin.cmd(&[b"CONFIG", b"SET", b"requirepass", b""]), b"+OK\r\n");
    let mut m = RawConn::connect(at.port);
    assert_eq!(m.cmd(&[b"GET", b"k"]), b"$-1\r\n");
}
