//! Atomic slot migration (Valkey 9's `CLUSTER MIGRATESLOTS`): the jobs this node runs or
//! ran, as source (export) or target (import), and the source's copy of the writes to the
//! slots it is giving away.
//!
//! The protocol is Valkey 9.1's, byte for byte, so Atoll and Valkey nodes migrate slots to
//! each other (see docs/design/atomic-slot-migration.md): the source connects to the target's
//! client port and sends `CLUSTER SYNCSLOTS ESTABLISH`; the target answers `+OK` and from then
//! on runs what the link carries without replying — a snapshot of the slots as commands, then
//! the writes made to them since the snapshot's instant — and both ends trade `CLUSTER
//! SYNCSLOTS` control messages on the same socket: ACK each second, SNAPSHOT-EOF,
//! REQUEST-PAUSE, PAUSED (the source holds its writes back), REQUEST-FAILOVER,
//! FAILOVER-GRANTED (the target bumps its epoch, takes the slots and tells the cluster). The
//! source learns it is done from the cluster bus, as after `SETSLOT … NODE`, and its ordinary
//! cleanup of lost slots deletes the keys.
//!
//! The jobs live here, apart from the cluster view's lock: the call path reads one flag
//! (`exporting`) per write.

use crate::lockorder::{rank, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// The control messages, as both ends send them (`*3 CLUSTER SYNCSLOTS <X>`).
pub fn message(what: &str) -> Vec<u8> {
    let mut out = Vec::new();
    crate::persist::aof::encode(&mut out, &[b"CLUSTER".to_vec(), b"SYNCSLOTS".to_vec(), what.as_bytes().to_vec()]);
    out
}

/// A job's state, named as Valkey's CLUSTER GETSLOTMIGRATIONS names it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Step {
    // Export (source).
    Connecting,
    SendingAuth,
    SendingEstablish,
    WaitingToSnapshot,
    Snapshotting,
    Replicating,
    WaitingToPause,
    FailoverPaused,
    /// (Both sides: the source granted it; the target took the slots.)
    FailoverGranted,
    // Import (target).
    WaitingForAck,
    ReceivingSnapshot,
    WaitingForPaused,
    FailoverRequested,
    OccurringOnPrimary,
    // Either, at the end.
    Success,
    Failed,
    Cancelled,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Connecting => "connecting",
            Step::SendingAuth => "sending-auth-command",
            Step::SendingEstablish => "sending-establish-command",
            Step::WaitingToSnapshot => "waiting-to-snapshot",
            Step::Snapshotting => "snapshotting",
            Step::Replicating => "replicating",
            Step::WaitingToPause => "waiting-to-pause",
            Step::FailoverPaused => "failover-paused",
            Step::FailoverGranted => "failover-granted",
            Step::WaitingForAck => "waiting-for-ack",
            Step::ReceivingSnapshot => "receiving-snapshot",
            Step::WaitingForPaused => "waiting-for-paused",
            Step::FailoverRequested => "failover-requested",
            Step::OccurringOnPrimary => "occurring-on-primary",
            Step::Success => "success",
            Step::Failed => "failed",
            Step::Cancelled => "cancelled",
        }
    }

    pub fn finished(self) -> bool {
        matches!(self, Step::Success | Step::Failed | Step::Cancelled)
    }
}

/// What changes in a job as it runs.
pub struct Progress {
    pub step: Step,
    pub message: String,
    pub last_update: i64,
    pub last_ack: i64,
    /// Unix ms of the last bytes from the peer (an import's liveness), and of the last ACK
    /// an import sent.
    pub heard_ms: i64,
    pub acked_ms: i64,
}

/// One migration, as either end sees it.
pub struct Job {
    /// 40 hex characters, made by the source and shared by both ends.
    pub name: String,
    pub export: bool,
    pub ranges: Vec<(usize, usize)>,
    /// Node names (40 characters).
    pub source: String,
    pub target: String,
    pub create_time: i64,
    pub progress: Mutex<Progress, { rank::SLOT_MIGRATION }>,
    /// Export: writes to the slots since the snapshot's instant, as commands, waiting for the
    /// link (with the database they selected last). None until the instant.
    pub stream: Mutex<Option<Captured>, { rank::SLOT_MIGRATION }>,
    /// CLUSTER CANCELSLOTMIGRATIONS asked the export to stop.
    pub cancel: AtomicBool,
    /// Import: the link's client id (0 once it is gone).
    pub link: AtomicI64,
    /// Export: the target's client address, and whether its thread has been started.
    pub peer: (String, u16),
    pub started: AtomicBool,
    /// Import: its end has been told to this node's replicas (FINISH).
    pub announced: AtomicBool,
}

/// The writes an export copied, not yet sent.
#[derive(Default)]
pub struct Captured {
    pub buf: Vec<u8>,
    pub db: Option<usize>,
}

