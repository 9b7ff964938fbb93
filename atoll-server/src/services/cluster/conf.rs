//! nodes.conf (`cluster-config-file`): the node's identity and its view of the cluster, in
//! Redis 7.2's format so a node directory moves between Redis and Atoll. One line per node
//! (`id ip:port@cport,hostname,tls-port=N[,nodename=X],shard-id=S flags master ping pong
//! epoch link slots… [slot->-id] [slot-<-id]`), then `vars currentEpoch N lastVoteEpoch M`.
//! Written to a temporary file, fsynced, renamed over, the directory fsynced; locked with
//! flock for the process's life so two nodes never share one file.

use super::wire::{self, NAMELEN, SLOTS};
use super::*;
use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The file's text.
pub fn render(st: &State) -> String {
    let mut out = String::new();
    for n in st.ordered_nodes() {
        if n.in_handshake() {
            continue;
        }
        out.push_str(&st.describe(n, true, false));
        out.push('\n');
    }
    out.push_str(&format!("vars currentEpoch {} lastVoteEpoch {}\n", st.current_epoch, st.last_vote_epoch));
    out
}

/// Writes the state to `path` (fsynced when `sync`).
pub fn save(st: &State, path: &Path, sync: bool) -> std::io::Result<()> {
    write(&render(st), path, sync)
}

/// Writes rendered text to `path`: a temporary file, fsynced when `sync`, renamed over, the
/// directory fsynced (outside the view's lock: callers render under it, then write).
/// `render`, numbered: renders happen under the state's lock, so the numbers order them as
/// the states they show.
pub fn render_numbered(st: &State) -> (String, u64) {
    (render(st), RENDERED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1)
}

static RENDERED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The number of the newest render written so far.
static WRITTEN: crate::lockorder::Mutex<u64, { crate::lockorder::rank::LEAF }> = crate::lockorder::Mutex::new(0);

/// `write` of a `render_numbered` text, unless a newer render was written already: the bus
/// thread and SAVECONFIG both save, and the one that rendered first could otherwise rename
/// its file last, putting an older state back (a SET-CONFIG-EPOCH lost under load).
pub fn write_numbered(text: &str, number: u64, path: &Path, sync: bool) -> std::io::Result<()> {
    let mut w = WRITTEN.lock();
    if number < *w {
        return Ok(());
    }
    write(text, path, sync)?;
    *w = number;
    Ok(())
}

pub fn write(text: &str, path: &Path, sync: bool) -> std::io::Result<()> {
    // Unique per write: SAVECONFIG and the bus thread may write at the same moment.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_file_name(format!(
        "{}.tmp-{}-{}-{seq}",
        path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
        std::process::id(),
        now_ms()
    ));
    let res = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        if sync {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if sync {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// Takes the file's lock for the life of the process (the file is created if missing).
pub fn lock(path: &Path) -> Result<std::fs::File, String> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("Impossible to lock {}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(format!(
                "Sorry, the cluster configuration file {} is already used by a different Redis Cluster node. Please make sure that different nodes use different cluster configuration files.",
                path.display()
            ));
        }
        return Err(format!("Impossible to lock {}: {e}", path.display()));
    }
    Ok(f)
}

