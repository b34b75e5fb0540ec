# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpuhost.tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run one measured command for bench/run.sh and append one JSON line to OUT/measurements.jsonl.

  measure.py --out OUT --run RUN --ctl NS --n N --label L --rep R --forks F --hosts H -- CMD...

Records wall time, the controller's CPU time (the command and all its children), the hosts'
CPU time (sshd listeners' reaped children: ssh sessions, shells, module pythons), the load
average before and after (other work on the machine inflates wall time, not CPU time), and
the exit code. The command runs in the controller namespace with a fresh ssh ControlPath dir;
its control masters are closed afterwards so the next measurement starts cold too.
"""

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from fleet import host_python

TICK = os.sysconf("SC_CLK_TCK")


def sshd_pids(run, hosts):
    pids = []
    for index in range(1, hosts + 1):
        with open(os.path.join(run, "hosts", "h%03d" % index, "sshd.pid")) as handle:
            pids.append(int(handle.read().strip()))
    return pids


def reaped_cpu(pid):
    """cutime + cstime of a process: CPU of its children that it has waited for."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as handle:
            return handle.read().split()
    except OSError:
        return []


def loadavg():
    with open("/proc/loadavg") as handle:
        return float(handle.read().split()[0])


def main():
    parser = argparse.ArgumentParser()
    for name in ("out", "run", "ctl", "label"):
        parser.add_argument("--" + name, required=True)
    for name in ("n", "rep", "forks", "hosts"):
        parser.add_argument("--" + name, type=int, required=True)
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd

    ident = "n%d-%s-%d" % (args.n, args.label, args.rep)
    # Short: ssh's control socket path (dir + 10 hex + 17 temp chars) must fit in 108 bytes.
    os.makedirs(os.path.join(args.run, "cp"), exist_ok=True)
    cpdir = tempfile.mkdtemp(prefix="", dir=os.path.join(args.run, "cp"))
    env = dict(os.environ, ANSIBLE_SSH_CONTROL_PATH_DIR=cpdir,
               GPUHOST_BENCH_STATS=os.path.join(args.out, ident + ".stats.json"))
    pids = sshd_pids(args.run, args.hosts)
    pythons = [host_python(index) for index in range(1, args.hosts + 1)]
    cpu0 = [reaped_cpu(pid) for pid in pids]
    load0 = loadavg()
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)

    start = time.monotonic()
    with open(os.path.join(args.out, ident + ".log"), "w") as log:
        rc = subprocess.call(["ip", "netns", "exec", args.ctl] + cmd, stdout=log,
                             stderr=subprocess.STDOUT, env=env)
    wall = time.monotonic() - start
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load1 = loadavg()

    for sock in glob.glob(os.path.join(cpdir, "*")):
        subprocess.call(["ip", "netns", "exec", args.ctl, "ssh", "-o", "ControlPath=" + sock,
                         "-O", "exit", "bench"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 5
    while any(children(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    spent = [reaped_cpu(pid) - before for pid, before in zip(pids, cpu0, strict=True)]
    host_cpu = sum(spent)
    by_python = {}
    for python, cpu in zip(pythons, spent, strict=True):
        by_python.setdefault(python, [0, 0.0])
        by_python[python][0] += 1
        by_python[python][1] += cpu

    record = {
        "n": args.n, "label": args.label, "rep": args.rep, "forks": args.forks, "rc": rc,
        "seconds": round(wall, 3),
        "controller_cpu": round(usage1.ru_utime + usage1.ru_stime
                                - usage0.ru_utime - usage0.ru_stime, 3),
        "hosts_cpu": round(host_cpu, 3),
        # per target Python: [hosts, their CPU seconds]
        "hosts_by_python": {k: [v[0], round(v[1], 3)] for k, v in sorted(by_python.items())},
        "load_before": load0, "load_after": load1, "log": ident,
    }
    with open(os.path.join(args.out, "measurements.jsonl"), "a") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
    sys.stderr.write("%s bench: N=%d %s #%d: %.2fs wall, cpu %.2fs controller + %.2fs hosts, "
                     "load %.1f, rc=%d\n" % (time.strftime("%H:%M:%S"), args.n, args.label,
                                             args.rep, wall, record["controller_cpu"],
                                             host_cpu, load0, rc))


if __name__ == "__main__":
    main()
