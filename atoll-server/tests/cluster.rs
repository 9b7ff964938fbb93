//! Redis Cluster with real nodes and Redis's own tool: clusters of Atoll nodes, and of Atoll
//! mixed with Redis 7.2.6 and Valkey 9.1.2 nodes, are made by `redis-cli --cluster create`
//! (Redis 7.2.6's), checked by `--cluster check`, resharded by `--cluster reshard` under a
//! write load, and failed over by killing a master (-9) — in both directions in the mixed
//! clusters, each node kind electing and promoting the other's replicas over one bus. The
//! redirections a client sees (MOVED, ASK, TRYAGAIN, CROSSSLOT, CLUSTERDOWN) and the CLUSTER
//! subcommands' errors are compared byte for byte with Redis 7.2.6 in the same topology.

mod common;

use common::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Atoll,
    Redis,
    Valkey,
}

/// One cluster node: its process, client port, bus port and directory (for a restart).
struct Node {
    proc: Option<ServerProc>,
    port: u16,
    bus: u16,
    kind: Kind,
    dir: std::path::PathBuf,
}

const TIMEOUT_MS: &str = "2000";

fn cluster_args(bus: u16) -> Vec<String> {
    [
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        TIMEOUT_MS,
        "--cluster-config-file",
        "nodes.conf",
        "--enable-debug-command",
        "yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(["--cluster-port".to_string(), bus.to_string()])
    .collect()
}

fn start_node(kind: Kind) -> Node {
    let bus = free_port();
    let args = cluster_args(bus);
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let p = match kind {
        Kind::Atoll => start_atoll(&a),
        Kind::Redis => start_redis(&a),
        Kind::Valkey => start_valkey(&a),
    };
    let port = p.port;
    Node { proc: Some(p), port, bus, kind, dir: scratch_dir_path(port) }
}

/// The directory `start_atoll` and the oracles gave the server on `port` (not emptied).
fn scratch_dir_path(port: u16) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("atoll-test-{}-{port}", std::process::id()))
}

/// Starts a killed node again on its port, directory and nodes.conf.
fn restart(n: &mut Node) {
    let mut args = cluster_args(n.bus);
    args.extend(["--dir".to_string(), n.dir.to_str().unwrap().to_string()]);
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let bin = match n.kind {
        Kind::Atoll => {
            n.proc = Some(start_atoll_at(n.port, &a));
            return;
        }
        Kind::Redis => redis_bin(),
        Kind::Valkey => valkey_bin(),
    };
    let mut cmd = Command::new(bin);
    cmd.args(["--port", &n.port.to_string(), "--save", "", "--appendonly", "no", "--loglevel", "warning"]);
    cmd.args(&a).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let child = cmd.spawn().expect("restart the oracle");
    wait_for_port(n.port);
    n.proc = Some(ServerProc { child, port: n.port, name: "oracle" });
}

fn kill(n: &mut Node) {
    if let Some(mut p) = n.proc.take() {
        let _ = p.child.kill();
        let _ = p.child.wait();
    }
}

fn redis_cli() -> std::path::PathBuf {
    std::path::Path::new(&redis_bin()).parent().unwrap().join("redis-cli")
}

/// `redis-cli --cluster <args>`: its exit status and output.
fn cli_cluster(args: &[String]) -> (bool, String) {
    cli_cluster_typing(args, b"")
}

/// `redis-cli --cluster` with `yes` typed at its prompts (`fix` asks before covering a slot
/// even with --cluster-yes, as Redis 7.2.6's does).
fn cli_cluster_answering_yes(args: &[String]) -> (bool, String) {
    cli_cluster_typing(args, b"yes\nyes\nyes\n")
}

