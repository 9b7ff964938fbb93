"""forgetfs: a FUSE file system that forgets, at a power cut, everything fsync did not make
durable — the test layer for "acknowledged writes survive power loss" (in the spirit of
LazyFS). `kill -9` of a server keeps the kernel's page cache, so a server that replied before
its fsync would pass a kill test; on this layer it loses the write.

The model is LazyFS's: a file's bytes become durable only at `fsync`/`fdatasync` of that
file (all of them at once, as a disk without a battery-backed cache gives no more); names
(create, rename, unlink, mkdir) are durable at once, as a journaling file system commits them
with the next fsync of anything. So a "rename before fsync" leaves the new name on an empty or
old file after the cut — the bug a save must not have. Names made durable only by a directory
fsync (`--strict-names`) are stricter than ext4 and than what Redis 7.2 itself relies on (it
does not fsync the directory it creates for its AOF); that mode is for looking, not for CI.

The durable state lives in a backing directory: `ino/<n>` holds inode n's bytes as last
fsync'd, `names.json` the durable names (path -> inode, and the directories). Everything
else is in this process's memory. A power cut is `kill -9` of this process (and a lazy
unmount): a new one mounted on the same backing directory sees only what was durable.

Usage: python3 forgetfs.py [--strict-names] BACKING MOUNTPOINT
(foreground; needs fusepy and libfuse2)
"""
import errno
import json
import os
import stat
import sys
import threading
import time

from fuse import FUSE, FuseOSError, Operations


