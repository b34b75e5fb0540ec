"""The VM lab's stand-in NVIDIA driver packages (`make lab-driver`): the packages of
tests/driverstandin.py at 580.95.05 and 590.48.01, made by the real dpkg-deb, with an apt
index by the real dpkg-scanpackages, into the folder given. The guest's apt reads it as
``deb [trusted=yes] file:<folder> ./``; the containers' apt (the pct double's apt-get)
reads the same .debs. nvidia-kernel-dkms's prerm calls the guest's own dkms, as Debian's
dh_dkms prerm does.

Usage: python3 lab/driver-repo.py OUT_DIR   (needs dpkg-deb and dpkg-scanpackages, dpkg-dev)
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from driverstandin import NEW, OLD, build_repo  # noqa: E402


def main(out):
    os.makedirs(out, exist_ok=True)
    for version in (OLD, NEW):
        build_repo(out, version, prerm_dkms="dkms")
    index = subprocess.run(["dpkg-scanpackages", "-m", "."], cwd=out, check=True,
                           capture_output=True, text=True, timeout=120).stdout
    with open(os.path.join(out, "Packages.tmp"), "w") as handle:
        handle.write(index)
    os.rename(os.path.join(out, "Packages.tmp"), os.path.join(out, "Packages"))
    print(out)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
