#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""npuprof-shmopen as npuprof-shmopen.socket starts it (systemd's own systemd-socket-activate,
--seqpacket --accept), over a shm directory of this test's own (--shm-dir).

    tests/test-opener.py BUILD_DIR

Asked as the one trusted user (nobody here) it hands a read-write descriptor of a framework's
object of root's, mode 0600; it refuses every other name, a symbolic link, a hard link (a
second name of someone else's file), a FIFO, a file larger than 1 MiB and a missing one, each
with its errno; an untrusted user gets EPERM once, and the instance ends. Needs root.
"""
import errno
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import npftest  # noqa: E402
from npftest import check, wait_for  # noqa: E402

ASK = r'''
import json, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
out = []
for name in sys.argv[2:]:
    try:
        s.send(name.encode())
        msg, anc, flags, _ = s.recvmsg(4, socket.CMSG_SPACE(4))
    except (ConnectionResetError, BrokenPipeError):
        msg = b""
    if not msg:
        out.append(["closed"])
        break
    err = struct.unpack("i", msg)[0]
    fds = [struct.unpack("i", d[:4])[0] for _, _, d in anc]
    wrote = None
    if fds:
        wrote = os.pwrite(fds[0], b"npuprof", 0)
    out.append([err, len(fds), wrote])
print(json.dumps(out))
'''


def main():
    if os.geteuid() != 0 or not shutil.which("systemd-socket-activate"):
        print("test-opener: skipped: needs root and systemd-socket-activate")
        sys.exit(77)
    d = tempfile.mkdtemp(prefix="npftest-opener.")
    os.chmod(d, 0o755)
    shm = os.path.join(d, "shm")
    os.mkdir(shm)
    os.chmod(shm, 0o1777)
    sock = os.path.join(d, "opener.sock")
    hour = "2026112909"

    def make(name, size=28, mode=0o600):
        with open(os.path.join(shm, name), "wb") as f:
            f.write(b"\0" * size)
        os.chmod(os.path.join(shm, name), mode)
    make("DynamicProfileShm" + hour)
    make("DynamicProfileNpuShm" + hour, 1 << 20)
    make("DynamicProfileNpuShm2026112910", (1 << 20) + 1)
    make("secret", 64)
    os.symlink(os.path.join(shm, "secret"), os.path.join(shm, "DynamicProfileShm2026112911"))
    os.link(os.path.join(shm, "secret"), os.path.join(shm, "DynamicProfileShm2026112912"))
    os.mkfifo(os.path.join(shm, "DynamicProfileShm2026112913"), 0o666)
    log = open(os.path.join(d, "opener.log"), "w")
    opener = subprocess.Popen(["systemd-socket-activate", "--seqpacket", "--accept", "--listen", sock,
                               os.path.join(BUILD, "npuprof-shmopen"), "--user", "nobody", "--shm-dir", shm],
                              stderr=log)
    try:
        if not check("npuprof-shmopen listens (systemd-socket-activate)", wait_for(lambda: os.path.exists(sock), 5)):
            return
        os.chmod(sock, 0o666)

        def ask(user, *names):
            r = subprocess.run(["setpriv", "--reuid=%s" % user, "--regid=%s" % user, "--clear-groups",
                                "/usr/bin/python3", "-c", ASK, sock] + list(names), capture_output=True, text=True,
                               timeout=20)
            return json.loads(r.stdout) if r.returncode == 0 else r.stderr
        nobody = str(pwd.getpwnam("nobody").pw_uid)
        got = ask(nobody, "DynamicProfileShm" + hour, "DynamicProfileNpuShm" + hour, "secret", "../etc/passwd",
                  "DynamicProfileShm2026112911", "DynamicProfileShm2026112912", "DynamicProfileShm2026112913",
                  "DynamicProfileNpuShm2026112910", "DynamicProfileShm2026112914", "DynamicProfileShm202611291")
        want = [[0, 1, 7], [0, 1, 7], [errno.EINVAL, 0, None], [errno.EINVAL, 0, None], [errno.EINVAL, 0, None],
                [errno.EMLINK, 0, None], [errno.EINVAL, 0, None], [errno.EFBIG, 0, None], [errno.ENOENT, 0, None],
                [errno.EINVAL, 0, None]]
        labels = ["MindSpore's object of root (0600): a descriptor, writable",
                  "torch_npu's object of root (1 MiB): a descriptor, writable", "another name: EINVAL",
                  "a path: EINVAL", "a symbolic link of a framework's name: EINVAL",
                  "a hard link of a framework's name to another file: EMLINK", "a FIFO: EINVAL",
                  "a file over 1 MiB: EFBIG", "a missing object: ENOENT", "nine digits: EINVAL"]
        for k, label in enumerate(labels):
            check("trusted peer: " + label, isinstance(got, list) and k < len(got) and got[k] == want[k],
                  got[k] if isinstance(got, list) and k < len(got) else got)
        with open(os.path.join(shm, "DynamicProfileShm" + hour), "rb") as f:
            check("what was written through the descriptor is in root's object", f.read(7) == b"npuprof")
        with open(os.path.join(shm, "secret"), "rb") as f:
            check("the file behind the links is untouched", f.read() == b"\0" * 64)
        got = ask("1", "DynamicProfileShm" + hour, "DynamicProfileShm" + hour)
        check("untrusted peer (uid 1): EPERM once, then the instance ends",
              got == [[errno.EPERM, 0, None], ["closed"]], got)
        with open(os.path.join(d, "opener.log")) as f:
            text = f.read()
        check("the opener logs what it gave and what it refused",
              "gave pid" in text and "refused pid" in text and "EMLINK" not in text and
              "may not ask" in text, text[-1200:])
    finally:
        opener.kill()
        opener.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)
    npftest.summary("opener")


if __name__ == "__main__":
    main()