class Forget(Operations):
    def __init__(self, backing, strict_names=False):
        self.backing = backing
        self.strict_names = strict_names
        os.makedirs(os.path.join(backing, "ino"), exist_ok=True)
        self.lock = threading.RLock()
        names = os.path.join(backing, "names.json")
        if os.path.exists(names):
            with open(names) as f:
                d = json.load(f)
        else:
            d = {"files": {}, "dirs": ["/"], "next": 1}
        # Durable view (what names.json says) and the live one (what programs see now).
        self.d_files = dict(d["files"])
        self.d_dirs = set(d["dirs"])
        self.files = dict(self.d_files)
        self.dirs = set(self.d_dirs)
        self.next = d["next"]
        # Live bytes of each inode (loaded lazily from ino/<n>), and from where they differ
        # from the durable copy (so an fsync writes only what changed: an append-only log's
        # tail, not the whole file again).
        self.data = {}
        self.dirty_from = {}
        self.now = time.time()

    # --- durable state -------------------------------------------------------------------

    def _ino_path(self, ino):
        return os.path.join(self.backing, "ino", str(ino))

    def _bytes(self, ino):
        if ino not in self.data:
            p = self._ino_path(ino)
            with open(p, "rb") if os.path.exists(p) else open(os.devnull, "rb") as f:
                self.data[ino] = bytearray(f.read())
        return self.data[ino]

    def _save_names(self):
        tmp = os.path.join(self.backing, "names.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"files": self.d_files, "dirs": sorted(self.d_dirs), "next": self.next}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.backing, "names.json"))

    def _dirty(self, ino, offset):
        self.dirty_from[ino] = min(self.dirty_from.get(ino, offset), offset)

    def _persist_ino(self, ino):
        if ino not in self.dirty_from:
            return
        start = self.dirty_from.pop(ino)
        b = self._bytes(ino)
        p = self._ino_path(ino)
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, bytes(b[start:]), start)
            os.ftruncate(fd, len(b))
            os.fsync(fd)
        finally:
            os.close(fd)

    # --- metadata -------------------------------------------------------------------------

    def getattr(self, path, fh=None):
        with self.lock:
            if path in self.dirs:
                return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2, st_size=4096,
                            st_ctime=self.now, st_mtime=self.now, st_atime=self.now)
            ino = self.files.get(path)
            if ino is None:
                raise FuseOSError(errno.ENOENT)
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=len(self._bytes(ino)),
                        st_ino=ino, st_ctime=self.now, st_mtime=self.now, st_atime=self.now)

    def readdir(self, path, fh):
        with self.lock:
            if path not in self.dirs:
                raise FuseOSError(errno.ENOENT)
            prefix = path.rstrip("/") + "/"
            kids = {p[len(prefix):] for p in list(self.files) + list(self.dirs)
                    if p.startswith(prefix) and p != path and "/" not in p[len(prefix):]}
            return [".", ".."] + sorted(kids)

    def _names_changed(self):
        """Names are durable at once unless `--strict-names`."""
        if not self.strict_names:
            self.d_files = dict(self.files)
            self.d_dirs = set(self.dirs)
            self._save_names()

    def _parent(self, path):
        return os.path.dirname(path) or "/"

    def mkdir(self, path, mode):
        with self.lock:
            if path in self.dirs or path in self.files:
                raise FuseOSError(errno.EEXIST)
            if self._parent(path) not in self.dirs:
                raise FuseOSError(errno.ENOENT)
            self.dirs.add(path)
            self._names_changed()

    def rmdir(self, path):
        with self.lock:
            prefix = path + "/"
            if any(p.startswith(prefix) for p in list(self.files) + list(self.dirs)):
                raise FuseOSError(errno.ENOTEMPTY)
            self.dirs.discard(path)
            self._names_changed()

    def create(self, path, mode, fi=None):
        with self.lock:
            if self._parent(path) not in self.dirs:
                raise FuseOSError(errno.ENOENT)
            ino = self.files.get(path)
            if ino is None:
                ino = self.next
                self.next += 1
                self.files[path] = ino
                self.data[ino] = bytearray()
                self._dirty(ino, 0)
                self._names_changed()
            return ino

    def open(self, path, flags):
        with self.lock:
            ino = self.files.get(path)
            if ino is None:
                raise FuseOSError(errno.ENOENT)
            if flags & os.O_TRUNC:
                self._bytes(ino)[:] = b""
                self._dirty(ino, 0)
            return ino

    def unlink(self, path):
        with self.lock:
            if self.files.pop(path, None) is None:
                raise FuseOSError(errno.ENOENT)
            self._names_changed()

    def rename(self, old, new):
        with self.lock:
            if old in self.files:
                if new in self.dirs:
                    raise FuseOSError(errno.EISDIR)
                self.files[new] = self.files.pop(old)
            elif old in self.dirs:
                prefix = old + "/"
                self.dirs = {new + d[len(old):] if d == old or d.startswith(prefix) else d for d in self.dirs}
                self.files = {(new + p[len(old):] if p.startswith(prefix) else p): i for p, i in self.files.items()}
            else:
                raise FuseOSError(errno.ENOENT)
            self._names_changed()

    def truncate(self, path, length, fh=None):
        with self.lock:
            ino = fh if fh is not None else self.files.get(path)
            if ino is None:
                raise FuseOSError(errno.ENOENT)
            b = self._bytes(ino)
            self._dirty(ino, min(length, len(b)))
            if length < len(b):
                del b[length:]
            else:
                b.extend(b"\0" * (length - len(b)))

    def chmod(self, path, mode):
        return 0

    def chown(self, path, uid, gid):
        return 0

    def utimens(self, path, times=None):
        return 0

    def statfs(self, path):
        return dict(f_bsize=4096, f_frsize=4096, f_blocks=1 << 22, f_bfree=1 << 21, f_bavail=1 << 21,
                    f_files=1 << 20, f_ffree=1 << 19, f_namemax=255)

    # --- data -----------------------------------------------------------------------------

    def read(self, path, size, offset, fh):
        with self.lock:
            return bytes(self._bytes(fh)[offset:offset + size])

    def write(self, path, data, offset, fh):
        with self.lock:
            b = self._bytes(fh)
            self._dirty(fh, min(offset, len(b)))
            if offset > len(b):
                b.extend(b"\0" * (offset - len(b)))
            b[offset:offset + len(data)] = data
            return len(data)

    def fallocate(self, path, mode, offset, length, fh):
        with self.lock:
            b = self._bytes(fh)
            if mode == 0 and offset + length > len(b):
                self._dirty(fh, len(b))
                b.extend(b"\0" * (offset + length - len(b)))
            return 0

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        return 0

    # --- durability -----------------------------------------------------------------------

    def fsync(self, path, datasync, fh):
        with self.lock:
            self._persist_ino(fh)
            return 0

    def fsyncdir(self, path, datasync, fh):
        """The names directly in `path` become durable as they are now."""
        with self.lock:
            prefix = path.rstrip("/") + "/"

            def child(p):
                return p.startswith(prefix) and "/" not in p[len(prefix):] and p != path

            self.d_files = {p: i for p, i in self.d_files.items() if not child(p)}
            self.d_files.update({p: i for p, i in self.files.items() if child(p)})
            self.d_dirs = {d for d in self.d_dirs if not child(d)} | {d for d in self.dirs if child(d)}
            self._save_names()
            return 0

    def opendir(self, path):
        with self.lock:
            if path not in self.dirs:
                raise FuseOSError(errno.ENOENT)
            return 0


if __name__ == "__main__":
    strict = "--strict-names" in sys.argv
    backing, mountpoint = [a for a in sys.argv[1:] if not a.startswith("--")]
    FUSE(Forget(backing, strict), mountpoint, foreground=True, nothreads=False, allow_other=True,
         default_permissions=False, direct_io=True)
