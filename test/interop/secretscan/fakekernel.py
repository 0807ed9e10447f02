"""The worker's kernel for the secret-scan suite: the NVMe/TCP host side of a fake host tree
(--host-root), enough for NodeStageVolume, NodeUnstageVolume and the node's live re-keying.

  dev/nvme-fabrics  a character device: a symlink to the slave of a pseudo-terminal in raw mode
                    whose master this module holds (a device node of its number would reach
                    another devpts instance in a container).  The node writes its connect line to it and reads the
                    answer from the same descriptor, as from the kernel's /dev/nvme-fabrics
                    ("instance=<N>,cntlid=<M>"); a non-blocking read with nothing written
                    answers nothing (the node's probe of the connect options finds none).
  sys/class/nvme/nvme<N>/  made for each connect as the kernel makes it: subsysnqn, state
                    (live), address, rescan_controller, dhchap_secret and dhchap_ctrl_secret
                    (what the connect line carried, or "none"), delete_controller, and the
                    namespace nvme<N>n1 (block/nvme<N>n1: nsid, dev, uuid, nguid, size) with the
                    identity the agent derives from the NQN (agent-api.md §8.2).  A "1" written
                    to delete_controller removes the controller, as the kernel does.

Every connect line is kept in memory (self.connects: the options as a dict) for the suite to
check which key the node offered; nothing of it is written anywhere else.
"""
import os
import select
import shutil
import threading
import time
import tty


class FakeKernel:
    def __init__(self, host, identity_of, majmin, sectors):
        self.host, self.identity_of, self.majmin, self.sectors = host, identity_of, majmin, sectors
        self.sys = os.path.join(host, "sys")
        self.connects = []
        self.next_instance = 0
        self.stopping = threading.Event()
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        dev = os.path.join(host, "dev", "nvme-fabrics")
        if os.path.lexists(dev):
            os.unlink(dev)
        os.symlink(os.ttyname(self.slave), dev)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join(5)
        os.close(self.master)
        os.close(self.slave)

    def _write(self, rel, value):
        p = os.path.join(self.sys, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(value)

    def _connect(self, line):
        opts = dict(kv.split("=", 1) for kv in line.strip().split(",") if "=" in kv)
        self.connects.append(opts)
        n = self.next_instance
        self.next_instance += 1
        c = "class/nvme/nvme%d" % n
        self._write(c + "/subsysnqn", opts["nqn"] + "\n")
        self._write(c + "/state", "live\n")
        self._write(c + "/address", "traddr=%s,trsvcid=%s,src_addr=127.0.0.1\n"
                    % (opts["traddr"], opts["trsvcid"]))
        self._write(c + "/rescan_controller", "")
        self._write(c + "/delete_controller", "")
        self._write(c + "/dhchap_secret", opts.get("dhchap_secret", "none") + "\n")
        self._write(c + "/dhchap_ctrl_secret", opts.get("dhchap_ctrl_secret", "none") + "\n")
        self._write("class/nvme-subsystem/nvme-subsys%d/subsysnqn" % n, opts["nqn"] + "\n")
        ident = self.identity_of(opts["nqn"])
        dev = "nvme%dn1" % n
        self._write("%s/%s/dev" % (c, dev), self.majmin + "\n")
        for name, value in (("nsid", "1"), ("dev", self.majmin), ("uuid", ident["uuid"]),
                            ("nguid", ident["nguid"]), ("size", str(self.sectors))):
            self._write("block/%s/%s" % (dev, name), value + "\n")
        return "instance=%d,cntlid=1\n" % n

    def _deletes(self):
        base = os.path.join(self.sys, "class", "nvme")
        for name in os.listdir(base) if os.path.isdir(base) else []:
            try:
                with open(os.path.join(base, name, "delete_controller")) as f:
                    asked = f.read().strip() == "1"
            except OSError:
                continue
            if asked:
                n = name[len("nvme"):]
                shutil.rmtree(os.path.join(base, name), ignore_errors=True)
                shutil.rmtree(os.path.join(self.sys, "block", "nvme%sn1" % n), ignore_errors=True)
                shutil.rmtree(os.path.join(self.sys, "class", "nvme-subsystem", "nvme-subsys" + n),
                              ignore_errors=True)

    def _run(self):
        while not self.stopping.is_set():
            r, _, _ = select.select([self.master], [], [], 0.05)
            if r:
                data = ""
                try:  # one write of the node; a pty may hand it over in pieces
                    while r:
                        data += os.read(self.master, 4096).decode()
                        r, _, _ = select.select([self.master], [], [], 0.02)
                except OSError:
                    time.sleep(0.05)
                    continue
                if "transport=" in data or "nqn=" in data:
                    os.write(self.master, self._connect(data).encode())
            self._deletes()
