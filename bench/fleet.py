# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpuhost.tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host trees and inventory for the benchmark fleet (called by bench/run.sh).

  python fleet.py trees RUN N [SRC]  seed host tree built once (tests/fixtures/hosts.py
                                   seed_host) into RUN/seed, then copied fresh to
                                   RUN/hosts/hNNN/root, 1..N (SRC: copy that tree instead)
  python fleet.py inventory RUN N  RUN/inventory-N.ini: hNNN at its namespace address, root
                                   login with the run's client key, /usr/bin/python3 (the
                                   Python 3.13 hosts: /usr/bin/python3.13), gpuhost_root
  python fleet.py py313 N          the indices (1..N) of the Python 3.13 hosts, one line

Python 3.13 hosts (BENCH_PY313): `all`, `half` (every second host: h002, h004, ...) or
`none` (the default). Their sshd runs chrooted into bench/trixie-hosts.sh's Debian 13 root.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

SUBNET = os.environ.get("BENCH_SUBNET", "10.250.0")
PY313 = os.environ.get("BENCH_PY313", "none") or "none"
PYTHONS = {"3.11": "/usr/bin/python3", "3.13": "/usr/bin/python3.13"}


def host_python(index):
    """The target Python of host i (1-based): "3.13" or "3.11" (this machine's)."""
    if PY313 not in ("all", "half", "none"):
        raise SystemExit("fleet: BENCH_PY313 is all, half or none, not %r" % PY313)
    if PY313 == "all" or (PY313 == "half" and index % 2 == 0):
        return "3.13"
    return "3.11"


def host_name(index):
    return "h%03d" % index


def host_address(index):
    """Host i (1-based) at SUBNET.(i+1); SUBNET.1 is the controller's bridge."""
    return "%s.%d" % (SUBNET, index + 1)


def trees(run, count, source=None):
    seed = source or os.path.join(run, "seed")
    if not os.path.isdir(seed):
        from fixtures.hosts import seed_host  # pylint: disable=import-outside-toplevel

        seed_host(seed)
    for index in range(1, count + 1):
        host_dir = os.path.join(run, "hosts", host_name(index))
        root = os.path.join(host_dir, "root")
        os.makedirs(host_dir, exist_ok=True)
        if os.path.lexists(root):
            subprocess.run(["rm", "-rf", root], check=True)
        subprocess.run(["cp", "-a", seed, root], check=True)


def inventory(run, count):
    ssh = os.path.join(run, "ssh")
    lines = ["[bench]"]
    for index in range(1, count + 1):
        name = host_name(index)
        line = "%s ansible_host=%s gpuhost_root=%s" % (
            name, host_address(index), os.path.join(run, "hosts", name, "root"))
        if host_python(index) != "3.11":
            line += " ansible_python_interpreter=%s" % PYTHONS[host_python(index)]
        lines.append(line)
    common = ("-F /dev/null -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes "
              "-o UserKnownHostsFile=%s" % os.path.join(ssh, "known_hosts"))
    lines += [
        "",
        "[bench:vars]",
        "ansible_user=root",
        "ansible_port=22",
        "ansible_python_interpreter=%s" % PYTHONS["3.11"],
        "ansible_ssh_private_key_file=%s" % os.path.join(ssh, "client_ed25519"),
        "ansible_ssh_common_args='%s'" % common,
        "",
    ]
    path = os.path.join(run, "inventory-%d.ini" % count)
    with open(path, "w") as handle:
        handle.write("\n".join(lines))
    print(path)


def main(argv):
    if len(argv) == 3 and argv[1] == "py313":
        print(" ".join(str(i) for i in range(1, int(argv[2]) + 1) if host_python(i) == "3.13"))
        return
    if len(argv) not in (4, 5) or argv[1] not in ("trees", "inventory"):
        sys.exit(__doc__)
    run, count = os.path.abspath(argv[2]), int(argv[3])
    if argv[1] == "trees":
        trees(run, count, os.path.abspath(argv[4]) if len(argv) == 5 else None)
    else:
        inventory(run, count)


if __name__ == "__main__":
    main(sys.argv)
