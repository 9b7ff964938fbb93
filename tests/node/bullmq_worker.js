// One BullMQ worker process: takes jobs from the queue until told to stop. A job whose
// data asks for it fails on its first attempt (the queue then retries it).
const { Worker } = require('bullmq');

const [port, queueName] = process.argv.slice(2);
const connection = { host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: null };
const worker = new Worker(
  queueName,
  async (job) => {
    if (job.data.failFirst && job.attemptsMade === 0) {
      throw new Error('first attempt fails');
    }
    return { doubled: job.data.n * 2, pid: process.pid };
  },
  { connection, concurrency: 4 },
);
worker.on('error', (e) => console.error('worker error', e));
process.on('message', async (m) => {
  if (m === 'stop') {
    await worker.close();
    process.exit(0);
  }
});
process.send('ready');