fn valid_id(s: &str) -> Option<Name> {
    (s.len() == NAMELEN && s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
        .then(|| s.as_bytes().try_into().expect("40 bytes"))
}

fn node_entry(st: &mut State, name: Name) -> &mut Node {
    st.nodes.entry(name).or_insert_with(|| Node::new(name, 0))
}

/// Loads `text` into a fresh state; `Err(line)` names the first line Redis would refuse.
/// `Ok(None)` for an empty file (a new node).
pub fn load(text: &str, settings: Settings) -> Result<Option<State>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut st = State::new(settings);
    st.nodes.clear();
    let mut myself = None;
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        let bad = || line.to_string();
        let argv: Vec<&str> = line.split_ascii_whitespace().collect();
        if argv.is_empty() {
            continue;
        }
        if argv[0].eq_ignore_ascii_case("vars") {
            if argv.len().is_multiple_of(2) {
                return Err(bad());
            }
            for kv in argv[1..].chunks(2) {
                let v: u64 = kv[1].parse().unwrap_or(0);
                if kv[0].eq_ignore_ascii_case("currentEpoch") {
                    st.current_epoch = v;
                } else if kv[0].eq_ignore_ascii_case("lastVoteEpoch") {
                    st.last_vote_epoch = v;
                } else {
                    crate::log_notice!("Skipping unknown cluster config variable '{}'", kv[0]);
                }
            }
            continue;
        }
        if argv.len() < 8 {
            return Err(bad());
        }
        let name = valid_id(argv[0]).ok_or_else(bad)?;
        let mut parts = argv[1].split(',');
        let addr = parts.next().unwrap_or("");
        let hostname = parts.next().unwrap_or("").to_string();
        let (mut tcp, mut tls, mut shard, mut human) = (None, None, None, None);
        for aux in parts {
            let (k, v) = aux.split_once('=').ok_or_else(bad)?;
            match k {
                "shard-id" => shard = Some(valid_id(v).ok_or_else(bad)?),
                "nodename" => human = Some(v.to_string()),
                "tcp-port" => tcp = Some(v.parse::<u16>().map_err(|_| bad())?),
                "tls-port" => tls = Some(v.parse::<u16>().map_err(|_| bad())?),
                _ => return Err(bad()),
            }
        }
        let colon = addr.rfind(':').ok_or_else(bad)?;
        let ip = addr[..colon].to_string();
        let (port, cport) = match addr[colon + 1..].split_once('@') {
            Some((p, c)) => (p.parse::<u16>().unwrap_or(0), c.parse::<u16>().unwrap_or(0)),
            None => {
                let p = addr[colon + 1..].parse::<u16>().unwrap_or(0);
                (p, p.wrapping_add(10000))
            }
        };
        let tls_cluster = st.settings.tls_cluster;
        let n = node_entry(&mut st, name);
        n.ip = ip;
        n.hostname = hostname;
        n.cport = cport;
        match (tcp, tls) {
            (None, None) if tls_cluster => n.tls_port = port,
            (None, None) => n.tcp_port = port,
            (None, Some(t)) => {
                n.tcp_port = port;
                n.tls_port = t;
            }
            (Some(t), None) => {
                n.tcp_port = t;
                n.tls_port = port;
            }
            (Some(a), Some(b)) => {
                n.tcp_port = a;
                n.tls_port = b;
            }
        }
        if let Some(s) = shard {
            n.shard_id = s;
        }
        if let Some(h) = human {
            n.human_nodename = h;
        }
        let mut flags = 0;
        for f in argv[2].split(',') {
            flags |= match f.to_ascii_lowercase().as_str() {
                "myself" => {
                    if myself.is_some() {
                        return Err(bad());
                    }
                    myself = Some(name);
                    MYSELF
                }
                "master" => MASTER,
                "slave" => SLAVE,
                "fail?" => PFAIL,
                "fail" => {
                    n.fail_time = now_ms();
                    FAIL
                }
                "handshake" => HANDSHAKE,
                "noaddr" => NOADDR,
                "nofailover" => NOFAILOVER,
                "noflags" => 0,
                _ => return Err(bad()),
            };
        }
        n.flags = flags;
        if argv[4] != "0" {
            n.ping_sent = now_ms();
        }
        if argv[5] != "0" {
            n.pong_received = now_ms();
        }
        let slave_with_master = !argv[3].starts_with('-');
        n.config_epoch = if flags & SLAVE != 0 && slave_with_master { 0 } else { argv[6].parse().unwrap_or(0) };
        if slave_with_master {
            let m = valid_id(argv[3]).ok_or_else(bad)?;
            st.nodes.get_mut(&name).expect("inserted").slaveof = Some(m);
            node_entry(&mut st, m);
        }
        for tok in &argv[8..] {
            if let Some(inner) = tok.strip_prefix('[') {
                let inner = inner.strip_suffix(']').ok_or_else(bad)?;
                let (slot, dir, id) = if let Some((s, id)) = inner.split_once("->-") {
                    (s, true, id)
                } else if let Some((s, id)) = inner.split_once("-<-") {
                    (s, false, id)
                } else {
                    return Err(bad());
                };
                let slot: usize = slot.parse().map_err(|_| bad())?;
                let id = valid_id(id).ok_or_else(bad)?;
                if slot >= SLOTS {
                    return Err(bad());
                }
                node_entry(&mut st, id);
                if dir {
                    st.migrating.insert(slot, id);
                } else {
                    st.importing.insert(slot, id);
                }
                continue;
            }
            let (a, b) = match tok.split_once('-') {
                Some((a, b)) => (a.parse::<usize>().map_err(|_| bad())?, b.parse::<usize>().map_err(|_| bad())?),
                None => {
                    let a = tok.parse::<usize>().map_err(|_| bad())?;
                    (a, a)
                }
            };
            if a >= SLOTS || b >= SLOTS {
                return Err(bad());
            }
            for s in a..=b {
                st.add_slot(s, name);
            }
        }
    }
    let me = myself.ok_or_else(|| "no myself line".to_string())?;
    st.myself = me;
    st.current_epoch = st.current_epoch.max(st.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0));
    // Recount slots (add_slot counted only for nodes known at the time).
    for n in st.nodes.values_mut() {
        n.numslots = n.slots.iter().map(|b| b.count_ones() as usize).sum();
        let _ = wire::NAMELEN;
    }
    st.apply_announced();
    Ok(Some(st))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_view_loads_back_the_same() {
        let mut st = State::new(Settings { tcp_port: 7000, bus_port: 17000, ..Default::default() });
        st.me_mut().ip = "127.0.0.1".into();
        for s in 0..5461 {
            st.add_slot(s, st.myself);
        }
        let other = random_name();
        let mut n = Node::new(other, MASTER);
        n.ip = "127.0.0.1".into();
        n.tcp_port = 7001;
        n.cport = 17001;
        n.config_epoch = 2;
        st.add_node(n);
        st.add_slot(5461, other);
        st.migrating.insert(7, other);
        st.current_epoch = 3;
        st.last_vote_epoch = 1;
        let text = render(&st);
        assert!(text.contains(",,tls-port=0,shard-id="), "{text}");
        assert!(text.contains(" 0-5460 [7->-"), "{text}");
        assert!(text.ends_with("vars currentEpoch 3 lastVoteEpoch 1\n"));
        let back = load(&text, Settings { tcp_port: 7000, bus_port: 17000, ..Default::default() }).unwrap().unwrap();
        assert_eq!(back.myself, st.myself);
        assert_eq!(render(&back), text);
        assert_eq!(back.nodes[&other].numslots, 1);
    }

    #[test]
    fn a_corrupt_line_is_refused_and_an_empty_file_is_a_new_node() {
        assert!(load("", Settings::default()).unwrap().is_none());
        assert!(load("abc 127.0.0.1:1@2 myself,master - 0 0 0 connected\n", Settings::default()).is_err());
        let id = "a".repeat(40);
        assert!(load(&format!("{id} 127.0.0.1:1@2 myself,bogus - 0 0 0 connected\n"), Settings::default()).is_err());
        assert!(load(&format!("{id} 127.0.0.1:1@2 myself,master - 0 0 0 connected 0-99999\n"), Settings::default())
            .is_err());
    }
}
