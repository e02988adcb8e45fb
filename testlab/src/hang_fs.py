#!/usr/bin/env python3
"""A read-only FUSE file system whose requests can be made to hang.

It serves the regular files of BACKING (flat, no subdirectories) at
MOUNTPOINT, speaking the kernel's FUSE protocol on /dev/fuse directly
(no libfuse, no Python package) and mounting with mount(8), so root
needs nothing but python3 and util-linux. Nothing is cached by the
kernel (entries, attributes and pages all expire at once, reads are
direct): every stat, open and read reaches this process.

Commands, one a line on stdin, each answered with one line on stdout:
  hang    from now on, requests are held unanswered (as a dead NFS
          server or a stuck FUSE daemon would)      -> "ok"
  serve   held requests are answered, and every later one -> "ok"
  held    how many requests are held now            -> "N"
  stop    (or end of input) held requests fail with EIO, the file
          system is unmounted (lazily) and the process exits
Once mounted it prints "mounted".
"""

import errno
import os
import stat
import struct
import subprocess
import sys
import threading
import time

IN_HEADER = struct.Struct("<IIQQIIIHH")  # fuse_in_header, 40 bytes
OUT_HEADER = struct.Struct("<IiQ")  # fuse_out_header, 16 bytes
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # fuse_attr, 88 bytes

LOOKUP, FORGET, GETATTR = 1, 2, 3
OPEN, READ, RELEASE, FLUSH, INIT = 14, 15, 18, 25, 26
OPENDIR, RELEASEDIR, INTERRUPT, DESTROY, BATCH_FORGET = 27, 29, 36, 38, 42
NO_REPLY = {FORGET, BATCH_FORGET, INTERRUPT}
FOPEN_DIRECT_IO = 1
ROOT = 1


class HangFs:
    def __init__(self, backing, fd):
        self.backing = backing
        self.fd = fd
        self.lock = threading.Lock()
        self.hanging = False
        self.held = []
        self.inodes = {}  # name -> inode
        self.names = {}  # inode -> name

    def reply(self, unique, error=0, payload=b""):
        try:
            os.write(self.fd, OUT_HEADER.pack(16 + len(payload), -error, unique) + payload)
        except OSError:
            pass  # the request was interrupted or the connection is gone

    def attr(self, ino):
        if ino == ROOT:
            return ATTR.pack(ROOT, 0, 0, 0, 0, 0, 0, 0, 0, stat.S_IFDIR | 0o755, 2, 0, 0, 0, 4096, 0)
        st = os.stat(os.path.join(self.backing, self.names[ino]))
        mtime = int(st.st_mtime)
        nsec = st.st_mtime_ns % 1_000_000_000
        return ATTR.pack(
            ino, st.st_size, (st.st_size + 511) // 512, mtime, mtime, mtime,
            nsec, nsec, nsec, stat.S_IFREG | 0o600, 1, 0, 0, 0, 4096, 0,
        )

    def handle(self, request):
        (_, opcode, unique, node, _, _, _, _, _) = IN_HEADER.unpack_from(request)
        body = request[IN_HEADER.size:]
        if opcode in NO_REPLY:
            return
        try:
            if opcode == INIT:
                major, minor, readahead, _flags = struct.unpack_from("<IIII", body)
                out = struct.pack("<IIIIHHIIHHII24x", 7, min(minor, 31), readahead, 0,
                                  16, 12, 65536, 1, 0, 0, 0, 0)
                self.reply(unique, 0, out)
            elif opcode == LOOKUP:
                name = body.split(b"\0", 1)[0].decode()
                path = os.path.join(self.backing, name)
                if node != ROOT or not os.path.isfile(path):
                    self.reply(unique, errno.ENOENT)
                    return
                ino = self.inodes.setdefault(name, len(self.inodes) + 2)
                self.names[ino] = name
                # Entry and attributes valid for no time at all.
                entry = struct.pack("<QQQQII", ino, 0, 0, 0, 0, 0)
                self.reply(unique, 0, entry + self.attr(ino))
            elif opcode == GETATTR:
                self.reply(unique, 0, struct.pack("<QII", 0, 0, 0) + self.attr(node))
            elif opcode == OPEN:
                self.reply(unique, 0, struct.pack("<QIi", 0, FOPEN_DIRECT_IO, 0))
            elif opcode == OPENDIR:
                self.reply(unique, 0, struct.pack("<QIi", 0, 0, 0))
            elif opcode == READ:
                _fh, offset, size = struct.unpack_from("<QQI", body)
                with open(os.path.join(self.backing, self.names[node]), "rb") as f:
                    f.seek(offset)
                    self.reply(unique, 0, f.read(size))
            elif opcode in (RELEASE, RELEASEDIR, FLUSH, DESTROY):
                self.reply(unique)
            else:
                self.reply(unique, errno.ENOSYS)
        except (OSError, KeyError, struct.error):
            self.reply(unique, errno.EIO)

    def serve(self):
        buf = 1024 * 1024 + 4096
        while True:
            try:
                request = os.read(self.fd, buf)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue
                if e.errno == errno.EPERM:
                    # Not mounted yet: the device has no connection.
                    time.sleep(0.01)
                    continue
                return  # ENODEV: unmounted or aborted
            opcode = IN_HEADER.unpack_from(request)[1]
            with self.lock:
                if self.hanging and opcode not in (INIT, INTERRUPT, FORGET, BATCH_FORGET):
                    self.held.append(request)
                    continue
            self.handle(request)


def main():
    backing, mountpoint = sys.argv[1], sys.argv[2]
    fd = os.open("/dev/fuse", os.O_RDWR)
    fs = HangFs(backing, fd)
    threading.Thread(target=fs.serve, daemon=True).start()
    subprocess.run(
        ["mount", "-t", "fuse.holdfast-hang", "-o",
         f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other,nosuid,nodev",
         "holdfast-hang", mountpoint],
        pass_fds=(fd,), check=True,
    )
    print("mounted", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "hang":
            with fs.lock:
                fs.hanging = True
            print("ok", flush=True)
        elif command == "serve":
            with fs.lock:
                fs.hanging = False
                held, fs.held = fs.held, []
            for request in held:
                fs.handle(request)
            print("ok", flush=True)
        elif command == "held":
            with fs.lock:
                print(len(fs.held), flush=True)
        elif command == "stop":
            break
    with fs.lock:
        held, fs.held = fs.held, []
        fs.hanging = False
    for request in held:
        fs.reply(IN_HEADER.unpack_from(request)[2], errno.EIO)
    subprocess.run(["umount", "-l", mountpoint], check=False)
    # Exiting closes /dev/fuse: the kernel aborts whatever is left.
    os._exit(0)


if __name__ == "__main__":
    main()
