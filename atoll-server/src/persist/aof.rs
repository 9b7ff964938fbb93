//! Redis 7's multi-part append-only file: a directory (`appenddirname`) holding a base file
//! (an RDB, or commands), incremental files of commands, and a manifest naming them
//! (`file appendonly.aof.1.base.rdb seq 1 type b`). This module has the formats — manifest,
//! the commands as RESP, reading them back — and the log writer with its fsync policies.

use super::PersistError;
use crate::engine::rdb::Input;
use crate::lockorder::{rank, Mutex};
use parking_lot::Condvar;
use std::cell::Cell;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Manifest
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
pub struct AofFile {
    pub name: String,
    pub seq: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    pub base: Option<AofFile>,
    pub history: Vec<AofFile>,
    pub incr: Vec<AofFile>,
}

impl Manifest {
    /// Parses a manifest as Redis writes it; a line it cannot read is an error (Redis refuses
    /// to start on an invalid manifest).
    pub fn parse(text: &str) -> Result<Manifest, PersistError> {
        let mut m = Manifest::default();
        let mut last_incr = 0;
        for (n, raw) in text.split_inclusive('\n').enumerate() {
            if raw.starts_with('#') {
                continue;
            }
            if raw.len() > 1024 || !raw.ends_with('\n') && raw.len() == 1024 {
                return Err(PersistError::Corrupt("The AOF manifest file contains too long line".into()));
            }
            let line = raw.trim_matches(|c| c == ' ' || c == '\t' || c == '\r' || c == '\n');
            let bad = || Err(PersistError::Corrupt(format!("Invalid AOF manifest file format (line {})", n + 1)));
            if line.is_empty() {
                return bad();
            }
            // Words as Redis splits them (`sdssplitargs`): a file name with spaces or control
            // characters is quoted and escaped.
            let mut words: Vec<Vec<u8>> = Vec::new();
            if !crate::protocol::parser::split_args(line.as_bytes(), &mut words) {
                return bad();
            }
            if words.len() < 6 || !words.len().is_multiple_of(2) {
                return bad();
            }
            let (mut name, mut seq, mut kind) = (None, None, None);
            for kv in words.chunks(2) {
                let v = String::from_utf8_lossy(&kv[1]).to_string();
                match &kv[0][..] {
                    b"file" => name = Some(v),
                    b"seq" => seq = v.parse::<u64>().ok(),
                    b"type" => kind = Some(v),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return bad();
            };
            if name.contains('/') {
                return Err(PersistError::Corrupt(format!("File can't be a path, just a filename (line {})", n + 1)));
            }
            let f = AofFile { name, seq };
            match kind.as_str() {
                "b" => {
                    if m.base.is_some() {
                        return Err(PersistError::Corrupt("Found duplicate base file information".into()));
                    }
                    m.base = Some(f)
                }
                "h" => m.history.push(f),
                "i" => {
                    if f.seq <= last_incr {
                        return Err(PersistError::Corrupt("Found a non-monotonic sequence number".into()));
                    }
                    last_incr = f.seq;
                    m.incr.push(f)
                }
                _ => return Err(PersistError::Corrupt(format!("Unknown AOF file type {kind}"))),
            }
        }
        if m.base.is_none() && m.incr.is_empty() {
            return Err(PersistError::Corrupt("Found an empty AOF manifest".into()));
        }
        Ok(m)
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        if let Some(b) = &self.base {
            s.push_str(&format!("file {} seq {} type b\n", repr(&b.name), b.seq));
        }
        for h in &self.history {
            s.push_str(&format!("file {} seq {} type h\n", repr(&h.name), h.seq));
        }
        for i in &self.incr {
            s.push_str(&format!("file {} seq {} type i\n", repr(&i.name), i.seq));
        }
        s
    }
}

/// A file name as the manifest writes it: as is, or quoted and escaped like Redis's
/// `sdscatrepr` when it holds spaces, quotes, backslashes or control characters.
fn repr(name: &str) -> String {
    let needs = name.bytes().any(|c| c.is_ascii_whitespace() || c == b'"' || c == b'\\' || !(0x20..0x7f).contains(&c));
    if !needs {
        return name.to_string();
    }
    let mut out = Vec::new();
    crate::protocol::cat_repr(&mut out, name.as_bytes());
    String::from_utf8_lossy(&out).into_owned()
}

pub fn manifest_name(appendfilename: &str) -> String {
    format!("{appendfilename}.manifest")
}

pub fn base_name(appendfilename: &str, seq: u64, rdb: bool) -> String {
    format!("{appendfilename}.{seq}.base.{}", if rdb { "rdb" } else { "aof" })
}

pub fn incr_name(appendfilename: &str, seq: u64) -> String {
    format!("{appendfilename}.{seq}.incr.aof")
}

/// Where writes are logged while AOF, turned on at runtime, waits for its first base (Redis's
/// temporary incremental file, named as Redis names it).
pub fn temp_incr_name(appendfilename: &str) -> String {
    format!("temp-{appendfilename}.incr")
}

/// Writes the manifest atomically (temporary file, fsync, rename, directory fsync).
pub fn write_manifest(dir: &Path, appendfilename: &str, m: &Manifest) -> std::io::Result<()> {
    let tmp = dir.join(format!("temp-{}", manifest_name(appendfilename)));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(m.text().as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(manifest_name(appendfilename)))?;
    std::fs::File::open(dir)?.sync_all()
}

// ---------------------------------------------------------------------------------------------
// Commands as RESP
// ---------------------------------------------------------------------------------------------

/// The database of a command that belongs to none (MULTI and EXEC around a transaction):
/// no SELECT is written before it.
pub const NO_DB: usize = usize::MAX;

/// Appends a command as a RESP multibulk, as AOF files hold them.
pub fn encode(out: &mut Vec<u8>, argv: &[Vec<u8>]) {
    let mut b = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(b.format(argv.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in argv {
        out.push(b'$');
        out.extend_from_slice(b.format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// What reading the next command found.
pub enum Next {
    Command(Vec<Vec<u8>>),
    /// Clean end of file.
    End,
    /// The file ends inside a command (a torn write): its offset.
    Truncated(u64),
}

/// Reads the commands of an AOF file one by one. `#` lines (timestamp annotations) are
/// skipped. Lengths are checked against `max_bulk` and read as the data arrives.
pub struct CommandReader<R: Read> {
    inp: Input<R>,
    max_bulk: u64,
}

impl<R: Read> CommandReader<R> {
    pub fn new(r: R, max_bulk: u64) -> Self {
        CommandReader { inp: Input::new(r, false), max_bulk }
    }

    pub fn offset(&self) -> u64 {
        self.inp.pos
    }

    /// A `\r\n`-terminated line of at most 128 bytes (its terminator removed); None at EOF.
    fn line(&mut self) -> Result<Option<Vec<u8>>, Torn> {
        let mut l = Vec::new();
        loop {
            let mut b = [0u8; 1];
            match self.inp.fill(&mut b) {
                Ok(()) => {}
                Err(_) if l.is_empty() => return Ok(None),
                Err(_) => return Err(Torn),
            }
            if b[0] == b'\n' {
                if l.last() == Some(&b'\r') {
                    l.pop();
                }
                return Ok(Some(l));
            }
            l.push(b[0]);
            if l.len() > 128 {
                return Err(Torn);
            }
        }
    }

    /// The next command. Err: malformed content (not a torn tail), with the offset.
    pub fn read_next(&mut self) -> Result<Next, PersistError> {
        loop {
            let start = self.inp.pos;
            let torn = || Ok(Next::Truncated(start));
            let Some(l) = (match self.line() {
                Ok(l) => l,
                Err(_) => return torn(),
            }) else {
                return Ok(Next::End);
            };
            if l.first() == Some(&b'#') {
                continue;
            }
            let bad = |what: &str| {
                Err(PersistError::Corrupt(format!(
                    "Bad file format reading the append only file at offset {start}: {what}"
                )))
            };
            if l.first() != Some(&b'*') {
                return bad("expected '*'");
            }
            let n: usize = match std::str::from_utf8(&l[1..]).ok().and_then(|s| s.parse().ok()) {
                Some(n) if (1..=1 << 20).contains(&n) => n,
                _ => return bad("invalid argument count"),
            };
            let mut argv = Vec::with_capacity(n.min(64));
            for _ in 0..n {
                let l = match self.line() {
                    Ok(Some(l)) => l,
                    Ok(None) | Err(_) => return torn(),
                };
                if l.first() != Some(&b'$') {
                    return bad("expected '$'");
                }
                let len: u64 = match std::str::from_utf8(&l[1..]).ok().and_then(|s| s.parse().ok()) {
                    Some(v) if v <= self.max_bulk => v,
                    _ => return bad("invalid bulk length"),
                };
                let Ok(a) = self.inp.bytes(len) else { return torn() };
                let Ok(crlf) = self.inp.array::<2>() else { return torn() };
                if &crlf != b"\r\n" {
                    return bad("missing CRLF after a bulk");
                }
                argv.push(a);
            }
            return Ok(Next::Command(argv));
        }
    }
}

/// A line cut short (the file ends inside it) or too long to be one: the log's torn tail.
struct Torn;

// ---------------------------------------------------------------------------------------------
// The log writer
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Fsync {
    Always = 0,
    EverySec = 1,
    No = 2,
}

impl Fsync {
    pub fn parse(s: &str) -> Fsync {
        match s {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// Effects appended but not yet handed to the writer: the buffer and the database the last
/// appended command ran in (a SELECT is written when it changes).
#[derive(Default)]
struct Segment {
    buf: Vec<u8>,
    db: Option<usize>,
    /// The unix second of the last `#TS:` annotation written (`aof-timestamp-enabled`).
    ts: i64,
}

impl Segment {
    fn push<'a>(&mut self, timestamps: bool, cmds: impl Iterator<Item = (usize, &'a [Vec<u8>])>) {
        if timestamps {
            let now = unix_s();
            if now > self.ts {
                timestamp_annotation(&mut self.buf, now);
                self.ts = now;
            }
        }
        for (db, argv) in cmds {
            if self.db != Some(db) && db != NO_DB {
                let sel = vec![b"SELECT".to_vec(), db.to_string().into_bytes()];
                encode(&mut self.buf, &sel);
                self.db = Some(db);
            }
            encode(&mut self.buf, argv);
        }
    }
}

struct Pending {
    /// For the file being appended to.
    cur: Segment,
    /// While an AOF rewrite runs (see [`AofLog::split`]): for the previous incremental file,
    /// the effects of writes its snapshot (`epoch`) will hold.
    old: Option<(Segment, u64)>,
    /// Bytes appended since the log opened, to either file.
    appended: u64,
}

/// The files written to: the current incremental file, and during a rewrite the previous one.
struct Files {
    cur: Tail,
    old: Option<Tail>,
}

/// One line of the padding `appendfsync always` keeps after an incremental file's commands:
/// an annotation, which Redis's loader and ours skip. No `\r` in it: a command's bytes always
/// end with `\r\n`, so where the commands end can be found (`content_end`), and a bulk torn by
/// a crash can never be completed by padding bytes (its CRLF is never there).
pub const PAD_LINE: &[u8; 32] = b"#                              \n";
const PAD: u64 = PAD_LINE.len() as u64;
/// Padding allocated at a time.
const PAD_CHUNK: u64 = 1 << 20;

fn pad_chunk() -> &'static [u8] {
    static CHUNK: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    CHUNK.get_or_init(|| PAD_LINE.repeat((PAD_CHUNK / PAD) as usize))
}

/// An incremental file being written: commands up to `end`, padding lines from there to
/// `alloc` when `appendfsync always` allocated space ahead.
///
/// Why: a write that grows a file makes the fdatasync after it write the file's metadata
/// too (the new size: the inode, or a journal commit on a journaling file system), on top of
/// flushing the data. With the space already written
/// (padding), the fsync flushes the data only: measured on this project's ext4/virtio disk,
/// ~0.7× the time per fsync (`bench/fsync.py`), and `always` serves ~20 % more requests.
/// `fallocate` helps less: its unwritten extents turn into written ones at the first write,
/// a metadata write again. The padding is cut off when the file is closed or loaded, and a
/// crash leaves a file Redis loads as it is (annotations after the commands).
///
/// It is `aof-preallocate`, off by default: the file's size then grows in steps, not with
/// each write, and whatever follows the file by its size (`tail -f`, a monitor, Redis's test
/// "AOF fsync always barrier issue") sees padding and misses the writes made into it.
struct Tail {
    file: Arc<std::fs::File>,
    end: u64,
    alloc: u64,
}

impl Tail {
    fn open(path: &Path) -> std::io::Result<Tail> {
        // Not O_APPEND: writes go at `end`, before the padding (and Linux's pwrite appends on
        // an O_APPEND file whatever the offset).
        let f = std::fs::OpenOptions::new().create(true).write(true).truncate(false).open(path)?;
        let end = f.metadata()?.len();
        Ok(Tail { file: Arc::new(f), end, alloc: end })
    }

    /// Writes `buf` at the end; with `ahead`, first makes sure padding follows it, and
    /// without, cuts off any padding left from when it was on (the file grows as it is
    /// written again).
    fn write(&mut self, buf: &mut Vec<u8>, ahead: bool) -> std::io::Result<()> {
        if !ahead {
            self.finish()?;
        }
        let len = buf.len();
        let new_end = self.end + len as u64;
        if ahead && self.alloc < new_end + 3 * PAD {
            let from = if self.alloc >= new_end { self.alloc } else { new_end.next_multiple_of(PAD) };
            self.file.write_all_at(pad_chunk(), from)?;
            self.alloc = from + PAD_CHUNK;
        }
        // Between the commands and the next whole padding line, a shorter one (three bytes
        // at least, "# \n"), written with them: whatever follows the commands is always whole
        // padding lines.
        let mut fix = 0;
        if new_end < self.alloc {
            fix = (PAD - new_end % PAD) % PAD;
            if fix == 1 || fix == 2 {
                fix += PAD;
            }
        }
        if fix > 0 {
            buf.push(b'#');
            buf.resize(len + fix as usize - 1, b' ');
            buf.push(b'\n');
        }
        let r = self.file.write_all_at(buf, self.end);
        buf.truncate(len);
        r?;
        self.end = new_end;
        self.alloc = self.alloc.max(new_end + fix);
        Ok(())
    }

    /// Cuts the padding off (the file is done with, or is being closed).
    fn finish(&mut self) -> std::io::Result<()> {
        if self.alloc > self.end {
            self.file.set_len(self.end)?;
            self.alloc = self.end;
        }
        Ok(())
    }

    /// The file is done with: padding cut off, the whole of it (size included) on disk.
    fn close(&mut self) -> std::io::Result<()> {
        self.finish()?;
        self.file.sync_all()
    }
}

/// Where an incremental file's commands end: before the padding of `appendfsync always` (see
/// [`Tail`]) when the file ends with it, otherwise its size. That is just after the file's
/// last CRLF, since padding holds none: a write torn by a crash leaves part of its commands
/// before the padding, and the reader then finds a torn command at this end — as Redis's
/// loader finds one at the end of a file whose last append was cut short.
pub fn content_end(f: &std::fs::File) -> std::io::Result<u64> {
    let size = f.metadata()?.len();
    // A crash while padding was being written may leave a part of a line at the end.
    let whole = size - size % PAD;
    let mut tail = [0u8; PAD_LINE.len() * 2];
    if whole < PAD {
        return Ok(size);
    }
    let n = (size - whole + PAD) as usize;
    f.read_exact_at(&mut tail[..n], whole - PAD)?;
    if tail[..PAD as usize] != PAD_LINE[..] || tail[PAD as usize..n] != PAD_LINE[..n - PAD as usize] {
        return Ok(size);
    }
    let mut block = vec![0u8; 64 << 10];
    let mut pos = whole;
    let mut lf_after = false;
    while pos > 0 {
        let start = pos.saturating_sub(block.len() as u64);
        let n = (pos - start) as usize;
        f.read_exact_at(&mut block[..n], start)?;
        for i in (0..n).rev() {
            if block[i] == b'\r' && lf_after {
                return Ok(start + i as u64 + 2);
            }
            lf_after = block[i] == b'\n';
        }
        pos = start;
    }
    Ok(0)
}

thread_local! {
    /// The log offset this thread's last append reached: a worker using `always` waits for
    /// it to be durable before it sends the round's replies.
    static LAST_APPENDED: Cell<u64> = const { Cell::new(0) };
}

/// The offset this thread appended up to since it last asked (0: nothing new).
pub fn take_thread_appended() -> u64 {
    LAST_APPENDED.with(|c| c.replace(0))
}

/// This thread appended since it last took its offset (`take_thread_appended`).
pub fn thread_appended() -> bool {
    LAST_APPENDED.with(|c| c.get() != 0)
}

/// The incremental file being appended to, its writer thread and its durability.
///
/// Like Redis, a worker hands what its round appended to the kernel (`write`) before the
/// round's replies go out, whatever the fsync policy: a process that is killed loses nothing
/// it acknowledged. With `always` the workers fsync before their replies, the first one to
/// need it for everyone ([`AofLog::before_replies`]: group commit). The writer thread fsyncs
/// once a second with `everysec`, never with `no`, and writes (with `always` also fsyncs)
/// what idle rounds left behind.
///
/// During a fork-less rewrite the log writes two files (`split` … `unsplit`): effects of
/// writes the rewrite's snapshot holds go on to the previous incremental file, the others to
/// the new one, which the manifest already names after the previous one. Offsets, writes and
/// fsyncs cover both, so durability means the same thing throughout.
pub struct AofLog {
    pending: Mutex<Pending, { rank::AOF_PENDING }>,
    /// Taken to write (then `pending`): writes reach the files in append order.
    files: Mutex<Files, { rank::AOF_LOG }>,
    /// Wakes the writer: the flag (set under its mutex) says work was asked for, so a wake-up
    /// sent before the writer starts waiting is not lost.
    work: Condvar,
    work_lock: parking_lot::Mutex<bool>,
    /// Bytes appended by every thread (`Pending::appended`), readable without its lock.
    appended_now: AtomicU64,
    /// Bytes written to the file, and fsync'd (the durable offset).
    pub written: AtomicU64,
    pub durable: AtomicU64,
    /// Guards `durable`'s waits; true while a worker runs `always`'s fsync.
    durable_lock: parking_lot::Mutex<bool>,
    durable_cv: Condvar,
    pub policy: AtomicU8,
    stop: AtomicBool,
    /// Unix seconds of the last fsync.
    pub last_fsync_s: AtomicI64,
    /// The last write failed (`aof_last_write_status:err`).
    pub write_failed: AtomicBool,
    /// Bytes in the incremental files the manifest names.
    pub file_size: AtomicU64,
    /// `aof-timestamp-enabled`: a `#TS:<unix seconds>` line goes before the first command of
    /// each new second, as Redis writes it (its loader and ours skip `#` lines).
    pub timestamps: AtomicBool,
    /// `aof-preallocate`: with `always`, padding is kept ahead of the commands ([`Tail`]).
    pub preallocate: AtomicBool,
    /// `no-appendfsync-on-rewrite yes` while a snapshot (BGSAVE, an AOF rewrite) is being
    /// written: no fsync meanwhile, as Redis skips them while a child does disk I/O (set by
    /// the cron); what is written is fsync'd once it ends.
    pub hold_fsync: AtomicBool,
}

/// DEBUG AOF-FLUSH-SLEEP: microseconds slept before each write of the log (a testing knob of
/// Redis's: replies must still wait for the write).
pub static FLUSH_SLEEP_US: AtomicU64 = AtomicU64::new(0);

/// The annotation Redis writes with `aof-timestamp-enabled` (`#TS:<unix seconds>`).
pub fn timestamp_annotation(out: &mut Vec<u8>, unix_s: i64) {
    out.extend_from_slice(format!("#TS:{unix_s}\r\n").as_bytes());
}

impl AofLog {
    /// Opens (appending) the incremental file and starts its writer thread.
    pub fn open(path: &Path, policy: Fsync) -> std::io::Result<Arc<AofLog>> {
        let cur = Tail::open(path)?;
        let size = cur.end;
        let log = Arc::new(AofLog {
            pending: Mutex::new(Pending { cur: Segment::default(), old: None, appended: 0 }),
            files: Mutex::new(Files { cur, old: None }),
            work: Condvar::new(),
            work_lock: parking_lot::Mutex::new(false),
            appended_now: AtomicU64::new(0),
            written: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            durable_lock: parking_lot::Mutex::new(false),
            durable_cv: Condvar::new(),
            policy: AtomicU8::new(policy as u8),
            stop: AtomicBool::new(false),
            last_fsync_s: AtomicI64::new(0),
            write_failed: AtomicBool::new(false),
            file_size: AtomicU64::new(size),
            timestamps: AtomicBool::new(false),
            preallocate: AtomicBool::new(false),
            hold_fsync: AtomicBool::new(false),
        });
        let l2 = log.clone();
        std::thread::Builder::new().name("atoll-aof".into()).spawn(move || l2.writer())?;
        Ok(log)
    }

    pub fn policy(&self) -> Fsync {
        match self.policy.load(Ordering::Relaxed) {
            0 => Fsync::Always,
            2 => Fsync::No,
            _ => Fsync::EverySec,
        }
    }

    /// Appends commands run in `db` (called with the writer's shard locks held, so the log's
    /// order is the lock order). A leaf lock around a memcpy. `epoch`: the snapshot epoch the
    /// writes come after (`Locks::seen_epoch`); during a rewrite, below the rewrite's epoch
    /// means its base holds them, and they go to the previous incremental file.
    pub fn append<'a>(&self, epoch: u64, cmds: impl Iterator<Item = (usize, &'a [Vec<u8>])>) {
        let ts = self.timestamps.load(Ordering::Relaxed);
        let mut p = self.pending.lock();
        let p = &mut *p;
        let seg = match &mut p.old {
            Some((old, split)) if epoch < *split => old,
            _ => &mut p.cur,
        };
        let before = seg.buf.len();
        seg.push(ts, cmds);
        p.appended += (seg.buf.len() - before) as u64;
        let at = p.appended;
        self.appended_now.store(at, Ordering::Release);
        LAST_APPENDED.with(|c| c.set(at));
    }

    /// Writes everything appended so far to the files (whoever comes first writes for all).
    pub fn write_pending(&self) {
        let mut files = self.files.lock();
        let (cur, old, upto) = {
            let mut p = self.pending.lock();
            let old = p.old.as_mut().map(|(s, _)| std::mem::take(&mut s.buf)).unwrap_or_default();
            (std::mem::take(&mut p.cur.buf), old, p.appended)
        };
        if cur.is_empty() && old.is_empty() {
            return;
        }
        let sleep = FLUSH_SLEEP_US.load(Ordering::Relaxed);
        if sleep > 0 {
            std::thread::sleep(Duration::from_micros(sleep));
        }
        let mut ok = true;
        let ahead = self.policy() == Fsync::Always && self.preallocate.load(Ordering::Relaxed);
        let Files { cur: cur_file, old: old_file } = &mut *files;
        for (mut buf, file, is_old) in [(old, old_file.as_mut(), true), (cur, Some(cur_file), false)] {
            if buf.is_empty() {
                continue;
            }
            let r = match file {
                Some(f) => f.write(&mut buf, ahead),
                None => Ok(()),
            };
            match r {
                Ok(()) => {
                    self.file_size.fetch_add(buf.len() as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    crate::log_warning!("Error writing to the AOF file: {e}");
                    ok = false;
                    // Kept, ahead of what was appended meanwhile, for the next attempt.
                    let mut p = self.pending.lock();
                    let seg = if is_old { p.old.as_mut().map(|(s, _)| s) } else { Some(&mut p.cur) };
                    if let Some(seg) = seg {
                        let mut rest = buf;
                        rest.extend_from_slice(&seg.buf);
                        seg.buf = rest;
                    }
                }
            }
        }
        self.write_failed.store(!ok, Ordering::Relaxed);
        if ok {
            self.written.store(upto, Ordering::Release);
        }
    }

    /// A rewrite begins: from now on the log appends to `path` (a new incremental file the
    /// manifest already names), except the effects of writes that come before snapshot
    /// `epoch` — the rewrite's, about to begin — which go on to the current file until
    /// [`AofLog::unsplit`]. Called just before the snapshot begins, with nothing able to
    /// begin one meanwhile.
    pub fn split(&self, path: &Path, epoch: u64) -> std::io::Result<()> {
        let f = Tail::open(path)?;
        let mut files = self.files.lock();
        let mut p = self.pending.lock();
        let cur = std::mem::take(&mut p.cur);
        p.old = Some((cur, epoch));
        files.old = Some(std::mem::replace(&mut files.cur, f));
        Ok(())
    }

    /// Every write the rewrite's snapshot holds has been logged (its walk has locked every
    /// shard since it began): what is left for the previous file is written and fsync'd, and
    /// the log appends to the new file only. Returns the previous file's fsync result.
    pub fn unsplit(&self) -> std::io::Result<()> {
        self.write_pending();
        let old = {
            let mut files = self.files.lock();
            let mut p = self.pending.lock();
            if let Some((seg, _)) = p.old.take() {
                // Left by a failed write: the new file takes it, after what it already has in
                // order of the locks (these writes touched no shard the new file's did since).
                let mut rest = seg.buf;
                rest.extend_from_slice(&p.cur.buf);
                p.cur.buf = rest;
            }
            files.old.take()
        };
        match old {
            Some(mut f) => f.close(),
            None => Ok(()),
        }
    }

    /// Before a round's replies: what this thread appended (up to `offset`) is written, and
    /// with `always` also fsync'd.
    ///
    /// Group commit without a hand-off: the first worker to need an fsync runs it itself,
    /// for everything written so far (as Redis's one thread does in beforeSleep); workers that
    /// need one meanwhile wait for it, and if it did not cover them one of them runs the
    /// next. Asking the writer thread instead cost two more context switches per round on
    /// the worker's core.
    pub fn before_replies(&self, offset: u64) {
        if self.written.load(Ordering::Acquire) < offset {
            self.write_pending();
        }
        if self.policy() != Fsync::Always || self.hold_fsync.load(Ordering::Relaxed) {
            return;
        }
        while self.durable.load(Ordering::Acquire) < offset && !self.stop.load(Ordering::Relaxed) {
            {
                let mut syncing = self.durable_lock.lock();
                if *syncing {
                    self.durable_cv.wait_for(&mut syncing, Duration::from_millis(100));
                    continue;
                }
                *syncing = true;
            }
            if self.written.load(Ordering::Acquire) < offset {
                self.write_pending();
            }
            let written = self.written.load(Ordering::Acquire);
            let ok = written >= offset && self.sync();
            {
                let mut syncing = self.durable_lock.lock();
                *syncing = false;
                if ok {
                    self.last_fsync_s.store(unix_s(), Ordering::Relaxed);
                    self.durable.fetch_max(written, Ordering::Release);
                }
                self.durable_cv.notify_all();
            }
            if !ok {
                // A failed write or fsync (logged, INFO aof_last_write_status): tried again.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// The commands appended and not yet handed to the file: (their bytes, the buffers'
    /// allocation) — INFO `aof_buffer_length` and `mem_aof_buffer`.
    pub fn buffered(&self) -> (u64, u64) {
        let p = self.pending.lock();
        let len = p.cur.buf.len() + p.old.as_ref().map_or(0, |o| o.0.buf.len());
        let cap = p.cur.buf.capacity() + p.old.as_ref().map_or(0, |o| o.0.buf.capacity());
        (len as u64, cap as u64)
    }

    /// Bytes appended so far by every thread.
    pub fn appended(&self) -> u64 {
        self.appended_now.load(Ordering::Acquire)
    }

    fn wake_writer(&self) {
        *self.work_lock.lock() = true;
        self.work.notify_one();
    }

    /// Stops the writer after a last write and fsync of what is pending.
    pub fn close(&self) {
        self.write_pending();
        self.stop.store(true, Ordering::Release);
        self.wake_writer();
        let target = self.written.load(Ordering::Acquire);
        let mut g = self.durable_lock.lock();
        while self.durable.load(Ordering::Acquire) < target {
            if self.durable_cv.wait_for(&mut g, Duration::from_secs(5)).timed_out() {
                break;
            }
        }
        drop(g);
        let mut files = self.files.lock();
        if files.cur.alloc > files.cur.end {
            if let Err(e) = files.cur.close() {
                crate::log_warning!("Error cutting the padding off the AOF file: {e}");
            }
        }
    }

    /// Bytes of commands in the current incremental file (its size without padding).
    pub fn end(&self) -> u64 {
        self.files.lock().cur.end
    }

    /// fsyncs what has been written to the files (both during a rewrite), without holding
    /// the write lock while the disk works.
    fn sync(&self) -> bool {
        let (cur, old) = {
            let f = self.files.lock();
            (f.cur.file.clone(), f.old.as_ref().map(|t| t.file.clone()))
        };
        old.is_none_or(|o| o.sync_data().is_ok()) && cur.sync_data().is_ok()
    }

    fn writer(self: Arc<AofLog>) {
        let mut last_sync = Instant::now();
        loop {
            {
                let mut asked = self.work_lock.lock();
                if !*asked && !self.stop.load(Ordering::Acquire) {
                    self.work.wait_for(&mut asked, Duration::from_millis(100));
                }
                *asked = false;
            }
            self.write_pending();
            let written = self.written.load(Ordering::Acquire);
            let stopping = self.stop.load(Ordering::Acquire);
            let held = self.hold_fsync.load(Ordering::Relaxed) && !stopping;
            let due = written > self.durable.load(Ordering::Acquire)
                && !held
                && match self.policy() {
                    Fsync::Always => true,
                    Fsync::EverySec => last_sync.elapsed() >= Duration::from_secs(1) || stopping,
                    Fsync::No => stopping,
                };
            // Everything written before this call is covered.
            if due && self.sync() {
                last_sync = Instant::now();
                self.last_fsync_s.store(unix_s(), Ordering::Relaxed);
                self.mark_durable(written);
            }
            if stopping {
                self.mark_durable(written);
                return;
            }
        }
    }

    fn mark_durable(&self, upto: u64) {
        let _g = self.durable_lock.lock();
        if upto > self.durable.load(Ordering::Acquire) {
            self.durable.store(upto, Ordering::Release);
        }
        self.durable_cv.notify_all();
    }
}

fn unix_s() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Where the AOF directory is.
pub fn dir_path(appenddirname: &str) -> PathBuf {
    PathBuf::from(appenddirname)
}

// ---------------------------------------------------------------------------------------------
// A base written as commands (`aof-use-rdb-preamble no`), as Redis's rewriteAppendOnlyFileRio
// writes one: each key rebuilt by the commands that create it, 64 items per command.
// ---------------------------------------------------------------------------------------------

const ITEMS_PER_CMD: usize = 64;

fn bulk(s: &[u8]) -> Vec<u8> {
    s.to_vec()
}

fn num(v: impl std::fmt::Display) -> Vec<u8> {
    v.to_string().into_bytes()
}

fn score(v: f64) -> Vec<u8> {
    let mut b = Vec::new();
    crate::protocol::reply::fmt_double(v, &mut b);
    b
}

/// Appends, in batches, `cmd key item…` commands for `items` (each item one or more words).
pub fn batched(out: &mut Vec<u8>, cmd: &[u8], key: &[u8], items: impl Iterator<Item = Vec<Vec<u8>>>) {
    let mut argv: Vec<Vec<u8>> = Vec::new();
    let mut n = 0;
    for it in items {
        if n == 0 {
            argv = vec![bulk(cmd), bulk(key)];
        }
        argv.extend(it);
        n += 1;
        if n == ITEMS_PER_CMD {
            encode(out, &argv);
            n = 0;
        }
    }
    if n > 0 {
        encode(out, &argv);
    }
}

/// The commands that rebuild `key` holding `v` (with its expiry, if any).
pub fn value_commands(out: &mut Vec<u8>, key: &[u8], v: &crate::engine::Value, expire: Option<i64>) {
    use crate::engine::Value;
    let mut ib = itoa::Buffer::new();
    match v {
        Value::List(l) => batched(out, b"RPUSH", key, l.iter().map(|e| vec![bulk(&e)])),
        Value::Set(s) => {
            let mut members = Vec::with_capacity(s.len());
            s.for_each(|m| members.push(vec![bulk(m)]));
            batched(out, b"SADD", key, members.into_iter());
        }
        Value::ZSet(z) => {
            let mut items = Vec::with_capacity(z.len());
            z.for_each(|m, sc| items.push(vec![score(sc), bulk(m)]));
            batched(out, b"ZADD", key, items.into_iter());
        }
        Value::Hash(h) => {
            let mut items = Vec::with_capacity(h.len());
            h.for_each(|f, val| items.push(vec![bulk(f), bulk(val)]));
            batched(out, b"HMSET", key, items.into_iter());
            // Field deadlines, one HPEXPIREAT per distinct time (absolute, so a replay at any
            // later time reaches the same state).
            let mut by_time: std::collections::BTreeMap<i64, Vec<Vec<u8>>> = Default::default();
            h.for_each_with_ttl(|f, _, t| {
                if let Some(t) = t {
                    by_time.entry(t).or_default().push(bulk(f));
                }
            });
            for (t, fields) in by_time {
                for chunk in fields.chunks(ITEMS_PER_CMD) {
                    let mut argv =
                        vec![bulk(b"HPEXPIREAT"), bulk(key), num(t), bulk(b"FIELDS"), num(chunk.len() as i64)];
                    argv.extend(chunk.iter().cloned());
                    encode(out, &argv);
                }
            }
        }
        Value::Stream(s) => {
            use crate::engine::stream::StreamId;
            let entries = s.range(StreamId::MIN, StreamId::MAX, false, 0);
            if entries.is_empty() {
                // An empty stream still exists: create it with an entry trimmed away at once,
                // as ID 0-1 (Redis's choice: its last ID may be 0-0, which XADD refuses); the
                // XSETID that follows puts the real last ID back.
                encode(
                    out,
                    &[bulk(b"XADD"), bulk(key), bulk(b"MAXLEN"), bulk(b"0"), bulk(b"0-1"), bulk(b"x"), bulk(b"y")],
                );
            }
            for e in entries {
                let mut argv = vec![bulk(b"XADD"), bulk(key), e.id.to_bytes()];
                argv.extend(e.fields.iter().cloned());
                encode(out, &argv);
            }
            encode(
                out,
                &[
                    bulk(b"XSETID"),
                    bulk(key),
                    s.last_id.to_bytes(),
                    bulk(b"ENTRIESADDED"),
                    num(s.entries_added),
                    bulk(b"MAXDELETEDID"),
                    s.max_deleted_id.to_bytes(),
                ],
            );
            for (name, g) in &s.groups {
                encode(
                    out,
                    &[
                        bulk(b"XGROUP"),
                        bulk(b"CREATE"),
                        bulk(key),
                        bulk(name),
                        g.last_id.to_bytes(),
                        bulk(b"ENTRIESREAD"),
                        num(g.entries_read),
                    ],
                );
                for (cname, c) in &g.consumers {
                    encode(out, &[bulk(b"XGROUP"), bulk(b"CREATECONSUMER"), bulk(key), bulk(name), bulk(cname)]);
                    for id in &c.pel {
                        let Some(nack) = g.pel.get(id) else { continue };
                        encode(
                            out,
                            &[
                                bulk(b"XCLAIM"),
                                bulk(key),
                                bulk(name),
                                bulk(cname),
                                bulk(b"0"),
                                id.to_bytes(),
                                bulk(b"TIME"),
                                num(nack.delivery_time),
                                bulk(b"RETRYCOUNT"),
                                num(nack.delivery_count),
                                bulk(b"JUSTID"),
                                bulk(b"FORCE"),
                            ],
                        );
                    }
                }
            }
        }
        _ => {
            let mut b = itoa::Buffer::new();
            let val = v.as_bytes(&mut b).unwrap_or_default().to_vec();
            encode(out, &[bulk(b"SET"), bulk(key), val]);
        }
    }
    if let Some(t) = expire {
        encode(out, &[bulk(b"PEXPIREAT"), bulk(key), ib.format(t).as_bytes().to_vec()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> (Vec<Vec<Vec<u8>>>, Result<Next, PersistError>) {
        let mut r = CommandReader::new(bytes, 1 << 20);
        let mut cmds = Vec::new();
        loop {
            match r.read_next() {
                Ok(Next::Command(a)) => cmds.push(a),
                other => return (cmds, other),
            }
        }
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("atoll-aof-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// With `always` the log writes into padding allocated ahead: a file read while it runs
    /// (as a crash leaves it) holds the commands, then padding that Redis's loader skips as
    /// annotations and `content_end` finds; closing cuts the padding off.
    #[test]
    fn always_writes_into_padding_that_loaders_skip() {
        let dir = temp("pad");
        let path = dir.join("a.aof");
        std::fs::write(&path, b"*1\r\n$4\r\nPING\r\n").unwrap(); // an odd length to begin at
        let log = AofLog::open(&path, Fsync::Always).unwrap();
        log.preallocate.store(true, Ordering::Relaxed);
        let mut want = vec![vec![b"PING".to_vec()]];
        for round in 0..300usize {
            let v = "x".repeat(round % 70);
            let argv = vec![b"SET".to_vec(), format!("k{round}").into_bytes(), v.into_bytes()];
            log.append(0, [(0, argv.as_slice())].into_iter());
            log.before_replies(take_thread_appended());
            if round == 0 {
                want.push(vec![b"SELECT".to_vec(), b"0".to_vec()]);
            }
            want.push(argv);
            let bytes = std::fs::read(&path).unwrap();
            let f = std::fs::File::open(&path).unwrap();
            let end = content_end(&f).unwrap();
            assert_eq!(end, log.end(), "round {round}");
            assert!(bytes.len() as u64 >= end + 3 * PAD && bytes.ends_with(PAD_LINE));
            // Up to the end, and the whole file as Redis reads it: the same commands.
            for part in [&bytes[..end as usize], &bytes[..]] {
                let (cmds, last) = read_all(part);
                assert_eq!(cmds, want, "round {round}");
                assert!(matches!(last, Ok(Next::End)), "round {round}: {:?}", last.map(|_| ()));
            }
        }
        // Turned off (or `appendfsync` changed): the next write cuts the padding off.
        log.preallocate.store(false, Ordering::Relaxed);
        let argv = vec![b"DEL".to_vec(), b"k0".to_vec()];
        log.append(0, [(0, argv.as_slice())].into_iter());
        log.before_replies(take_thread_appended());
        want.push(argv);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), log.end());
        let end = log.end();
        log.close();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), end);
        assert_eq!(read_all(&std::fs::read(&path).unwrap()).0, want);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A crash in the middle of a write leaves the start of its commands over the padding:
    /// read up to `content_end`, that is a torn command at the end (what `aof-load-truncated`
    /// cuts) or nothing, never a command completed by padding bytes; a whole write reads whole.
    #[test]
    fn a_write_torn_over_the_padding_reads_as_a_torn_command() {
        let dir = temp("torn");
        let path = dir.join("a.aof");
        let log = AofLog::open(&path, Fsync::Always).unwrap();
        log.preallocate.store(true, Ordering::Relaxed);
        let set = vec![b"SET".to_vec(), b"k".to_vec(), b"abcdefghijklmnopqrstuvwxyz0123".to_vec()];
        for _ in 0..3 {
            log.append(0, [(0, set.as_slice())].into_iter());
            log.before_replies(take_thread_appended());
        }
        let end = log.end();
        let padded = std::fs::read(&path).unwrap();
        let mut next = Vec::new();
        encode(&mut next, &set);
        for cut in 1..=next.len() {
            let mut bytes = padded.clone();
            bytes[end as usize..end as usize + cut].copy_from_slice(&next[..cut]);
            std::fs::write(&path, &bytes).unwrap();
            let f = std::fs::File::open(&path).unwrap();
            let stop = content_end(&f).unwrap() as usize;
            let (cmds, last) = read_all(&bytes[..stop]);
            if cut == next.len() {
                assert_eq!(cmds.len(), 5);
                assert!(matches!(last, Ok(Next::End)));
            } else {
                assert_eq!(cmds.len(), 4, "cut {cut}");
                // Torn at the end, or (no CRLF of it written yet) not there at all.
                let torn = match last {
                    Ok(Next::Truncated(at)) => at == end,
                    Ok(Next::End) => true,
                    _ => false,
                };
                assert!(torn, "cut {cut}");
            }
        }
        log.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// During a rewrite the log writes two files: effects of writes the rewrite's snapshot
    /// holds (an epoch below its own) to the previous file, the rest to the new one; after
    /// `unsplit`, everything to the new one. Offsets and durability cover both.
    #[test]
    fn a_split_log_routes_effects_by_epoch() {
        let dir = std::env::temp_dir().join(format!("atoll-aof-split-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (old, new) = (dir.join("old.aof"), dir.join("new.aof"));
        let log = AofLog::open(&old, Fsync::Always).unwrap();
        let cmd = |s: &str| s.split(' ').map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
        let (set, incr, rpush, del) = (cmd("SET a 1"), cmd("INCR n"), cmd("RPUSH l x"), cmd("DEL a"));
        log.append(1, [(0, set.as_slice())].into_iter());
        log.split(&new, 2).unwrap();
        log.append(1, [(0, incr.as_slice())].into_iter()); // the base holds it
        log.append(2, [(3, rpush.as_slice())].into_iter()); // after the instant
        log.append(1, [(0, incr.as_slice())].into_iter());
        log.before_replies(take_thread_appended());
        assert_eq!(log.durable.load(Ordering::Acquire), log.written.load(Ordering::Acquire));
        log.unsplit().unwrap();
        log.append(1, [(3, del.as_slice())].into_iter()); // after unsplit: the new file
        log.close();
        let text = |p: &Path| String::from_utf8(std::fs::read(p).unwrap()).unwrap().replace("\r\n", " ");
        assert_eq!(text(&old), "*2 $6 SELECT $1 0 *3 $3 SET $1 a $1 1 *2 $4 INCR $1 n *2 $4 INCR $1 n ");
        assert_eq!(text(&new), "*2 $6 SELECT $1 3 *3 $5 RPUSH $1 l $1 x *2 $3 DEL $1 a ");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn manifests_round_trip_and_quote_odd_names() {
        let odd = " file seq \n\n.aof ".to_string();
        let m = Manifest {
            base: Some(AofFile { name: base_name(&odd, 2, true), seq: 2 }),
            history: Vec::new(),
            incr: vec![AofFile { name: incr_name("appendonly.aof", 2), seq: 2 }],
        };
        let text = m.text();
        assert_eq!(
            text,
            "file \" file seq \\n\\n.aof .2.base.rdb\" seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
        );
        assert_eq!(Manifest::parse(&text).unwrap(), m);
        assert_eq!(
            Manifest::parse("file a seq 1 type b\n\n").unwrap_err().to_string(),
            "Invalid AOF manifest file format (line 2)"
        );
        assert_eq!(
            Manifest::parse("file a seq 2 type i\nfile b seq 1 type i\n").unwrap_err().to_string(),
            "Found a non-monotonic sequence number"
        );
        assert!(Manifest::parse("file a seq 1\n")
            .unwrap_err()
            .to_string()
            .starts_with("Invalid AOF manifest file format"));
    }
}