fn cli_cluster_typing(args: &[String], input: &[u8]) -> (bool, String) {
    // redis-cli waits without end for a cluster that never agrees: two minutes at most.
    let mut child = Command::new("timeout")
        .arg("120")
        .arg(redis_cli())
        .arg("--cluster")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run redis-cli --cluster");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().expect("redis-cli's output");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// `redis-cli --cluster create` with every node, `replicas` replicas per master.
fn create(nodes: &[&Node], replicas: usize) {
    let mut args = vec!["create".to_string()];
    args.extend(nodes.iter().map(|n| addr(n.port)));
    args.extend(["--cluster-replicas".to_string(), replicas.to_string(), "--cluster-yes".to_string()]);
    let (ok, out) = cli_cluster(&args);
    assert!(ok, "redis-cli --cluster create failed:\n{out}");
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    wait_until("every node to see the cluster ok", Duration::from_secs(20), || {
        nodes.iter().all(|n| info_field(n.port, "cluster_state").as_deref() == Some("ok"))
    });
    wait_replicas_synced(nodes);
}

/// Waits until every replica among `nodes` has its link to its master up (a first full sync
/// waits `repl-diskless-sync-delay`, five seconds by default, for more replicas).
fn wait_replicas_synced(nodes: &[&Node]) {
    wait_until("every replica to finish its first sync", Duration::from_secs(30), || {
        nodes.iter().all(|n| {
            let r = String::from_utf8_lossy(&ask(n.port, &["INFO", "replication"]).unwrap_or_default()).into_owned();
            r.contains("role:master") || r.contains("master_link_status:up")
        })
    });
}

/// `redis-cli --cluster add-node` of `replica` as a replica of the master at `master`.
fn add_replica(replica: &Node, master: &Node) {
    let (ok, out) = cli_cluster(&[
        "add-node".into(),
        addr(replica.port),
        addr(master.port),
        "--cluster-slave".into(),
        "--cluster-master-id".into(),
        myid(master.port),
    ]);
    assert!(ok, "add-node failed:\n{out}");
}

/// Masters of the first three kinds made by `--cluster create`, then a replica of each of
/// the last three kinds added by `--cluster add-node --cluster-slave`.
fn masters_then_replicas(kinds: [Kind; 6]) -> (Vec<Node>, Vec<(u16, u16)>) {
    let nodes: Vec<Node> = kinds.iter().map(|k| start_node(*k)).collect();
    create(&nodes.iter().take(3).collect::<Vec<_>>(), 0);
    for i in 0..3 {
        add_replica(&nodes[i + 3], &nodes[i]);
    }
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("the replicas to be known to every node", Duration::from_secs(30), || {
        refs.iter().all(|n| text(n.port, &["CLUSTER", "NODES"]).matches("slave").count() == 3)
    });
    wait_replicas_synced(&refs);
    let (_, replicas) = masters_and_replicas(&refs);
    assert_eq!(replicas.len(), 3, "{replicas:?}");
    (nodes, replicas)
}

/// `redis-cli --cluster check` through `port`: clean means every node agrees on the slots,
/// no slot is open and every slot is covered.
fn check_clean(port: u16) -> String {
    // A slot's new owner is told to the masters by the tool (SETSLOT NODE to each) and to the
    // replicas by the bus, within a ping or two: the check waits for that before judging.
    let mut out = String::new();
    wait_until("every node to agree about the slots", Duration::from_secs(20), || {
        out = cli_cluster(&["check".to_string(), addr(port)]).1;
        !out.contains("[ERR] Nodes don't agree")
    });
    let (ok, out) = cli_cluster(&["check".to_string(), addr(port)]);
    assert!(ok, "--cluster check failed:\n{out}");
    for want in ["[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered."] {
        assert!(out.contains(want), "--cluster check through {port}:\n{out}");
    }
    assert!(!out.contains("[WARNING]") && !out.contains("[ERR]"), "--cluster check through {port}:\n{out}");
    out
}

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One command on a fresh connection; None when the node does not answer.
fn ask(port: u16, args: &[&str]) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let v: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    s.write_all(&encode(&v)).ok()?;
    let mut buf = Vec::new();
    let mut tmp = [0u8; 65536];
    loop {
        if !buf.is_empty() {
            if let Some(e) = reply_end(&buf, 0) {
                buf.truncate(e);
                return Some(buf);
            }
        }
        let n = s.read(&mut tmp).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn text(port: u16, args: &[&str]) -> String {
    let r = ask(port, args).unwrap_or_default();
    // A bulk or verbatim reply's payload; anything else as sent.
    let s = String::from_utf8_lossy(&r).into_owned();
    match s.split_once("\r\n") {
        Some((h, rest)) if h.starts_with('$') => rest.trim_end_matches("\r\n").to_string(),
        _ => s.trim_end().to_string(),
    }
}

fn info_field(port: u16, field: &str) -> Option<String> {
    let t = text(port, &["CLUSTER", "INFO"]);
    t.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
}

fn myid(port: u16) -> String {
    text(port, &["CLUSTER", "MYID"])
}

/// The node's CLUSTER NODES line about itself.
fn my_line(port: u16) -> String {
    text(port, &["CLUSTER", "NODES"]).lines().find(|l| l.contains("myself")).unwrap_or("").to_string()
}

fn role(port: u16) -> String {
    let r = ask(port, &["ROLE"]).unwrap_or_default();
    let s = String::from_utf8_lossy(&r).into_owned();
    s.lines().nth(2).unwrap_or("").to_string()
}

/// A cluster client that follows MOVED and ASK, retries TRYAGAIN and CLUSTERDOWN, and moves
/// on from a dead node to the others — what a cluster-aware client library does.
struct Client {
    ports: Vec<u16>,
    slots: HashMap<u16, u16>,
    conns: HashMap<u16, TcpStream>,
}

fn slot_of(key: &str) -> u16 {
    // CRC16/XMODEM of the hash tag or key, as every client computes it.
    let k = key.as_bytes();
    let tag = match (k.iter().position(|&c| c == b'{'), k.iter().rposition(|&c| c == b'}')) {
        (Some(a), Some(_)) => match k[a + 1..].iter().position(|&c| c == b'}') {
            Some(b) if b > 0 => &k[a + 1..a + 1 + b],
            _ => k,
        },
        _ => k,
    };
    let mut crc: u16 = 0;
    for &b in tag {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc & 16383
}

impl Client {
    fn new(ports: &[u16]) -> Client {
        Client { ports: ports.to_vec(), slots: HashMap::new(), conns: HashMap::new() }
    }

    fn raw(&mut self, port: u16, args: &[Vec<u8>]) -> Option<Vec<u8>> {
        if let std::collections::hash_map::Entry::Vacant(e) = self.conns.entry(port) {
            let s = TcpStream::connect(("127.0.0.1", port)).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
            e.insert(s);
        }
        let s = self.conns.get_mut(&port)?;
        let res = (|| {
            s.write_all(&encode(args)).ok()?;
            let mut buf = Vec::new();
            let mut tmp = [0u8; 8192];
            loop {
                if !buf.is_empty() {
                    if let Some(e) = reply_end(&buf, 0) {
                        buf.truncate(e);
                        return Some(buf);
                    }
                }
                let n = s.read(&mut tmp).ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
        })();
        if res.is_none() {
            self.conns.remove(&port);
        }
        res
    }

    /// Runs a command on `key`'s node; the reply, after up to 30 s of redirections/retries.
    fn cmd(&mut self, key: &str, args: &[&str]) -> Vec<u8> {
        let slot = slot_of(key);
        let start = Instant::now();
        let mut asking: Option<u16> = None;
        let mut i = 0usize;
        loop {
            assert!(start.elapsed() < Duration::from_secs(30), "no node served {args:?}");
            let port = asking.or_else(|| self.slots.get(&slot).copied()).unwrap_or(self.ports[i % self.ports.len()]);
            let mut v: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
            if asking.take().is_some() {
                let _ = self.raw(port, &[b"ASKING".to_vec()]);
            }
            let Some(r) = self.raw(port, &std::mem::take(&mut v).into_iter().collect::<Vec<_>>()) else {
                self.slots.remove(&slot);
                i += 1;
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let s = String::from_utf8_lossy(&r).into_owned();
            if let Some(rest) = s.strip_prefix("-MOVED ") {
                let p: u16 = rest.trim_end().rsplit(':').next().unwrap().parse().unwrap();
                self.slots.insert(slot, p);
                continue;
            }
            if let Some(rest) = s.strip_prefix("-ASK ") {
                asking = Some(rest.trim_end().rsplit(':').next().unwrap().parse().unwrap());
                continue;
            }
            if s.starts_with("-CLUSTERDOWN") {
                // This node serves no such slot (it may have left the cluster): ask another,
                // as client libraries refresh their slot map on CLUSTERDOWN.
                self.slots.remove(&slot);
            }
            if s.starts_with("-TRYAGAIN") || s.starts_with("-CLUSTERDOWN") || s.starts_with("-LOADING") {
                std::thread::sleep(Duration::from_millis(50));
                i += 1;
                continue;
            }
            return r;
        }
    }
}

fn int(r: &[u8]) -> i64 {
    let s = String::from_utf8_lossy(r);
    s.trim_start_matches([':', '$']).lines().last().unwrap_or("").trim().parse().unwrap_or(-1)
}

/// Keys written through a client, each key's value its index.
fn write_keys(c: &mut Client, n: usize, prefix: &str) {
    for i in 0..n {
        let k = format!("{prefix}{i}");
        assert_eq!(c.cmd(&k, &["SET", &k, &i.to_string()]), b"+OK\r\n");
    }
}

fn read_sum(c: &mut Client, n: usize, prefix: &str) -> i64 {
    (0..n)
        .map(|i| {
            let k = format!("{prefix}{i}");
            let r = c.cmd(&k, &["GET", &k]);
            String::from_utf8_lossy(&r).lines().nth(1).and_then(|v| v.parse::<i64>().ok()).unwrap_or(-1_000_000)
        })
        .sum()
}

fn masters_and_replicas(nodes: &[&Node]) -> (Vec<u16>, Vec<(u16, u16)>) {
    // (replica port, its master's port) as CLUSTER NODES says.
    let ids: HashMap<String, u16> = nodes.iter().map(|n| (myid(n.port), n.port)).collect();
    let mut masters = Vec::new();
    let mut replicas = Vec::new();
    for n in nodes {
        let line = my_line(n.port);
        let f: Vec<&str> = line.split(' ').collect();
        if f[2].contains("slave") {
            replicas.push((n.port, ids[f[3]]));
        } else {
            masters.push(n.port);
        }
    }
    (masters, replicas)
}

/// Kills the master at `victim` and waits for its replica to be promoted by the others'
/// votes; returns the promoted port and how long it took.
fn fail_over(nodes: &mut [Node], victim: u16, replica: u16) -> Duration {
    let start = Instant::now();
    let n = nodes.iter_mut().find(|n| n.port == victim).unwrap();
    kill(n);
    wait_until(&format!("replica {replica} to be promoted after {victim} died"), Duration::from_secs(30), || {
        my_line(replica).contains("myself,master") && info_field(replica, "cluster_state").as_deref() == Some("ok")
    });
    start.elapsed()
}

/// Three masters with a replica each, made of the given kinds (master kinds first), through
/// the whole life of a cluster: create, write (each write confirmed by `WAIT 1`), check,
/// lose each of two masters in turn, get the old masters back as replicas, check again.
fn life_of_a_cluster(kinds: [Kind; 6], victims: [usize; 2]) {
    let mut nodes: Vec<Node> = kinds.iter().map(|k| start_node(*k)).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    create(&refs, 1);
    let (masters, replicas) = masters_and_replicas(&refs);
    assert_eq!(masters.len(), 3, "three masters");
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let mut c = Client::new(&ports);
    write_keys(&mut c, 600, "k");
    // Every master's replica has the writes before a master dies (WAIT 1 on each master).
    for m in &masters {
        let r = ask(*m, &["WAIT", "1", "5000"]).unwrap();
        assert_eq!(int(&r), 1, "master {m}: WAIT 1 → {}", show(&r));
    }
    check_clean(ports[0]);
    let expected: i64 = (0..600).sum();
    for v in victims {
        let victim = nodes[v].port;
        let replica = replicas.iter().find(|(_, m)| *m == victim).map(|(r, _)| *r).expect("a replica of the victim");
        let took = fail_over(&mut nodes, victim, replica);
        eprintln!(
            "{:?} master {victim} killed: its {:?} replica {replica} promoted in {:.1} s",
            nodes[v].kind,
            nodes.iter().find(|n| n.port == replica).unwrap().kind,
            took.as_secs_f64()
        );
        assert_eq!(read_sum(&mut c, 600, "k"), expected, "every confirmed write after {victim} died");
        // The old master comes back as a replica of the one that replaced it.
        restart(&mut nodes[v]);
        let new_master = myid(replica);
        wait_until(&format!("{victim} to rejoin as a replica"), Duration::from_secs(30), || {
            let l = my_line(victim);
            l.contains("myself,slave") && l.contains(&new_master)
        });
        wait_until(&format!("{victim} to sync from its new master"), Duration::from_secs(30), || {
            role(victim).contains("connected")
                || String::from_utf8_lossy(&ask(victim, &["INFO", "replication"]).unwrap_or_default())
                    .contains("master_link_status:up")
        });
    }
    write_keys(&mut c, 100, "after");
    assert_eq!(read_sum(&mut c, 100, "after"), (0..100).sum::<i64>());
    let live: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    wait_until("every node to agree again", Duration::from_secs(20), || {
        cli_cluster(&["check".to_string(), addr(live[0])]).1.contains("[OK] All nodes agree about slots configuration.")
    });
    check_clean(live[0]);
}

#[test]
fn redis_cli_makes_an_atoll_cluster_that_fails_over_and_heals() {
    life_of_a_cluster([Kind::Atoll; 6], [0, 1]);
}

/// Redis 7.2.6 and Atoll nodes in one cluster: an Atoll replica takes over from a Redis master
/// and a Redis replica from an Atoll master, each elected by the other kind's votes.
#[test]
fn a_cluster_of_redis_and_atoll_nodes_fails_over_both_ways() {
    // Masters Atoll, Redis, Atoll, each with a replica of the other kind.
    let (mut nodes, replicas) =
        masters_then_replicas([Kind::Atoll, Kind::Redis, Kind::Atoll, Kind::Redis, Kind::Atoll, Kind::Redis]);
    let kind_of = |p: u16, nodes: &[Node]| nodes.iter().find(|n| n.port == p).unwrap().kind;
    let a = *replicas.iter().find(|(_, m)| kind_of(*m, &nodes) == Kind::Redis).unwrap();
    let b = *replicas.iter().find(|(_, m)| kind_of(*m, &nodes) == Kind::Atoll).unwrap();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let mut c = Client::new(&ports);
    write_keys(&mut c, 600, "k");
    for n in &nodes {
        if my_line(n.port).contains("master") {
            assert_eq!(int(&ask(n.port, &["WAIT", "1", "5000"]).unwrap()), 1);
        }
    }
    check_clean(ports[0]);
    let kinds: Vec<(Kind, u16)> = nodes[..3].iter().map(|n| (n.kind, n.port)).collect();
    reshard_between_kinds(&kinds, &mut c, &ports);
    assert_eq!(read_sum(&mut c, 600, "k"), (0..600).sum::<i64>());
    // The keys the moves restored on each master are on its replica before masters die.
    for (_, m) in &kinds {
        assert_eq!(int(&ask(*m, &["WAIT", "1", "5000"]).unwrap()), 1, "master {m}'s replica after the moves");
    }
    for (replica, master) in [a, b] {
        let took = fail_over(&mut nodes, master, replica);
        eprintln!(
            "{:?} master killed, {:?} replica promoted in {:.1} s",
            kind_of(master, &nodes),
            kind_of(replica, &nodes),
            took.as_secs_f64()
        );
        assert_eq!(read_sum(&mut c, 600, "k"), (0..600).sum::<i64>());
        let i = nodes.iter().position(|n| n.port == master).unwrap();
        restart(&mut nodes[i]);
        let new_master = myid(replica);
        wait_until("the old master to rejoin as a replica", Duration::from_secs(30), || {
            my_line(master).contains("myself,slave") && my_line(master).contains(&new_master)
        });
    }
    wait_until("every node to agree again", Duration::from_secs(20), || {
        cli_cluster(&["check".to_string(), addr(ports[0])]).1.contains("[OK] All nodes agree")
    });
    check_clean(ports[0]);
}

/// Valkey 9.1.2 nodes speak the same bus: a cluster of Valkey and Atoll masters forms and
/// agrees, slots move between the kinds both ways, a Valkey replica of an Atoll master takes
/// over when it dies, and an Atoll replica of a Valkey master likewise.
#[test]
fn a_cluster_of_valkey_and_atoll_nodes_forms_reshards_and_fails_over_both_ways() {
    let (mut nodes, replicas) =
        masters_then_replicas([Kind::Atoll, Kind::Valkey, Kind::Atoll, Kind::Valkey, Kind::Atoll, Kind::Valkey]);
    let kind_of = |p: u16, nodes: &[Node]| nodes.iter().find(|n| n.port == p).unwrap().kind;
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let mut c = Client::new(&ports);
    write_keys(&mut c, 300, "v");
    check_clean(ports[1]);
    let kinds: Vec<(Kind, u16)> = nodes[..3].iter().map(|n| (n.kind, n.port)).collect();
    reshard_between_kinds(&kinds, &mut c, &ports);
    for (master_kind, replica_kind) in [(Kind::Atoll, Kind::Valkey), (Kind::Valkey, Kind::Atoll)] {
        let (replica, master) = *replicas
            .iter()
            .find(|(r, m)| kind_of(*m, &nodes) == master_kind && kind_of(*r, &nodes) == replica_kind)
            .expect("a replica of the other kind");
        assert_eq!(int(&ask(master, &["WAIT", "1", "5000"]).unwrap()), 1);
        let took = fail_over(&mut nodes, master, replica);
        eprintln!("{master_kind:?} master killed, {replica_kind:?} replica promoted in {:.1} s", took.as_secs_f64());
        assert_eq!(read_sum(&mut c, 300, "v"), (0..300).sum::<i64>());
    }
}

/// A client incrementing 200 counters across the whole key space in a thread of its own,
/// counting each acknowledged INCR: afterwards every counter must hold exactly its count —
/// nothing lost, nothing counted twice — wherever its slot went meanwhile.
struct IncrLoad {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    counts: Arc<Mutex<Vec<i64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    prefix: String,
}

impl IncrLoad {
    fn start(ports: &[u16], prefix: &str) -> IncrLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let counts = Arc::new(Mutex::new(vec![0i64; 200]));
        let thread = {
            let (stop, done, counts, ports, prefix) =
                (stop.clone(), done.clone(), counts.clone(), ports.to_vec(), prefix.to_string());
            std::thread::spawn(move || {
                let mut c = Client::new(&ports);
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let k = format!("{prefix}{}", i % 200);
                    let r = c.cmd(&k, &["INCR", &k]);
                    assert!(r.starts_with(b":"), "INCR {k}: {}", show(&r));
                    counts.lock().unwrap()[i % 200] += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        };
        IncrLoad { stop, done, counts, thread: Some(thread), prefix: prefix.to_string() }
    }

    fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Stops the load and checks every counter through `c`; the number of INCRs made.
    fn finish(mut self, c: &mut Client) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().expect("the INCR load");
        let counts = self.counts.lock().unwrap().clone();
        for (i, want) in counts.iter().enumerate() {
            let k = format!("{}{i}", self.prefix);
            let r = c.cmd(&k, &["GET", &k]);
            let got = String::from_utf8_lossy(&r).lines().nth(1).unwrap_or("0").parse::<i64>().unwrap_or(0);
            assert_eq!(got, *want, "{k}: every acknowledged INCR counted once");
        }
        self.done()
    }
}

/// `redis-cli --cluster reshard` of `slots` slots from the master at `from` to the one at `to`.
fn reshard(from: u16, to: u16, slots: usize) -> Duration {
    let started = Instant::now();
    let (ok, out) = cli_cluster(&[
        "reshard".into(),
        addr(from),
        "--cluster-from".into(),
        myid(from),
        "--cluster-to".into(),
        myid(to),
        "--cluster-slots".into(),
        slots.to_string(),
        "--cluster-yes".into(),
    ]);
    assert!(ok, "reshard {from} → {to} failed:\n{}", &out[out.len().saturating_sub(2000)..]);
    started.elapsed()
}

/// `redis-cli --cluster reshard` moves 1,000 slots from one Atoll master to another while a
/// client keeps incrementing counters across the whole key space: the client follows the
/// ASK/MOVED redirections, no key is lost or duplicated, every increment counts once.
#[test]
fn resharding_under_load_loses_and_duplicates_nothing() {
    let nodes: Vec<Node> = (0..3).map(|_| start_node(Kind::Atoll)).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    create(&refs, 0);
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let mut c = Client::new(&ports);
    write_keys(&mut c, 3000, "r");
    let load = IncrLoad::start(&ports, "ctr");
    let took = reshard(ports[0], ports[1], 1000);
    let incrs = load.finish(&mut c);
    eprintln!("1000 slots resharded in {:.1} s under {incrs} INCRs", took.as_secs_f64());
    check_clean(ports[2]);
    assert_eq!(read_sum(&mut c, 3000, "r"), (0..3000).sum::<i64>());
    let total: i64 = ports.iter().map(|p| int(&ask(*p, &["DBSIZE"]).unwrap())).sum();
    assert_eq!(total, 3000 + 200, "no key duplicated across nodes");
    let moved = int(&ask(ports[1], &["DBSIZE"]).unwrap());
    assert!(moved > 1000, "the target got the moved slots' keys ({moved})");
}

/// Slots move between node kinds both ways under a write load: `redis-cli --cluster reshard`
/// drives MIGRATE from one kind's master into the other's (DUMP payloads cross: Redis 7.2's
/// RDB 11, Valkey 9's RDB 80 into Atoll, Atoll's into both), every counter keeps each INCR
/// once, every key is readable, and `--cluster check` is clean after each move.
fn reshard_between_kinds(masters: &[(Kind, u16)], c: &mut Client, ports: &[u16]) {
    let load = IncrLoad::start(ports, "mix");
    // Every counter exists before slots move (each INCR goes to the next of the 200).
    wait_until("the load to touch every counter", Duration::from_secs(20), || load.done() >= 200);
    let atoll = masters.iter().find(|(k, _)| *k == Kind::Atoll).unwrap().1;
    for (kind, other) in masters.iter().filter(|(k, _)| *k != Kind::Atoll) {
        for (from, to) in [(*other, atoll), (atoll, *other)] {
            let had = int(&ask(to, &["DBSIZE"]).unwrap());
            let took = reshard(from, to, 300);
            let moved = Instant::now();
            let after = load.done();
            wait_until("the load to go on after the move", Duration::from_secs(20), || load.done() > after + 50);
            let has = int(&ask(to, &["DBSIZE"]).unwrap());
            assert!(has > had, "{from} → {to}: keys crossed between the kinds ({had} before, {has} after)");
            check_clean(from);
            eprintln!(
                "300 slots {from} → {to} ({kind:?} and Atoll) in {:.1} s; the load went on and every node agreed {:.1} s later",
                took.as_secs_f64(),
                moved.elapsed().as_secs_f64()
            );
        }
    }
    load.finish(c);
}

/// `--cluster info`'s lines per master: (port, keys, slots, replicas).
fn cluster_info_lines(port: u16) -> Vec<(u16, i64, i64, i64)> {
    let (ok, out) = cli_cluster(&["info".into(), addr(port)]);
    assert!(ok, "--cluster info:\n{out}");
    out.lines()
        .filter_map(|l| {
            // "127.0.0.1:7100 (6c3b95c3...) -> 341 keys | 5461 slots | 1 slaves."
            let (a, rest) = l.split_once(" (")?;
            let p = a.rsplit(':').next()?.parse().ok()?;
            let n: Vec<i64> = rest.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
            let k = n.len();
            (k >= 3).then(|| (p, n[k - 3], n[k - 2], n[k - 1]))
        })
        .collect()
}

/// Redis 7.2.6's own tool grows, balances, repairs and shrinks an Atoll cluster: `info` and
/// `call` report what each node holds; `add-node` (as master and as replica) and `rebalance
/// --cluster-use-empty-masters` spread the slots over a new master under a write load; `fix`
/// closes a slot left half-migrated and covers a slot nobody serves; `rebalance` with weight
/// 0 empties a master and `del-node` removes it and a replica (each reset to a cluster of its
/// own); `import` brings a standalone Atoll's keys in by copy and a standalone Redis's by
/// move. Every step ends with `--cluster check` clean and every key readable.
#[test]
fn redis_cli_tools_grow_balance_fix_import_and_shrink_an_atoll_cluster() {
    let mut nodes: Vec<Node> = (0..3).map(|_| start_node(Kind::Atoll)).collect();
    create(&nodes.iter().collect::<Vec<_>>(), 0);
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let mut c = Client::new(&ports);
    write_keys(&mut c, 1000, "t");

    // info and call: what each master holds, summed as the tool sums it.
    let lines = cluster_info_lines(ports[0]);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines.iter().map(|l| l.1).sum::<i64>(), 1000, "{lines:?}");
    assert_eq!(lines.iter().map(|l| l.2).sum::<i64>(), 16384, "{lines:?}");
    let (ok, out) = cli_cluster(&["info".into(), addr(ports[0])]);
    assert!(ok && out.contains("[OK] 1000 keys in 3 masters."), "{out}");
    let (ok, out) = cli_cluster(&["call".into(), addr(ports[0]), "DBSIZE".into()]);
    assert!(ok, "{out}");
    let called: i64 = out
        .lines()
        .filter_map(|l| {
            l.strip_prefix("127.0.0.1:").and_then(|r| r.split_once(": ")).map(|(_, n)| n.trim().parse::<i64>().unwrap())
        })
        .sum();
    assert_eq!(called, 1000, "--cluster call DBSIZE:\n{out}");

    // A new master and its replica join; rebalance gives the master a quarter of the slots
    // while a client writes.
    let (m, r) = (start_node(Kind::Atoll), start_node(Kind::Atoll));
    let (ok, out) = cli_cluster(&["add-node".into(), addr(m.port), addr(ports[0])]);
    assert!(ok && out.contains("[OK] New node added correctly."), "{out}");
    wait_until("the new master to be known everywhere", Duration::from_secs(20), || {
        ports.iter().all(|p| text(*p, &["CLUSTER", "NODES"]).contains(&myid(m.port)))
    });
    add_replica(&r, &m);
    wait_replicas_synced(&[&r]);
    // A master that joined serves (and takes migrated keys) once its own view of the cluster
    // is ok: as in Redis, at least two seconds after it first computed it.
    wait_until("the new nodes to see the cluster ok", Duration::from_secs(20), || {
        [m.port, r.port].iter().all(|p| info_field(*p, "cluster_state").as_deref() == Some("ok"))
    });
    let all: Vec<u16> = ports.iter().copied().chain([m.port, r.port]).collect();
    let load = IncrLoad::start(&all, "bal");
    wait_until("the load to touch every counter", Duration::from_secs(20), || load.done() >= 200);
    let (ok, out) = cli_cluster(&["rebalance".into(), addr(ports[0]), "--cluster-use-empty-masters".into()]);
    assert!(ok, "rebalance:\n{}", &out[out.len().saturating_sub(2000)..]);
    let lines = cluster_info_lines(ports[0]);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines.iter().all(|l| l.2 == 4096), "rebalanced: {lines:?}");
    assert_eq!(lines.iter().find(|l| l.0 == m.port).unwrap().3, 1, "the new master's replica: {lines:?}");
    check_clean(m.port);
    load.finish(&mut c);
    assert_eq!(read_sum(&mut c, 1000, "t"), (0..1000).sum::<i64>());

    // fix: a slot left MIGRATING/IMPORTING between two masters is moved and closed.
    let key = "t7";
    let slot = slot_of(key).to_string();
    let owner = *all
        .iter()
        .find(|p| {
            int(&ask(**p, &["CLUSTER", "COUNTKEYSINSLOT", &slot]).unwrap()) == 1 && my_line(**p).contains("master")
        })
        .unwrap();
    let other = *ports.iter().chain([&m.port]).find(|p| **p != owner).unwrap();
    assert_eq!(text(owner, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &myid(other)]), "+OK");
    assert_eq!(text(other, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &myid(owner)]), "+OK");
    let (_, out) = cli_cluster(&["check".into(), addr(ports[0])]);
    assert!(out.contains(&format!("The following slots are open: {slot}")), "{out}");
    let (ok, out) = cli_cluster(&["fix".into(), addr(ports[0])]);
    assert!(ok, "fix:\n{out}");
    check_clean(ports[0]);
    assert_eq!(int(&ask(other, &["CLUSTER", "COUNTKEYSINSLOT", &slot]).unwrap()), 1, "the key moved with its slot");
    assert_eq!(read_sum(&mut c, 1000, "t"), (0..1000).sum::<i64>());

    // fix: a slot nobody serves (no keys in it) is covered again after the prompt.
    let holder = ports[0];
    let owned: Vec<u16> = my_line(holder)
        .split(' ')
        .skip(8)
        .flat_map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            a.parse::<u16>().unwrap()..=b.parse::<u16>().unwrap()
        })
        .collect();
    let empty = *owned
        .iter()
        .find(|s| int(&ask(holder, &["CLUSTER", "COUNTKEYSINSLOT", &s.to_string()]).unwrap()) == 0)
        .expect("an empty slot");
    assert_eq!(text(holder, &["CLUSTER", "DELSLOTS", &empty.to_string()]), "+OK");
    wait_until("the uncovered slot to show", Duration::from_secs(10), || {
        cli_cluster(&["check".into(), addr(ports[0])]).1.contains("Not all 16384 slots are covered")
    });
    let (_, out) = cli_cluster_answering_yes(&["fix".into(), addr(ports[0])]);
    assert!(out.contains(&format!("Covering slot {empty} with")), "fix:\n{out}");
    wait_until("every node to see the slot covered", Duration::from_secs(20), || {
        all.iter().all(|p| info_field(*p, "cluster_state").as_deref() == Some("ok"))
    });
    check_clean(ports[0]);

    // Shrink: empty the new master by weight 0, then del-node it and its replica.
    let (ok, out) =
        cli_cluster(&["rebalance".into(), addr(ports[0]), "--cluster-weight".into(), format!("{}=0", myid(m.port))]);
    assert!(ok, "rebalance to weight 0:\n{}", &out[out.len().saturating_sub(2000)..]);
    assert_eq!(int(&ask(m.port, &["DBSIZE"]).unwrap()), 0, "the emptied master holds no key");
    for gone in [r.port, m.port] {
        let (ok, out) = cli_cluster(&["del-node".into(), addr(ports[0]), myid(gone)]);
        assert!(ok && out.contains("Sending CLUSTER RESET SOFT to the deleted node"), "del-node:\n{out}");
        assert_eq!(info_field(gone, "cluster_known_nodes").as_deref(), Some("1"), "{gone} forgot the others");
    }
    wait_until("the others to forget the deleted nodes", Duration::from_secs(20), || {
        ports.iter().all(|p| info_field(*p, "cluster_known_nodes").as_deref() == Some("3"))
    });
    let lines = cluster_info_lines(ports[0]);
    assert_eq!((lines.len(), lines.iter().map(|l| l.2).sum::<i64>()), (3, 16384), "{lines:?}");
    check_clean(ports[0]);
    assert_eq!(read_sum(&mut c, 1000, "t"), (0..1000).sum::<i64>());

    // import: a standalone Atoll's keys copied in, a standalone Redis's moved in.
    for (kind, prefix, copy) in [(Kind::Atoll, "ia", true), (Kind::Redis, "ir", false)] {
        let src = match kind {
            Kind::Atoll => start_atoll(&[]),
            _ => start_redis(&[]),
        };
        let mut pipe = Vec::new();
        for i in 0..300 {
            pipe.extend(encode(&[b"SET".to_vec(), format!("{prefix}{i}").into_bytes(), i.to_string().into_bytes()]));
        }
        pipe.extend(encode(&[b"RPUSH".to_vec(), format!("{prefix}list").into_bytes(), b"a".to_vec(), b"b".to_vec()]));
        let mut s = TcpStream::connect(("127.0.0.1", src.port)).unwrap();
        s.write_all(&pipe).unwrap();
        wait_until("the source's keys", Duration::from_secs(10), || int(&ask(src.port, &["DBSIZE"]).unwrap()) == 301);
        let mut args = vec!["import".to_string(), addr(ports[0]), "--cluster-from".into(), addr(src.port)];
        if copy {
            args.push("--cluster-copy".into());
        }
        let (ok, out) = cli_cluster(&args);
        assert!(ok, "import from {kind:?}:\n{}", &out[out.len().saturating_sub(2000)..]);
        assert_eq!(read_sum(&mut c, 300, prefix), (0..300).sum::<i64>(), "imported from {kind:?}");
        let l = format!("{prefix}list");
        assert_eq!(show(&c.cmd(&l, &["LRANGE", &l, "0", "-1"])), show(b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"));
        assert_eq!(
            int(&ask(src.port, &["DBSIZE"]).unwrap()),
            if copy { 301 } else { 0 },
            "the source after import from {kind:?}"
        );
    }
    let (ok, out) = cli_cluster(&["info".into(), addr(ports[0])]);
    assert!(ok && out.contains("[OK] 1802 keys in 3 masters."), "{out}");
    check_clean(ports[0]);
    nodes.extend([m, r]);
}

/// Two masters splitting the slots, of each kind: what clients see when a key is elsewhere,
/// being moved, or unserved, and the CLUSTER subcommands' refusals, byte for byte as Redis.
#[test]
fn redirections_and_cluster_errors_match_redis() {
    let mut transcripts = Vec::new();
    for kind in [Kind::Redis, Kind::Atoll] {
        let a = start_node(kind);
        let b = start_node(kind);
        let ids: std::cell::RefCell<Vec<(String, &str)>> = Default::default();
        let run = |port: u16, args: &[&str]| -> String {
            let mut r = format!("{args:?} → {}", show(&ask(port, args).unwrap_or_default()));
            for (id, name) in ids.borrow().iter() {
                r = r.replace(id, name);
            }
            r.replace(&a.bus.to_string(), "<Abus>")
                .replace(&b.bus.to_string(), "<Bbus>")
                .replace(&a.port.to_string(), "<A>")
                .replace(&b.port.to_string(), "<B>")
        };
        let t: std::cell::RefCell<Vec<String>> = Default::default();
        let step = |port: u16, args: &[&str]| t.borrow_mut().push(run(port, args));
        step(a.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
        step(b.port, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
        step(a.port, &["CLUSTER", "MEET", "127.0.0.1", &b.port.to_string(), &b.bus.to_string()]);
        wait_until("both nodes to agree", Duration::from_secs(20), || {
            info_field(a.port, "cluster_state").as_deref() == Some("ok")
                && info_field(b.port, "cluster_state").as_deref() == Some("ok")
                && info_field(a.port, "cluster_known_nodes").as_deref() == Some("2")
        });
        let (ida, idb) = (myid(a.port), myid(b.port));
        ids.borrow_mut().extend([(ida.clone(), "<idA>"), (idb.clone(), "<idB>")]);
        // foo is slot 12182 (on B), bar 5061 (on A), {bar}x 5061 too.
        for args in [
            &["SET", "bar", "1"][..],
            &["GET", "foo"],
            &["MSET", "bar", "1", "foo", "2"],
            &["MSET", "bar", "1", "{bar}x", "2"],
            &["SELECT", "1"],
            &["SELECT", "0"],
            &["MOVE", "bar", "1"],
            &["SWAPDB", "0", "1"],
            &["COPY", "bar", "baz", "DB", "1"],
            &["COPY", "bar", "{bar}z", "DB", "1"],
            &["COPY", "bar", "{bar}z"],
            &["CLUSTER", "KEYSLOT", "{user1000}.following"],
            &["CLUSTER", "COUNTKEYSINSLOT", "5061"],
            &["CLUSTER", "COUNTKEYSINSLOT", "16384"],
            &["CLUSTER", "GETKEYSINSLOT", "5061", "10"],
            &["CLUSTER", "GETKEYSINSLOT", "5061", "-1"],
            &["CLUSTER", "ADDSLOTS", "1"],
            &["CLUSTER", "ADDSLOTS", "abc"],
            &["CLUSTER", "ADDSLOTS", "16384"],
            &["CLUSTER", "ADDSLOTSRANGE", "5", "1"],
            &["CLUSTER", "ADDSLOTSRANGE", "5"],
            &["CLUSTER", "SETSLOT", "9999", "MIGRATING", &idb],
            &["CLUSTER", "SETSLOT", "1", "IMPORTING", &ida],
            &["CLUSTER", "SETSLOT", "1", "NODE", "0000000000000000000000000000000000000000"],
            &["CLUSTER", "SETSLOT", "1", "BOGUS"],
            &["CLUSTER", "FORGET", &ida],
            &["CLUSTER", "FORGET", "0000000000000000000000000000000000000000"],
            &["CLUSTER", "REPLICATE", &ida],
            &["CLUSTER", "REPLICATE", &idb],
            &["CLUSTER", "COUNT-FAILURE-REPORTS", &idb],
            &["CLUSTER", "SET-CONFIG-EPOCH", "5"],
            &["CLUSTER", "FAILOVER"],
            &["CLUSTER", "FAILOVER", "BOGUS"],
            &["CLUSTER", "RESET", "BOGUS"],
            &["CLUSTER", "MEET", "not-an-ip", "1"],
            &["CLUSTER", "MEET", "127.0.0.1", "x"],
            &["CLUSTER", "BOGUS"],
            &["CLUSTER", "FLUSHSLOTS"],
            &["ASKING"],
            &["READONLY"],
            &["READWRITE"],
        ] {
            step(a.port, args);
        }
        // Scripts: declared keys are routed as keys; a script's own commands must stay on this
        // node, and (with a shebang) in its declared keys' slot.
        let other_a = (0..100_000).map(|i| format!("k{i}")).find(|k| slot_of(k) < 8192 && slot_of(k) != 5061).unwrap();
        let get_other = format!("return redis.call('get', '{other_a}')");
        for args in [
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "foo"][..],
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "bar"],
            &["EVAL", "return redis.call('get', 'foo')", "1", "bar"],
            &["EVAL", "return redis.pcall('get', 'foo')", "0"],
            &["EVAL", &get_other, "1", "bar"],
            &["EVAL", &format!("#!lua\n{get_other}"), "1", "bar"],
            &["EVAL", &format!("#!lua flags=allow-cross-slot-keys\n{get_other}"), "1", "bar"],
            &["EVAL", "#!lua flags=no-cluster\nreturn 1", "0"],
        ] {
            step(a.port, args);
        }
        // A slot on the move: bar's slot migrates from A to B. A key A still has is served;
        // a missing one is sent to B with ASK; a multi-key command with some missing gets
        // TRYAGAIN; B serves bar's slot only after ASKING, and MOVEs it back otherwise.
        step(a.port, &["SET", "bar", "here"]);
        step(b.port, &["CLUSTER", "SETSLOT", "5061", "IMPORTING", &ida]);
        step(a.port, &["CLUSTER", "SETSLOT", "5061", "MIGRATING", &idb]);
        step(a.port, &["GET", "bar"]);
        step(a.port, &["GET", "{bar}missing"]);
        step(a.port, &["MGET", "bar", "{bar}missing"]);
        step(b.port, &["GET", "{bar}missing"]);
        let mut c = RawConn::connect(b.port);
        let mut sess = |args: &[&str]| {
            let v: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
            let r = show(&c.cmd(&v)).replace(&a.port.to_string(), "<A>");
            t.borrow_mut().push(format!("B session {args:?} → {r}"));
        };
        sess(&["ASKING"]);
        sess(&["SET", "{bar}new", "1"]);
        sess(&["GET", "{bar}new"]);
        sess(&["ASKING"]);
        sess(&["MGET", "{bar}new", "{bar}none"]);
        sess(&["MULTI"]);
        sess(&["GET", "foo"]);
        sess(&["GET", "bar"]);
        sess(&["EXEC"]);
        // The slot unserved: CLUSTERDOWN.
        step(b.port, &["CLUSTER", "SETSLOT", "5061", "STABLE"]);
        step(a.port, &["CLUSTER", "SETSLOT", "5061", "STABLE"]);
        step(a.port, &["CLUSTER", "DELSLOTSRANGE", "9000", "9001"]);
        step(a.port, &["CLUSTER", "DELSLOTS", "100"]);
        step(a.port, &["GET", "{bar}x"]);
        let hundred = (0..100_000).map(|i| format!("k{i}")).find(|k| slot_of(k) == 100).unwrap();
        step(a.port, &["GET", &hundred]);
        transcripts.push(t.into_inner());
    }
    let (redis, atoll) = (&transcripts[0], &transcripts[1]);
    for (r, a) in redis.iter().zip(atoll) {
        assert_eq!(a, r, "Atoll (left) against Redis 7.2.6 (right)");
    }
    assert_eq!(redis.len(), atoll.len());
    // The walk reached every kind of redirection.
    for want in [
        "Script attempted to access a non local key in a cluster node",
        "Script attempted to access keys that do not hash to the same slot",
        "Can not run script on cluster, 'no-cluster' flag is set.",
        "-MOVED 12182",
        "-ASK 5061",
        "-TRYAGAIN",
        "-CROSSSLOT",
        "-CLUSTERDOWN Hash slot not served",
        "-CLUSTERDOWN The cluster is down",
        "-EXECABORT",
    ] {
        assert!(atoll.iter().any(|l| l.contains(want)), "no {want} in {atoll:#?}");
    }
}

/// nodes.conf is Redis's format: Redis 7.2.6 starts on a file Atoll wrote, as the same node
/// with the same slots and epochs, and Atoll on Redis's.
#[test]
fn nodes_conf_moves_between_redis_and_atoll() {
    for (first, second) in [(Kind::Atoll, Kind::Redis), (Kind::Redis, Kind::Atoll)] {
        let mut n = start_node(first);
        assert_eq!(text(n.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "99", "200", "300"]), "+OK");
        assert_eq!(text(n.port, &["CLUSTER", "SET-CONFIG-EPOCH", "7"]), "+OK");
        let id = myid(n.port);
        let shard = text(n.port, &["CLUSTER", "MYSHARDID"]);
        assert_eq!(text(n.port, &["CLUSTER", "SAVECONFIG"]), "+OK");
        kill(&mut n);
        n.kind = second;
        restart(&mut n);
        assert_eq!(myid(n.port), id, "{second:?} took {first:?}'s node ID");
        assert_eq!(text(n.port, &["CLUSTER", "MYSHARDID"]), shard);
        let line = my_line(n.port);
        assert!(line.ends_with(" 7 connected 0-99 200-300"), "{second:?} after {first:?}: {line}");
        assert_eq!(info_field(n.port, "cluster_current_epoch").as_deref(), Some("7"));
    }
}

