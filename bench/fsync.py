#!/usr/bin/env python3
"""What a durable AOF write costs on this disk, by how the file is written (docs/BENCHMARKS.md,
issue 17, fifth session): a 1.5 KB batch of commands written, then made durable, N times,
pinned to CPU 0; wall and system CPU time per write.

Appending grows the file, so fdatasync also writes its metadata (the new size: the inode, as on
this machine's ext4, which runs without a journal; a journal commit where there is one);
overwriting space already written (what `aof-preallocate` does) flushes the data only.

Usage: python3 bench/fsync.py [--writes 2000] [--dir DIR]   (DIR: on the disk to measure)
"""
import argparse, mmap, os, tempfile, time

REC = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000001\r\n$3\r\nxxx\r\n" * 30


def run(path, name, n, flags=0, prefill=False, fallocate=None, step=None):
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC | flags)
    if prefill or fallocate is not None:
        size = len(REC) * (n + 100)
        if prefill:
            zeros = mmap.mmap(-1, 1 << 20)  # page-aligned, for O_DIRECT too
            for _ in range(size // (1 << 20) + 1):
                os.write(fd, zeros)
        else:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.fallocate(fd, fallocate, ctypes.c_long(0), ctypes.c_long(size))
        os.fsync(fd)
    off = 0
    t0, w0 = os.times(), time.perf_counter()
    for _ in range(n):
        step(fd, off)
        off += len(REC)
    t1, w1 = os.times(), time.perf_counter()
    os.close(fd)
    print(f"{name:46} wall {(w1 - w0) / n * 1e6:7.1f} µs   sys {(t1.system - t0.system) / n * 1e6:5.1f} µs")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--writes", type=int, default=2000)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    os.sched_setaffinity(0, {0})
    d = tempfile.mkdtemp(dir=a.dir, prefix="atoll-fsync-")
    path = os.path.join(d, "t.aof")
    block = mmap.mmap(-1, 4096)
    block.write(REC[:4096].ljust(4096, b" "))

    def append_sync(fd, off):
        os.pwrite(fd, REC, off)
        os.fdatasync(fd)

    def write_only(fd, off):
        os.pwrite(fd, REC, off)

    def rwf_dsync(fd, off):
        os.pwritev(fd, [REC], off, os.RWF_DSYNC)

    def direct(fd, off):
        # O_DIRECT writes whole blocks: the 4 KB block holding the tail, rewritten.
        os.pwritev(fd, [block], off // 4096 * 4096)

    n = a.writes
    run(path, "append + fdatasync", n, step=append_sync)
    run(path, "append, O_DSYNC", n, flags=os.O_DSYNC, step=write_only)
    run(path, "overwrite written space + fdatasync", n, prefill=True, step=append_sync)
    run(path, "overwrite written space, O_DSYNC", n, flags=os.O_DSYNC, prefill=True, step=write_only)
    run(path, "overwrite written space, RWF_DSYNC", n, prefill=True, step=rwf_dsync)
    run(path, "overwrite written space, O_DIRECT|O_DSYNC", n, flags=os.O_DIRECT | os.O_DSYNC, prefill=True,
        step=direct)
    run(path, "fallocate (size set) + write + fdatasync", n, fallocate=0, step=append_sync)
    run(path, "fallocate KEEP_SIZE + append + fdatasync", n, fallocate=1, step=append_sync)
    os.unlink(path)
    os.rmdir(d)


if __name__ == "__main__":
    main()
