"""A Python job queue against Atoll: python-rq (queues, job hashes, registries, retries and
scheduled jobs are its Redis keys; its workers take jobs with blocking pops) with real worker
processes started by its own `rq worker` command."""

import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import redis
from rq import Queue, Retry
from rq.job import JobStatus

from atoll_proc import atoll, free_port

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def port():
    p = free_port()
    with atoll(p, "--threads", "2"):
        yield p


def _workers(port, n, *extra):
    env = dict(os.environ, PYTHONPATH=HERE)
    return [
        subprocess.Popen(
            [sys.executable, "-m", "rq.cli", "worker", "--burst", "--url", f"redis://127.0.0.1:{port}", *extra],
            cwd=HERE,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(n)
    ]


def test_rq_workers_run_jobs_with_retries_and_schedules(port):
    import rq_jobs

    r = redis.Redis(port=port)
    q = Queue(connection=r)
    jobs = [q.enqueue(rq_jobs.add, i, i) for i in range(40)]
    flaky = q.enqueue(rq_jobs.count_and_fail_once, "flaky", port, retry=Retry(max=2))
    later = q.enqueue_in(timedelta(seconds=1), rq_jobs.add, 100, 1)
    assert q.count == 41
    procs = _workers(port, 2, "--with-scheduler")
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()[-2000:]
    # The scheduled job is due a second after enqueueing: run the workers again if the burst
    # ended before it was moved to the queue.
    deadline = time.time() + 20
    while later.get_status(refresh=True) != JobStatus.FINISHED and time.time() < deadline:
        time.sleep(0.5)
        for p in _workers(port, 1, "--with-scheduler"):
            p.communicate(timeout=60)
    assert [j.get_status(refresh=True) for j in jobs] == [JobStatus.FINISHED] * 40
    assert [j.return_value() for j in jobs] == [2 * i for i in range(40)]
    assert flaky.get_status(refresh=True) == JobStatus.FINISHED
    assert int(r.get("attempts:flaky")) == 2
    assert later.return_value() == 101
    assert q.count == 0
    assert q.finished_job_registry.count >= 41