/// The cluster-* settings act as in Redis: coverage, reads while down, the announced
/// address, port and hostname, and which endpoint redirections and CLUSTER SLOTS/SHARDS name.
#[test]
fn cluster_settings_act_as_redis() {
    let mut transcripts = Vec::new();
    for kind in [Kind::Redis, Kind::Atoll] {
        let a = start_node(kind);
        let b = start_node(kind);
        let ids: std::cell::RefCell<Vec<(String, &str)>> = Default::default();
        let run = |port: u16, args: &[&str]| -> String {
            let mut r = format!("{args:?} → {}", show(&ask(port, args).unwrap_or_default()));
            for (id, name) in ids.borrow().iter() {
                r = r.replace(id, name);
            }
            r.replace(&a.bus.to_string(), "<Abus>")
                .replace(&b.bus.to_string(), "<Bbus>")
                .replace(&a.port.to_string(), "<A>")
                .replace(&b.port.to_string(), "<B>")
        };
        let t: std::cell::RefCell<Vec<String>> = Default::default();
        let step = |port: u16, args: &[&str]| t.borrow_mut().push(run(port, args));
        // B announces another address, ports and a hostname.
        for (k, v) in [
            ("cluster-announce-hostname", "node-b.example"),
            ("cluster-announce-human-nodename", "bee"),
            ("cluster-announce-port", "7777"),
            ("cluster-announce-bus-port", &b.bus.to_string()),
        ] {
            step(b.port, &["CONFIG", "SET", k, v]);
        }
        step(a.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
        step(b.port, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
        step(a.port, &["CLUSTER", "MEET", "127.0.0.1", &b.port.to_string(), &b.bus.to_string()]);
        ids.borrow_mut().extend([(myid(a.port), "<idA>"), (myid(b.port), "<idB>")]);
        wait_until("A to know B's hostname and the cluster ok", Duration::from_secs(20), || {
            info_field(a.port, "cluster_state").as_deref() == Some("ok")
                && text(a.port, &["CLUSTER", "NODES"]).contains("node-b.example")
                && info_field(b.port, "cluster_state").as_deref() == Some("ok")
        });
        step(a.port, &["GET", "foo"]);
        for endpoint in ["hostname", "unknown-endpoint", "ip"] {
            // Redis applies the setting at once: the very next reply names the new endpoint.
            step(a.port, &["CONFIG", "SET", "cluster-preferred-endpoint-type", endpoint]);
            step(a.port, &["GET", "foo"]);
            step(a.port, &["CLUSTER", "SLOTS"]);
        }
        // B's line as A sees it: the announced port and hostname (times and the epoch, which
        // depends on which node ID is smaller, masked).
        let line = text(a.port, &["CLUSTER", "NODES"])
            .lines()
            .find(|l| !l.contains("myself"))
            .map(|l| {
                l.split(' ')
                    .enumerate()
                    .map(|(i, f)| if (4..=6).contains(&i) { "<t>" } else { f })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        t.borrow_mut().push(
            run(0, &[]).replace("[] → ", "")
                + &line.replace(&myid(b.port), "<idB>").replace(&b.bus.to_string(), "<Bbus>"),
        );
        // Coverage: with B's slots unknown to A, A is down unless full coverage is not required.
        step(a.port, &["SET", "bar", "1"]);
        step(a.port, &["CLUSTER", "DELSLOTSRANGE", "8192", "16383"]);
        wait_until("A to see the cluster down", Duration::from_secs(10), || {
            info_field(a.port, "cluster_state").as_deref() == Some("fail")
        });
        step(a.port, &["GET", "bar"]);
        step(a.port, &["CONFIG", "SET", "cluster-allow-reads-when-down", "yes"]);
        step(a.port, &["GET", "bar"]);
        step(a.port, &["SET", "bar", "2"]);
        step(a.port, &["CONFIG", "SET", "cluster-require-full-coverage", "no"]);
        wait_until("A to see the cluster ok again", Duration::from_secs(10), || {
            info_field(a.port, "cluster_state").as_deref() == Some("ok")
        });
        step(a.port, &["SET", "bar", "3"]);
        step(a.port, &["GET", "foo"]);
        transcripts.push(t.into_inner());
    }
    let (redis, atoll) = (&transcripts[0], &transcripts[1]);
    for (r, a) in redis.iter().zip(atoll) {
        assert_eq!(a, r, "Atoll (left) against Redis 7.2.6 (right)");
    }
    assert_eq!(redis.len(), atoll.len());
}

/// What a node knows of its keys by slot, of its links and of its blocked clients, beside
/// Redis 7.2.6 in the same steps: COUNTKEYSINSLOT counts keys as they come and go (a key whose
/// TTL passed but that nobody deleted yet still counts, as in Redis's index), GETKEYSINSLOT
/// lists them, a client blocked on a key of a slot that moves away is answered with MOVED and
/// one subscribed to a shard channel of it with `sunsubscribe`,
/// the keys of a slot taken over are deleted on the master and, through the replication
/// stream, on its replica; DEBUG CLUSTERLINK KILL and DROP-CLUSTER-PACKET-FILTER act, and
/// CLUSTER LINKS and INFO's mem_cluster_links measure the links.
#[test]
fn slot_bookkeeping_blocked_clients_and_links_act_as_redis() {
    let mut transcripts = Vec::new();
    for kind in [Kind::Redis, Kind::Atoll] {
        let a = start_node(kind);
        let b = start_node(kind);
        let r = start_node(kind);
        let ids: std::cell::RefCell<Vec<(String, &str)>> = Default::default();
        let run = |port: u16, args: &[&str]| -> String {
            let mut x = format!("{args:?} → {}", show(&ask(port, args).unwrap_or_default()));
            for (id, name) in ids.borrow().iter() {
                x = x.replace(id, name);
            }
            x.replace(&b.bus.to_string(), "<Bbus>")
                .replace(&r.bus.to_string(), "<Rbus>")
                .replace(&a.port.to_string(), "<A>")
                .replace(&b.port.to_string(), "<B>")
                .replace(&r.port.to_string(), "<R>")
        };
        let t: std::cell::RefCell<Vec<String>> = Default::default();
        let step = |port: u16, args: &[&str]| t.borrow_mut().push(run(port, args));
        step(a.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
        step(b.port, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
        step(a.port, &["CLUSTER", "MEET", "127.0.0.1", &b.port.to_string(), &b.bus.to_string()]);
        step(a.port, &["CLUSTER", "MEET", "127.0.0.1", &r.port.to_string(), &r.bus.to_string()]);
        wait_until("three nodes to agree", Duration::from_secs(20), || {
            [a.port, b.port, r.port].iter().all(|p| info_field(*p, "cluster_known_nodes").as_deref() == Some("3"))
                && info_field(a.port, "cluster_state").as_deref() == Some("ok")
        });
        let (ida, idb, idr) = (myid(a.port), myid(b.port), myid(r.port));
        ids.borrow_mut().extend([(ida.clone(), "<idA>"), (idb.clone(), "<idB>"), (idr.clone(), "<idR>")]);
        step(r.port, &["CLUSTER", "REPLICATE", &ida]);
        wait_replicas_synced(&[&a, &b, &r]);

        // Keys counted by slot: {bar} is slot 5061, on A.
        step(a.port, &["CLUSTER", "KEYSLOT", "{bar}1"]);
        for i in 0..5 {
            step(a.port, &["SET", &format!("{{bar}}{i}"), "v"]);
        }
        step(a.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]);
        step(a.port, &["CLUSTER", "COUNTKEYSINSLOT", "5062"]);
        step(a.port, &["SET", "{bar}0", "replaced"]);
        step(a.port, &["DEL", "{bar}1"]);
        step(a.port, &["RENAME", "{bar}2", "{bar}9"]);
        step(a.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]);
        // Listed newest first, as Redis's per-slot list: a value replaced in place (in any
        // of Atoll's node layouts) keeps the key's place, a key made anew goes first.
        step(a.port, &["SET", "{bar}3", "a value too long to be stored inline in the key's own node"]);
        step(a.port, &["APPEND", "{bar}4", "!"]);
        step(a.port, &["INCR", "{bar}n"]);
        step(a.port, &["SET", "{bar}n", "12"]);
        step(a.port, &["HSET", "{bar}h", "f", "v"]);
        step(a.port, &["CLUSTER", "GETKEYSINSLOT", "5061", "100"]);
        step(a.port, &["CLUSTER", "GETKEYSINSLOT", "5061", "2"]);
        step(a.port, &["DEL", "{bar}n", "{bar}h"]);
        step(a.port, &["CLUSTER", "GETKEYSINSLOT", "5061", "100"]);
        step(a.port, &["CLUSTER", "GETKEYSINSLOT", "5061", "0"]);
        // A key whose TTL passed, not yet deleted (active expiry off), still counts.
        step(a.port, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        step(a.port, &["SET", "{bar}x", "v", "PX", "1"]);
        std::thread::sleep(Duration::from_millis(20));
        step(a.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]);
        step(a.port, &["EXISTS", "{bar}x"]);
        step(a.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]);
        step(a.port, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
        wait_until("the replica to hold the slot's keys", Duration::from_secs(10), || {
            text(r.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]) == ":4"
        });

        // A client blocked on a key of slot 5061, which then moves to B.
        let mut blocked = TcpStream::connect(("127.0.0.1", a.port)).unwrap();
        blocked.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        blocked.write_all(&encode(&[b"BLPOP".to_vec(), b"{bar}list".to_vec(), b"0".to_vec()])).unwrap();
        wait_until("the client to block", Duration::from_secs(5), || {
            text(a.port, &["INFO", "clients"]).contains("blocked_clients:1")
        });
        // And a client subscribed to a shard channel of that slot.
        let mut sub = TcpStream::connect(("127.0.0.1", a.port)).unwrap();
        sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        sub.write_all(&encode(&[b"SSUBSCRIBE".to_vec(), b"{bar}ch".to_vec()])).unwrap();
        let mut buf = vec![0u8; 256];
        let n = sub.read(&mut buf).unwrap_or(0);
        t.borrow_mut().push(format!("SSUBSCRIBE → {}", show(&buf[..n])));
        // B's epoch becomes the greatest (BUMPED), or already was (STILL): which one depends on
        // how the three nodes' equal epochs were told apart, by their random IDs.
        let bumped = text(b.port, &["CLUSTER", "BUMPEPOCH"]);
        assert!(bumped.starts_with("+BUMPED ") || bumped.starts_with("+STILL "), "{kind:?}: {bumped}");
        step(b.port, &["CLUSTER", "SETSLOT", "5061", "NODE", &idb]);
        let n = blocked.read(&mut buf).unwrap_or(0);
        t.borrow_mut().push(format!("blocked BLPOP → {}", show(&buf[..n]).replace(&b.port.to_string(), "<B>")));
        // The subscriber is told, and is no longer in the subscribed state: PING answers as
        // to any client.
        let n = sub.read(&mut buf).unwrap_or(0);
        t.borrow_mut().push(format!("subscriber → {}", show(&buf[..n])));
        sub.write_all(&encode(&[b"PING".to_vec()])).unwrap();
        let n = sub.read(&mut buf).unwrap_or(0);
        t.borrow_mut().push(format!("subscriber PING → {}", show(&buf[..n])));
        // The keys of the slot A lost go, on A and on its replica.
        wait_until("A and its replica to drop the lost slot's keys", Duration::from_secs(10), || {
            text(a.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]) == ":0"
                && text(r.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]) == ":0"
        });
        step(a.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]);
        step(r.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]);
        step(b.port, &["CLUSTER", "COUNTKEYSINSLOT", "5061"]);

        // The debugging hooks Redis's own cluster tests use.
        step(a.port, &["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "x"]);
        step(a.port, &["DEBUG", "CLUSTERLINK", "KILL", "to", "0000000000000000000000000000000000000000"]);
        step(a.port, &["DEBUG", "CLUSTERLINK", "KILL", "to"]);
        let link_to_b = |port: u16| {
            let raw = String::from_utf8_lossy(&ask(port, &["CLUSTER", "LINKS"]).unwrap_or_default()).into_owned();
            // Each link is a map of six fields: find the "to" link of B and its create-time.
            let lines: Vec<&str> = raw.split("\r\n").collect();
            let mut found = None;
            for i in 0..lines.len() {
                if lines[i] == "to" && lines.get(i + 4) == Some(&idb.as_str()) {
                    found = lines.get(i + 7).and_then(|c| c.trim_start_matches(':').parse::<i64>().ok());
                }
            }
            (raw, found)
        };
        let (raw, before) = link_to_b(a.port);
        for field in ["direction", "node", "create-time", "events", "send-buffer-allocated", "send-buffer-used"] {
            assert_eq!(raw.matches(&format!("\r\n{field}\r\n")).count(), 4, "{kind:?}: {raw}");
        }
        let before = before.unwrap_or_else(|| panic!("{kind:?}: no link to B in {raw}"));
        step(a.port, &["DEBUG", "CLUSTERLINK", "KILL", "to", &idb]);
        let start = Instant::now();
        while link_to_b(a.port).1.is_none_or(|after| after <= before) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{kind:?}: no new link to B after {:?}",
                t.borrow().last()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let mem: i64 = text(a.port, &["INFO", "memory"])
            .lines()
            .find_map(|l| l.strip_prefix("mem_cluster_links:").map(|v| v.trim().parse().unwrap()))
            .unwrap();
        assert!(mem > 0, "{kind:?}: mem_cluster_links {mem}");
        // PINGs dropped on B: B still counts them received, and A soon sees B's pongs stop.
        step(b.port, &["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "0"]);
        let pings = |p: u16| info_field(p, "cluster_stats_messages_ping_received").unwrap_or_default();
        let first = pings(b.port);
        wait_until("B to count dropped pings", Duration::from_secs(10), || pings(b.port) != first);
        step(b.port, &["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "-1"]);
        transcripts.push(t.into_inner());
    }
    let (redis, atoll) = (&transcripts[0], &transcripts[1]);
    for (r, a) in redis.iter().zip(atoll) {
        assert_eq!(a, r, "Atoll (left) against Redis 7.2.6 (right)");
    }
    assert_eq!(redis.len(), atoll.len());
}

// ---------------------------------------------------------------------------------------------
// Atomic slot migration (Valkey 9's CLUSTER MIGRATESLOTS), between Atoll and Valkey 9.1.2 nodes
// in both directions, speaking Valkey's own protocol.

/// The fields of the newest job CLUSTER GETSLOTMIGRATIONS lists on `port` (RESP2: a flat
/// array of names and values; integers as their digits).
fn newest_migration(port: u16) -> HashMap<String, String> {
    let r = ask(port, &["CLUSTER", "GETSLOTMIGRATIONS"]).unwrap_or_default();
    let s = String::from_utf8_lossy(&r).into_owned();
    let mut lines = s.split("\r\n").skip(2);
    let mut out = HashMap::new();
    // The first map's items: a bulk name, then a bulk or an integer value.
    let mut next = || -> Option<String> {
        let h = lines.next()?;
        if let Some(i) = h.strip_prefix(':') {
            return Some(i.to_string());
        }
        lines.next().map(|v| v.to_string())
    };
    let n: usize = s.split("\r\n").nth(1).and_then(|h| h.strip_prefix('*')).and_then(|n| n.parse().ok()).unwrap_or(0);
    for _ in 0..n / 2 {
        let (Some(k), Some(v)) = (next(), next()) else { break };
        out.insert(k, v);
    }
    out
}

/// CLUSTER MIGRATESLOTS of `first..=last` from the master at `from` to the one at `to`; waits
/// for both ends to report success and for every node to see the new owner.
fn migrate_slots(from: u16, to: u16, first: u16, last: u16, all: &[u16]) -> Duration {
    let started = Instant::now();
    let target = myid(to);
    let r =
        text(from, &["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", &first.to_string(), &last.to_string(), "NODE", &target]);
    assert_eq!(r, "+OK", "MIGRATESLOTS {first}-{last} {from} → {to}");
    let range = format!("{first}-{last}");
    wait_until(&format!("the migration of {range} from {from} to {to}"), Duration::from_secs(60), || {
        let j = newest_migration(from);
        assert_ne!(j.get("state").map(|s| s.as_str()), Some("failed"), "export {range} failed: {j:?}");
        j.get("state").map(|s| s.as_str()) == Some("success")
    });
    let took = started.elapsed();
    let j = newest_migration(to);
    assert_eq!(j.get("operation").map(|s| s.as_str()), Some("IMPORT"), "{j:?}");
    assert_eq!(j.get("slot_ranges"), Some(&range), "{j:?}");
    assert_eq!(j.get("state").map(|s| s.as_str()), Some("success"), "import on {to}: {j:?}");
    wait_until("every node to see the slots' new owner", Duration::from_secs(20), || {
        all.iter().all(|&p| {
            text(p, &["CLUSTER", "NODES"])
                .lines()
                .any(|l| l.starts_with(&target) && l.split(' ').skip(8).any(|r| covers(r, first, last)))
        })
    });
    for s in [first, last] {
        assert_eq!(
            int(&ask(from, &["CLUSTER", "COUNTKEYSINSLOT", &s.to_string()]).unwrap()),
            0,
            "slot {s} left on {from}"
        );
    }
    took
}

/// Whether a CLUSTER NODES slot field (`a-b` or `a`) covers `first..=last`.
fn covers(field: &str, first: u16, last: u16) -> bool {
    let (a, b) = match field.split_once('-') {
        Some((a, b)) => (a.parse::<u16>(), b.parse::<u16>()),
        None => (field.parse::<u16>(), field.parse::<u16>()),
    };
    matches!((a, b), (Ok(a), Ok(b)) if a <= first && last <= b)
}

/// What the keys of every type in slot `{t}` hold, read through the cluster client.
fn typed_contents(c: &mut Client) -> Vec<String> {
    let reads: &[&[&str]] = &[
        &["GET", "{t}str"],
        &["PTTL", "{t}str"],
        &["GET", "{t}int"],
        &["LRANGE", "{t}list", "0", "-1"],
        &["HGETALL", "{t}hash"],
        &["SMEMBERS", "{t}set"],
        &["ZRANGE", "{t}zset", "0", "-1", "WITHSCORES"],
        &["XRANGE", "{t}stream", "-", "+"],
        &["XINFO", "GROUPS", "{t}stream"],
        &["PFCOUNT", "{t}hll"],
        &["TTL", "{t}list"],
    ];
    reads
        .iter()
        .map(|args| {
            let r = c.cmd(args[1], args);
            let mut lines: Vec<String> = String::from_utf8_lossy(&r).lines().map(String::from).collect();
            // Sets and hashes come in any order; a TTL may tick down meanwhile.
            if matches!(args[0], "HGETALL" | "SMEMBERS") {
                lines.sort();
            }
            if args[0] == "PTTL" || args[0] == "TTL" {
                let v: i64 = lines[0].trim_start_matches(':').parse().unwrap();
                return format!("{} ttl>0: {}", args[1], v > 0);
            }
            format!("{args:?} {}", lines.join("|"))
        })
        .collect()
}

fn write_typed(c: &mut Client) {
    let writes: &[&[&str]] = &[
        &["SET", "{t}str", "hello", "EX", "1000"],
        &["SET", "{t}int", "12345"],
        &["RPUSH", "{t}list", "a", "b", "c"],
        &["EXPIRE", "{t}list", "1000"],
        &["HSET", "{t}hash", "f1", "v1", "f2", "v2"],
        &["SADD", "{t}set", "x", "y", "1", "2"],
        &["ZADD", "{t}zset", "1.5", "a", "-2", "b", "inf", "c"],
        &["XADD", "{t}stream", "1-1", "f", "v"],
        &["XADD", "{t}stream", "2-1", "g", "w"],
        &["XGROUP", "CREATE", "{t}stream", "grp", "0"],
        &["PFADD", "{t}hll", "a", "b", "c", "d"],
    ];
    for w in writes {
        let r = c.cmd(w[1], w);
        assert!(!r.starts_with(b"-"), "{w:?}: {}", show(&r));
    }
    // A big list: the snapshot sends it in pieces.
    let big: Vec<String> = (0..5000).map(|i| format!("item{i}")).collect();
    let mut args = vec!["RPUSH", "{t}list"];
    args.extend(big.iter().map(|s| s.as_str()));
    assert!(c.cmd("{t}list", &args).starts_with(b":"));
}

/// Valkey 9's atomic slot migration, Atoll ↔ Valkey 9.1.2 ↔ Atoll, under a write load: a range
/// of slots holding keys of every type (a TTL kept, a stream's group, 5,000 list items) goes
/// from an Atoll master to a Valkey master, from there to another Atoll master, and back to the
/// first — each move by `CLUSTER MIGRATESLOTS` on the source, with the snapshot, the writes made
/// meanwhile, the pause and the takeover as Valkey does them. Every key reads the same after
/// each move, every acknowledged INCR counts once, the source keeps nothing of the slots, the
/// target's replica has what the target has, and `redis-cli --cluster check` is clean.
#[test]
fn atomic_slot_migration_between_atoll_and_valkey_loses_nothing() {
    let (nodes, replicas) =
        masters_then_replicas([Kind::Atoll, Kind::Valkey, Kind::Atoll, Kind::Atoll, Kind::Valkey, Kind::Atoll]);
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let mut c = Client::new(&ports);
    let slot = slot_of("{t}");
    // The master serving `{t}` first, and the other two.
    let owner_of = |s: u16| -> u16 {
        let nodes_text = text(ports[0], &["CLUSTER", "NODES"]);
        let id = nodes_text
            .lines()
            .find(|l| l.contains("master") && l.split(' ').skip(8).any(|r| covers(r, s, s)))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .unwrap();
        ports.iter().copied().find(|&p| myid(p) == id).unwrap()
    };
    let first_owner = owner_of(slot);
    assert_eq!(nodes.iter().find(|n| n.port == first_owner).unwrap().kind, Kind::Atoll, "{{t}} starts on Atoll");
    let valkey = nodes[1].port;
    let other_atoll = if first_owner == nodes[0].port { nodes[2].port } else { nodes[0].port };
    write_typed(&mut c);
    write_keys(&mut c, 300, "asm");
    let before = typed_contents(&mut c);
    // The range: `{t}`'s slot and its neighbours served by the same master.
    let (first, last) = (slot.saturating_sub(20), slot + 20);
    assert_eq!(owner_of(first), first_owner);
    assert_eq!(owner_of(last), first_owner);
    // The load's 200 counters are all in `{t}`'s slot: every INCR races the moves.
    let load = IncrLoad::start(&ports, "{t}load");
    for (from, to) in [(first_owner, valkey), (valkey, other_atoll), (other_atoll, first_owner)] {
        let done = load.done();
        let took = migrate_slots(from, to, first, last, &ports);
        eprintln!(
            "MIGRATESLOTS {first}-{last} {from} → {to}: {:.2} s, {} INCRs meanwhile",
            took.as_secs_f64(),
            load.done() - done
        );
        assert_eq!(owner_of(slot), to);
        assert_eq!(typed_contents(&mut c), before, "after {from} → {to}");
        // The target's replica got the imported keys through the target's stream.
        if let Some(&(replica, _)) = replicas.iter().find(|(_, m)| *m == to) {
            assert_eq!(int(&ask(to, &["WAIT", "1", "5000"]).unwrap()), 1);
            let keys = |p: u16| int(&ask(p, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]).unwrap());
            wait_until("the target's replica to hold the imported keys", Duration::from_secs(10), || {
                keys(replica) == keys(to)
            });
            assert!(keys(to) >= 8, "{{t}}'s keys on {to}");
            // The replica was told of the import (ESTABLISH, then FINISH in the stream): its
            // record of it has Valkey's ten fields, without the nodes.
            wait_until("the replica's record of the import to end", Duration::from_secs(10), || {
                newest_migration(replica).get("state").map(|s| s.as_str()) == Some("success")
            });
            let j = newest_migration(replica);
            assert_eq!(j.get("slot_ranges"), Some(&format!("{first}-{last}")), "{j:?}");
            assert_eq!((j.len(), j.get("operation").map(|s| s.as_str())), (10, Some("IMPORT")), "{j:?}");
        }
    }
    let incrs = load.finish(&mut c);
    assert!(incrs > 100, "{incrs} INCRs during the migrations");
    assert_eq!(read_sum(&mut c, 300, "asm"), (0..300).sum::<i64>());
    check_clean(ports[0]);
}

/// MIGRATESLOTS, SYNCSLOTS and CANCELSLOTMIGRATIONS refuse what Valkey 9.1.2 refuses, in the
/// same words: the same commands sent to an Atoll master and to a Valkey master of one cluster
/// (each with slots of its own) answer the same, the slot numbers and node names in the text
/// being each node's.
#[test]
fn atomic_slot_migration_errors_match_valkey() {
    let nodes: Vec<Node> = [Kind::Atoll, Kind::Valkey, Kind::Atoll].iter().map(|k| start_node(*k)).collect();
    create(&nodes.iter().collect::<Vec<_>>(), 0);
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let zeros = "0".repeat(40);
    let name = "a".repeat(40);
    for (i, n) in nodes.iter().enumerate().take(2) {
        let p = n.port;
        let me = myid(p);
        let other = myid(ports[(i + 1) % 3]);
        // This master's slots, and a slot of the next one.
        let mine = text(p, &["CLUSTER", "NODES"])
            .lines()
            .find(|l| l.contains("myself"))
            .and_then(|l| l.split(' ').nth(8).map(String::from))
            .unwrap();
        let (a, b) = mine.split_once('-').map(|(a, b)| (a.parse::<u16>().unwrap(), b.parse::<u16>().unwrap())).unwrap();
        let theirs = if b < 16383 { b + 1 } else { a - 1 };
        let (s, t) = (a.to_string(), (a + 5).to_string());
        let cases: Vec<(Vec<String>, String)> = vec![
            (vec!["FOO"], "-ERR wrong number of arguments for 'cluster|migrateslots' command".into()),
            (vec!["SLOTSRANGE", &s], "-ERR No end slot for final slot range".into()),
            (vec!["XX", &s, &s, "NODE", &other], "-ERR syntax error".into()),
            (vec!["SLOTSRANGE", "16384", "16384", "NODE", &other], "-ERR Invalid or out of range slot".into()),
            (
                vec!["SLOTSRANGE", &t, &s, "NODE", &other],
                format!("-ERR Start slot number {t} is greater than end slot number {s}."),
            ),
            (vec!["SLOTSRANGE", "NODE", &other], "-ERR No slot ranges specified".into()),
            (
                vec!["SLOTSRANGE", &theirs.to_string(), &theirs.to_string(), "NODE", &other],
                "-ERR Slots are not served by this node.".into(),
            ),
            (
                vec!["SLOTSRANGE", &s, &t, &(a + 3).to_string(), &(a + 8).to_string(), "NODE", &other],
                format!("-ERR Slot range {}-{} overlaps with previous range {s}-{t}.", a + 3, a + 8),
            ),
            (vec!["SLOTSRANGE", &s, &s, "NODE", "abc"], "-ERR Invalid node name: abc".into()),
            (vec!["SLOTSRANGE", &s, &s, "NODE", &zeros], format!("-ERR Unknown node name: {zeros}")),
            (vec!["SLOTSRANGE", &s, &s, "NODE", &me], "-ERR Target node can not be this node.".into()),
            (vec!["SLOTSRANGE", &s, &s], "-ERR syntax error".into()),
            (
                vec!["SLOTSRANGE", &s, &s, "NODE", &other, "SLOTSRANGE", &s, &s, "NODE", &other],
                "-ERR Slot ranges in migrations overlap".into(),
            ),
        ]
        .into_iter()
        .map(|(args, want)| (args.into_iter().map(String::from).collect(), want))
        .collect();
        for (args, want) in cases {
            let mut full = vec!["CLUSTER", "MIGRATESLOTS"];
            full.extend(args.iter().map(|s| s.as_str()));
            assert_eq!(text(p, &full), want, "{:?}: {full:?}", n.kind);
        }
        let sync: Vec<(Vec<&str>, String)> = vec![
            (vec!["ACK"], "-ERR CLUSTER SYNCSLOTS ACK should only be used by slot migration clients".into()),
            (vec!["PAUSED"], "-ERR CLUSTER SYNCSLOTS PAUSED should only be used by slot migration clients".into()),
            (vec!["WHATEVER"], "-ERR syntax error".into()),
            (
                vec!["ESTABLISH", "SOURCE", &zeros, "NAME", &name, "SLOTSRANGE", &s, &s],
                "-ERR Target node does not know the source node".into(),
            ),
            (
                vec!["ESTABLISH", "SOURCE", &me, "NAME", &name, "SLOTSRANGE", &s, &s],
                "-ERR Source node is target node itself".into(),
            ),
            (
                vec!["ESTABLISH", "SOURCE", &other, "NAME", &name, "SLOTSRANGE", &s, &s],
                "-ERR Target node does not agree about current slot ownership".into(),
            ),
            (vec!["ESTABLISH", "SOURCE", &other, "NAME", "short", "SLOTSRANGE", &s, &s], "-ERR syntax error".into()),
            (vec!["ESTABLISH", "NAME", &name, "SLOTSRANGE", &s, &s], "-ERR syntax error".into()),
        ];
        for (args, want) in sync {
            let mut full = vec!["CLUSTER", "SYNCSLOTS"];
            full.extend(args);
            assert_eq!(text(p, &full), want, "{:?}: {full:?}", n.kind);
        }
        assert_eq!(text(p, &["CLUSTER", "CANCELSLOTMIGRATIONS"]), "-ERR No migrations ongoing", "{:?}", n.kind);
        assert_eq!(text(p, &["CLUSTER", "GETSLOTMIGRATIONS"]), "*0", "{:?}", n.kind);
    }
}

/// A hash tag whose slot the master at `port` serves.
fn tag_served_by(port: u16) -> String {
    let mine: Vec<String> = my_line(port).split(' ').skip(8).map(String::from).collect();
    (0..10_000)
        .map(|i| format!("{{x{i}}}"))
        .find(|t| {
            let s = slot_of(t);
            mine.iter().any(|r| covers(r, s, s))
        })
        .unwrap()
}

/// A migration that ends early leaves the source whole and the target clean, whichever end is
/// Atoll and whichever Valkey 9.1.2: cancelled by CLUSTER CANCELSLOTMIGRATIONS during the
/// snapshot (the source `cancelled`, the target `failed` with Valkey's message and the keys it
/// had received — hidden from KEYS, SCAN and DBSIZE meanwhile — deleted), a flush on the source (`Data was flushed`), and a target killed
/// mid-snapshot (the source `failed`, keeping and serving the slot).
#[test]
fn atomic_slot_migration_that_fails_leaves_both_ends_clean() {
    let mut nodes: Vec<Node> = [Kind::Atoll, Kind::Valkey, Kind::Atoll].iter().map(|k| start_node(*k)).collect();
    create(&nodes.iter().collect::<Vec<_>>(), 0);
    for (from, to) in [(nodes[0].port, nodes[1].port), (nodes[1].port, nodes[2].port)] {
        let tag = tag_served_by(from);
        let slot = slot_of(&tag).to_string();
        let keys: Vec<String> = (0..20).map(|i| format!("{tag}k{i}")).collect();
        for k in &keys {
            assert_eq!(text(from, &["SET", k, "v"]), "+OK");
        }
        let count = |p: u16| int(&ask(p, &["CLUSTER", "COUNTKEYSINSLOT", &slot]).unwrap());
        let valkey_source = nodes.iter().any(|n| n.port == from && n.kind == Kind::Valkey);
        // Held half-way once the target has keys: an Atoll source sleeps after sending them
        // (`rdb-key-save-delay`, 0.1 s per key), a Valkey source never pauses (its debug hook).
        let start = || {
            assert_eq!(text(from, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]), "+OK");
            if valkey_source {
                assert_eq!(text(from, &["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "1"]), "+OK");
            }
            let r = text(from, &["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", &slot, &slot, "NODE", &myid(to)]);
            assert_eq!(r, "+OK");
            wait_until("the target to receive keys", Duration::from_secs(10), || count(to) > 0);
        };
        let ended = |p: u16, state: &str, message: &str| {
            wait_until(&format!("{p}'s migration to end {state}"), Duration::from_secs(20), || {
                newest_migration(p).get("state").map(|s| s.as_str()) == Some(state)
            });
            assert_eq!(newest_migration(p).get("message").map(|s| s.as_str()), Some(message), "{p}");
        };
        let source_whole = || {
            assert_eq!(text(from, &["CONFIG", "SET", "rdb-key-save-delay", "0"]), "+OK");
            if valkey_source {
                assert_eq!(text(from, &["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "0"]), "+OK");
            }
            assert_eq!(count(from), 20, "the source keeps its keys");
            assert_eq!(text(from, &["SET", &keys[0], "w"]), "+OK", "the source serves writes");
            wait_until("the target to drop what it received", Duration::from_secs(10), || count(to) == 0);
        };
        let lost_source =
            "Connection lost to source. Check CLUSTER GETSLOTMIGRATIONS on the source node for more information.";
        let dbsize = |p: u16| int(&ask(p, &["DBSIZE"]).unwrap());
        let shown_before = dbsize(to);
        start();
        // What the target has received of a slot being imported is hidden from KEYS, SCAN and
        // DBSIZE (not from COUNTKEYSINSLOT), on Valkey and on Atoll alike.
        assert_eq!(dbsize(to), shown_before, "DBSIZE on {to}");
        assert_eq!(text(to, &["KEYS", &format!("{tag}*")]), "*0", "KEYS on {to}");
        let mut cursor = "0".to_string();
        loop {
            let r = String::from_utf8_lossy(
                &ask(to, &["SCAN", &cursor, "MATCH", &format!("{tag}*"), "COUNT", "1000"]).unwrap(),
            )
            .into_owned();
            let lines: Vec<&str> = r.split("\r\n").collect();
            assert!(!r.contains(&tag), "SCAN on {to}: {r}");
            cursor = lines[2].to_string();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(text(from, &["CLUSTER", "CANCELSLOTMIGRATIONS"]), "+OK");
        ended(from, "cancelled", "");
        ended(to, "failed", lost_source);
        source_whole();
        start();
        assert_eq!(text(from, &["FLUSHALL"]), "+OK");
        ended(from, "failed", "Data was flushed");
        ended(to, "failed", lost_source);
        assert_eq!(text(from, &["CONFIG", "SET", "rdb-key-save-delay", "0"]), "+OK");
        if valkey_source {
            assert_eq!(text(from, &["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "0"]), "+OK");
        }
        assert_eq!(count(from), 0);
        wait_until("the target to drop what it received", Duration::from_secs(10), || count(to) == 0);
    }
    // The Valkey target dies during the snapshot: the Atoll source fails the job and goes on
    // serving the slot (full coverage is not required, so the dead node's slots do not stop it).
    let (from, to) = (nodes[0].port, nodes[1].port);
    let tag = tag_served_by(from);
    let slot = slot_of(&tag).to_string();
    for i in 0..20 {
        assert_eq!(text(from, &["SET", &format!("{tag}k{i}"), "v"]), "+OK");
    }
    assert_eq!(text(from, &["CONFIG", "SET", "cluster-require-full-coverage", "no"]), "+OK");
    assert_eq!(text(from, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]), "+OK");
    assert_eq!(text(from, &["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", &slot, &slot, "NODE", &myid(to)]), "+OK");
    wait_until("the target to receive keys", Duration::from_secs(10), || {
        int(&ask(to, &["CLUSTER", "COUNTKEYSINSLOT", &slot]).unwrap()) > 0
    });
    kill(&mut nodes[1]);
    wait_until("the export to fail", Duration::from_secs(20), || {
        newest_migration(from).get("state").map(|s| s.as_str()) == Some("failed")
    });
    assert_eq!(
        newest_migration(from).get("message").map(|s| s.as_str()),
        Some("Connection lost to target. Check CLUSTER GETSLOTMIGRATIONS on the target node for more information.")
    );
    assert_eq!(text(from, &["CONFIG", "SET", "rdb-key-save-delay", "0"]), "+OK");
    assert_eq!(int(&ask(from, &["CLUSTER", "COUNTKEYSINSLOT", &slot]).unwrap()), 20);
    assert_eq!(text(from, &["SET", &format!("{tag}k0"), "w"]), "+OK");
}
