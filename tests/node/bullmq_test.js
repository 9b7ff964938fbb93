// BullMQ (every queue operation is a Lua script, many using cmsgpack) against Atoll: a
// producer adds jobs — plain, delayed, prioritised and failing once — and two worker
// processes complete them all; the queue's counts, results and events must add up.
const assert = require('assert');
const { spawn, fork } = require('child_process');
const net = require('net');
const os = require('os');
const path = require('path');
const fs = require('fs');
const { Queue, QueueEvents } = require('bullmq');

const root = path.resolve(__dirname, '..', '..');
const binary = process.env.ATOLL_BIN || path.join(root, 'target', 'debug', 'atoll-server');

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitFor(cond, what, ms = 60000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function main() {
  assert.ok(fs.existsSync(binary), `${binary} missing: build it first (cargo build)`);
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'atoll-bullmq-'));
  const server = track(spawn(binary, ['--port', String(port), '--save', '', '--dir', dir, '--threads', '2',
    '--loglevel', 'warning'], { stdio: 'inherit' }));
  const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
  const queueName = 'atoll-test';
  const queue = new Queue(queueName, { connection });
  await waitFor(async () => {
    try { await queue.client.then((c) => c.ping()); return true; } catch { return false; }
  }, 'the server');
  const events = new QueueEvents(queueName, { connection });
  await events.waitUntilReady();
  let completedEvents = 0;
  let failedEvents = 0;
  events.on('completed', () => { completedEvents += 1; });
  events.on('failed', () => { failedEvents += 1; });
  events.on('retries-exhausted', () => { failedEvents += 1; });

  const workers = [];
  for (let i = 0; i < 2; i += 1) {
    const w = track(fork(path.join(__dirname, 'bullmq_worker.js'), [String(port), queueName]));
    await new Promise((r) => w.once('message', r));
    workers.push(w);
  }

  const N = 300;
  const jobs = [];
  for (let i = 0; i < N; i += 1) {
    const opts = {};
    if (i % 10 === 0) opts.delay = 200;
    if (i % 7 === 0) opts.priority = 1 + (i % 3);
    if (i % 25 === 0) opts.attempts = 2;
    jobs.push({ name: 'double', data: { n: i, failFirst: i % 25 === 0 }, opts });
  }
  // addBulk runs the add script once per job, in a pipeline.
  const added = await queue.addBulk(jobs);
  assert.strictEqual(added.length, N);

  await waitFor(async () => (await queue.getJobCounts('completed')).completed === N, `${N} completed jobs`);
  const counts = await queue.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed', 'prioritized');
  assert.deepStrictEqual(counts, { completed: N, failed: 0, waiting: 0, active: 0, delayed: 0, prioritized: 0, paused: 0 });
  for (const j of added) {
    const job = await queue.getJob(j.id);
    assert.strictEqual(job.returnvalue.doubled, j.data.n * 2);
    assert.strictEqual(job.attemptsMade, j.data.failFirst ? 2 : 1);
  }
  const pids = new Set();
  for (const j of await queue.getJobs(['completed'], 0, N)) pids.add(j.returnvalue.pid);
  assert.strictEqual(pids.size, 2, 'both worker processes took jobs');
  await waitFor(async () => completedEvents === N, 'every completed event');
  // A job that fails once and is retried ends completed: no failure is final.
  assert.strictEqual(failedEvents, 0);

  for (const w of workers) w.send('stop');
  await Promise.all(workers.map((w) => new Promise((r) => w.once('exit', r))));
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
  console.log(`bullmq: ${N} jobs completed by ${pids.size} worker processes; ${N / 25} retried after a failure`);
}

// Whatever happens, no server or worker process outlives the test.
const children = [];
const track = (c) => { children.push(c); return c; };
main().catch((e) => {
  console.error(e);
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
});
