"""Job functions for the python-rq test; the worker processes import this module by name."""
import os

import redis


def add(a, b):
    return a + b


def count_and_fail_once(key, port):
    """Fails the first time it runs for `key`, succeeds on the retry."""
    r = redis.Redis(port=port)
    if r.incr(f"attempts:{key}") == 1:
        raise RuntimeError("first attempt fails")
    return os.getpid()
