// ioredis's Cluster client against a cluster of Atoll nodes: three masters, each with a
// replica, made by Redis 7.2.6's `redis-cli --cluster create`. The client learns the slot map
// itself (CLUSTER SLOTS), writes across every slot, reads from replicas with scaleReads
// (READONLY), and keeps writing through a failover (kill -9 of a master) once it refreshes
// its map; no counter confirmed by WAIT 1 is lost.
const assert = require('assert');
const { spawn, execFileSync } = require('child_process');
const net = require('net');
const os = require('os');
const path = require('path');
const fs = require('fs');
const Redis = require('ioredis');

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
    try {
      if (await cond()) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function redisCli() {
  const bin = process.env.REDIS_SERVER || execFileSync(path.join(root, 'scripts', 'oracle.sh')).toString().trim();
  return path.join(path.dirname(bin), 'redis-cli');
}

const procs = [];
async function startNode() {
  const port = await freePort();
  // Two ports asked for one after the other may be the same (the first was closed before the
  // second was asked for): the node would then fail to bind its bus and never answer.
  let bus = await freePort();
  while (bus === port) bus = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'atoll-cluster-'));
  const p = spawn(binary, ['--port', String(port), '--save', '', '--dir', dir, '--loglevel', 'warning',
    '--cluster-enabled', 'yes', '--cluster-port', String(bus), '--cluster-node-timeout', '2000',
    '--repl-diskless-sync-delay', '0'], { stdio: 'ignore' });
  procs.push(p);
  await waitFor(async () => {
    const c = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try { await c.connect(); return (await c.ping()) === 'PONG'; } finally { c.disconnect(); }
  }, `node ${port}`);
  return { port, proc: p };
}

async function one(port, ...args) {
  const c = new Redis({ port, maxRetriesPerRequest: 1 });
  try { return await c.call(...args); } finally { c.disconnect(); }
}

async function main() {
  assert.ok(fs.existsSync(binary), `${binary} missing: build it first (cargo build)`);
  const nodes = [];
  for (let i = 0; i < 6; i += 1) nodes.push(await startNode());
  const out = execFileSync(redisCli(), ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`),
    '--cluster-replicas', '1', '--cluster-yes'], { timeout: 120000 }).toString();
  assert.ok(out.includes('[OK] All 16384 slots covered.'), out);
  await waitFor(async () => {
    for (const n of nodes) {
      const info = await one(n.port, 'INFO', 'replication');
      if (!info.includes('role:master') && !info.includes('master_link_status:up')) return false;
      if (!(await one(n.port, 'CLUSTER', 'INFO')).includes('cluster_state:ok')) return false;
    }
    return true;
  }, 'the cluster and its replicas');

  const cluster = new Redis.Cluster([{ host: '127.0.0.1', port: nodes[0].port }], {
    scaleReads: 'slave',
    clusterRetryStrategy: () => 100,
    redisOptions: { maxRetriesPerRequest: 5 },
  });
  // Writes across the slots; reads from the replicas once WAIT confirmed the writes.
  for (let i = 0; i < 1000; i += 1) await cluster.set(`key:${i}`, String(i));
  for (const n of nodes) {
    const role = await one(n.port, 'ROLE');
    if (role[0] === 'master') assert.strictEqual(await one(n.port, 'WAIT', '1', '5000'), 1);
  }
  let sum = 0;
  for (let i = 0; i < 1000; i += 1) sum += Number(await cluster.get(`key:${i}`));
  assert.strictEqual(sum, 999 * 1000 / 2);

  // A master dies: ioredis refreshes its map after the promotion and writes on.
  const masters = [];
  for (const n of nodes) if ((await one(n.port, 'ROLE'))[0] === 'master') masters.push(n);
  const victim = masters[0];
  const info = await Promise.all(nodes.map((n) => one(n.port, 'INFO', 'replication')));
  const replica = nodes[info.findIndex((t) => t.includes(`master_port:${victim.port}`))];
  victim.proc.kill('SIGKILL');
  const killed = Date.now();
  await waitFor(async () => (await one(replica.port, 'ROLE'))[0] === 'master'
    && (await one(replica.port, 'CLUSTER', 'INFO')).includes('cluster_state:ok'), 'the promotion', 30000);
  const promoted = (Date.now() - killed) / 1000;
  await waitFor(async () => (await cluster.set('after', 'failover')) === 'OK', 'a write after the failover', 30000);
  sum = 0;
  for (let i = 0; i < 1000; i += 1) sum += Number(await cluster.get(`key:${i}`));
  assert.strictEqual(sum, 999 * 1000 / 2, 'every confirmed write is still there');
  console.log(`ioredis Cluster: 1000 keys written and read from replicas; master killed, replica promoted in ${promoted.toFixed(1)} s, writes resumed`);
  cluster.disconnect();
}

main()
  .then(() => { for (const p of procs) p.kill('SIGKILL'); process.exit(0); })
  .catch((e) => { console.error(e); for (const p of procs) p.kill('SIGKILL'); process.exit(1); });