impl Job {
    pub fn new(
        name: String,
        export: bool,
        ranges: Vec<(usize, usize)>,
        source: String,
        target: String,
        peer: (String, u16),
    ) -> Job {
        let now = super::now_ms();
        Job {
            name,
            export,
            ranges,
            source,
            target,
            create_time: now / 1000,
            progress: Mutex::new(Progress {
                step: if export { Step::Connecting } else { Step::WaitingForAck },
                message: String::new(),
                last_update: now / 1000,
                last_ack: now / 1000,
                heard_ms: now,
                acked_ms: 0,
            }),
            stream: Mutex::new(None),
            cancel: AtomicBool::new(false),
            link: AtomicI64::new(0),
            peer,
            started: AtomicBool::new(false),
            announced: AtomicBool::new(false),
        }
    }

    pub fn step(&self) -> Step {
        self.progress.lock().step
    }

    /// Moves to `step` (a finished job stays finished).
    pub fn set(&self, step: Step) -> bool {
        let mut p = self.progress.lock();
        if p.step.finished() {
            return false;
        }
        p.step = step;
        p.last_update = super::now_ms() / 1000;
        true
    }

    /// Ends the job as failed with `why` (logged), unless it has ended already.
    pub fn fail(&self, why: &str) -> bool {
        let mut p = self.progress.lock();
        if p.step.finished() {
            return false;
        }
        p.step = Step::Failed;
        p.message = why.to_string();
        p.last_update = super::now_ms() / 1000;
        drop(p);
        crate::log_warning!("Slot migration {} failed: {why}", self.name);
        true
    }

    pub fn contains(&self, slot: usize) -> bool {
        self.ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }

    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.ranges.iter().flat_map(|&(a, b)| a..=b)
    }

    /// `slot_ranges` as GETSLOTMIGRATIONS shows them: `a-b` pairs, space separated.
    pub fn ranges_text(&self) -> String {
        self.ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(" ")
    }

    /// Bytes copied and not yet sent (`remaining_repl_size`).
    pub fn pending(&self) -> usize {
        self.stream.lock().as_ref().map_or(0, |c| c.buf.len())
    }
}

/// The jobs, newest last; finished ones kept up to Valkey's default log length.
pub struct Migrations {
    jobs: Mutex<VecDeque<Arc<Job>>, { rank::SLOT_MIGRATIONS }>,
    /// Some export is copying writes: the call path's one load.
    exporting: AtomicBool,
    /// Slots being imported (here, or by this replica's primary): their keys are not shown by
    /// KEYS, SCAN, DBSIZE and RANDOMKEY until the import succeeds, as in Valkey — a client
    /// must not see half of a slot. `importing`: any is.
    hidden: Vec<AtomicBool>,
    importing: AtomicBool,
}

impl Default for Migrations {
    fn default() -> Migrations {
        Migrations {
            jobs: Mutex::new(VecDeque::new()),
            exporting: AtomicBool::new(false),
            hidden: (0..super::wire::SLOTS).map(|_| AtomicBool::new(false)).collect(),
            importing: AtomicBool::new(false),
        }
    }
}

/// `cluster-slot-migration-log-max-len`'s default: finished jobs kept for GETSLOTMIGRATIONS.
const LOG_MAX: usize = 1000;

impl Migrations {
    pub fn add(&self, job: Arc<Job>) {
        let mut j = self.jobs.lock();
        j.push_back(job);
        while j.iter().filter(|x| x.step().finished()).count() > LOG_MAX {
            let Some(i) = j.iter().position(|x| x.step().finished()) else { break };
            j.remove(i);
        }
    }

    /// Newest first.
    pub fn all(&self) -> Vec<Arc<Job>> {
        self.jobs.lock().iter().rev().cloned().collect()
    }

    pub fn running(&self, export: bool) -> Vec<Arc<Job>> {
        self.jobs.lock().iter().filter(|j| j.export == export && !j.step().finished()).cloned().collect()
    }

    pub fn find(&self, name: &str) -> Option<Arc<Job>> {
        self.jobs.lock().iter().rev().find(|j| j.name == name).cloned()
    }

    /// An unfinished job moving `slot` in that direction.
    pub fn moving(&self, slot: usize, export: bool) -> Option<Arc<Job>> {
        self.jobs.lock().iter().find(|j| j.export == export && !j.step().finished() && j.contains(slot)).cloned()
    }

    /// Whether some import hides its slots' keys now (one load).
    #[inline]
    pub fn importing(&self) -> bool {
        self.importing.load(Ordering::Relaxed)
    }

    /// Whether `slot`'s keys are hidden (an import of it is under way).
    #[inline]
    pub fn hidden(&self, slot: usize) -> bool {
        self.importing() && self.hidden.get(slot).is_some_and(|h| h.load(Ordering::Relaxed))
    }

    /// The hidden slots, after an import began or ended.
    pub fn refresh_importing(&self) {
        let jobs: Vec<Arc<Job>> =
            self.jobs.lock().iter().filter(|j| !j.export && !j.step().finished()).cloned().collect();
        let mut want = vec![false; self.hidden.len()];
        for s in jobs.iter().flat_map(|j| j.slots()) {
            want[s] = true;
        }
        for (h, w) in self.hidden.iter().zip(&want) {
            h.store(*w, Ordering::Relaxed);
        }
        self.importing.store(!jobs.is_empty(), Ordering::Release);
    }

    /// FLUSHALL or FLUSHDB ran: every migration under way fails, as in Valkey (the slots'
    /// data is not what the snapshot or the target holds any more). Returns the client ids
    /// of the import links to close.
    pub fn flushed(&self) -> Vec<u64> {
        let mut links = Vec::new();
        for j in self.jobs.lock().iter().filter(|j| j.step() != Step::OccurringOnPrimary) {
            if j.fail("Data was flushed") && !j.export {
                links.push(j.link.load(Ordering::Relaxed).max(0) as u64);
            }
        }
        self.refresh_importing();
        links
    }

    #[inline]
    pub fn exporting(&self) -> bool {
        self.exporting.load(Ordering::Relaxed)
    }

    /// Whether some export may copy writes: from MIGRATESLOTS until the job ends, so every
    /// write that can reach a snapshot's instant after it sees the flag (copies begin at the
    /// instant, see `Job::stream`).
    pub fn refresh_exporting(&self) {
        let on = self.jobs.lock().iter().any(|j| j.export && !j.step().finished());
        self.exporting.store(on, Ordering::Release);
    }

    /// A write's effects, copied to the exports whose slots they touch (under the effect lock,
    /// so in the order of the writes). `slot_of`: the slot of an effect's keys, None for a
    /// command without keys (MULTI, EXEC, FLUSHALL …: not sent, as Valkey sends none).
    pub fn capture(&self, effects: &[crate::services::effects::Effect], slot_of: impl Fn(&[Vec<u8>]) -> Option<usize>) {
        let jobs: Vec<Arc<Job>> =
            self.jobs.lock().iter().filter(|j| j.export && !j.step().finished()).cloned().collect();
        for e in effects {
            let Some(slot) = slot_of(&e.argv) else { continue };
            for j in jobs.iter().filter(|j| j.contains(slot)) {
                let mut s = j.stream.lock();
                let Some(c) = s.as_mut() else { continue };
                if c.db != Some(e.db) {
                    crate::persist::aof::encode(&mut c.buf, &[b"SELECT".to_vec(), e.db.to_string().into_bytes()]);
                    c.db = Some(e.db);
                }
                crate::persist::aof::encode(&mut c.buf, &e.argv);
            }
        }
    }
}

impl Job {
    /// `CLUSTER SYNCSLOTS ESTABLISH …` as an import's target passes it to its replicas.
    pub fn establish_argv(&self) -> Vec<Vec<u8>> {
        let mut argv: Vec<Vec<u8>> =
            ["CLUSTER", "SYNCSLOTS", "ESTABLISH", "SOURCE", &self.source, "NAME", &self.name, "SLOTSRANGE"]
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect();
        for &(a, b) in &self.ranges {
            argv.push(a.to_string().into_bytes());
            argv.push(b.to_string().into_bytes());
        }
        argv
    }

    /// `CLUSTER SYNCSLOTS FINISH STATE SUCCESS|FAILED NAME n MESSAGE m`, Valkey's words.
    pub fn finish_argv(&self) -> Vec<Vec<u8>> {
        let p = self.progress.lock();
        let state = if p.step == Step::Success { "SUCCESS" } else { "FAILED" };
        ["CLUSTER", "SYNCSLOTS", "FINISH", "STATE", state, "NAME", &self.name, "MESSAGE", &p.message]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect()
    }
}

/// A job name: 40 random hex characters.
pub fn new_name() -> String {
    use rand::Rng;
    let mut r = rand::thread_rng();
    (0..40).map(|_| char::from_digit(r.gen_range(0..16), 16).unwrap()).collect()
}

impl super::Cluster {
    /// An import ended without its slots (failed, or its link closed first): the keys it
    /// brought to slots this node does not serve are deleted, as Valkey's
    /// `delKeysNotOwnedByMyself`.
    pub fn import_failed(&self, job: &Job) {
        self.migrations.refresh_importing();
        self.with(|st| {
            let me = st.myself;
            let lost: Vec<usize> = job.slots().filter(|&s| st.slots[s] != Some(me)).collect();
            if !lost.is_empty() {
                st.actions.push(super::gossip::Action::DeleteSlots(lost));
            }
        });
    }

    /// An import's link closed: the job fails unless it is over (the target closes the link
    /// itself once it has the slots).
    pub fn import_closed(&self, job: &Job) {
        job.link.store(0, Ordering::Relaxed);
        job.fail("Connection lost to source. Check CLUSTER GETSLOTMIGRATIONS on the source node for more information.");
        if job.step() == Step::Failed {
            self.import_failed(job);
        }
        self.migrations.refresh_importing();
    }
}
