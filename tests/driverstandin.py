"""Stand-ins for NVIDIA's driver, built in the test from tests/assets/driver (nothing is
downloaded): the DKMS module source at a version, Debian packages made with the real
``dpkg-deb``, NVIDIA's ``.run`` installer (tests/assets/driver/standin-run.sh with the
module source as its payload), and a host root whose kernels' ``build`` links lead to a
copy of this machine's real Debian headers, so real dkms builds there.

The package names and files follow Debian's nvidia-graphics-drivers (nvidia-kernel-dkms,
libcuda1, libnvidia-ml1, nvidia-smi; libraries under /usr/lib/x86_64-linux-gnu named
``lib*.so.<version>``) with the DKMS name ``nvidia`` that NVIDIA's repository and ``.run``
register; the ``.run``'s header fields are makeself's as NVIDIA's installer carries them.
"""

import base64
import glob
import io
import os
import shutil
import subprocess
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = os.path.join(HERE, "assets", "driver")
DOUBLES = os.path.join(HERE, "doubles")
OLD, NEW = "580.95.05", "590.48.01"
REVISION = "-1"
LIB = "usr/lib/x86_64-linux-gnu"
HOST_PACKAGES = ("nvidia-kernel-dkms", "libcuda1", "libnvidia-ml1", "nvidia-smi")
CT_PACKAGES = ("libcuda1", "libnvidia-ml1", "nvidia-smi")


# What Debian's DKMS packages run before their files go (dh_dkms's prerm): the module's
# builds removed from dkms, so an upgrade leaves no dangling source link. dpkg runs it
# outside a chroot (--force-script-chrootless); the test root's dkms only, never /'s.
# The VM lab's packages (lab/driver-repo.py) name the guest's own dkms instead.
PRERM = """#!/bin/sh
set -e
case "$1" in
    remove|upgrade|deconfigure)
        d="%(dkms)s"
        "$d" remove -m nvidia -v %(version)s --all >/dev/null 2>&1 || true ;;
esac
"""
PRERM_TEST_DKMS = ("${GPUHOST_RUN_DKMS:?stand-in package: GPUHOST_RUN_DKMS must name the "
                   "test root's dkms}")


def headers_kernel():
    """The newest kernel of this machine with real headers installed, or None."""
    # imported here: lab/driver-repo.py uses this file without the collection installed
    from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import (
        kernels as kernel_mod,
    )
    found = [os.path.basename(os.path.dirname(p)) for p in glob.glob("/lib/modules/*/build")
             if kernel_mod.has_headers("/", os.path.basename(os.path.dirname(p)))]
    return sorted(found, key=kernel_mod.kernel_sort_key)[-1] if found else None


def module_source(dest, version):
    """The stand-in DKMS source for ``version`` in ``dest``."""
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(os.path.join(ASSETS, "nvidia-dkms")):
        with open(os.path.join(ASSETS, "nvidia-dkms", name)) as handle:
            text = handle.read().replace("@VERSION@", version)
        with open(os.path.join(dest, name), "w") as handle:
            handle.write(text)
    return dest


def build_deb(out_dir, package, version, files, depends=None, links=None, scripts=None):
    """A .deb made by the real dpkg-deb: ``files`` {path: text}, ``links`` {path:
    target}, ``scripts`` {prerm: text}. Returns its path."""
    work = os.path.join(out_dir, ".build-%s-%s" % (package, version))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "DEBIAN"))
    for path, text in files.items():
        full = os.path.join(work, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as handle:
            handle.write(text)
    for path, target in (links or {}).items():
        full = os.path.join(work, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)
    for name, text in (scripts or {}).items():
        with open(os.path.join(work, "DEBIAN", name), "w") as handle:
            handle.write(text)
        os.chmod(os.path.join(work, "DEBIAN", name), 0o755)
    control = ["Package: %s" % package, "Version: %s" % version, "Architecture: amd64",
               "Maintainer: gpuhost.tuning tests <tests@localhost>",
               "Installed-Size: %d" % max(1, sum(len(t) for t in files.values()) // 1024),
               "Section: non-free/libs", "Priority: optional"]
    if depends:
        control.append("Depends: %s" % depends)
    control.append("Description: gpuhost.tuning stand-in for %s\n test package" % package)
    with open(os.path.join(work, "DEBIAN", "control"), "w") as handle:
        handle.write("\n".join(control) + "\n")
    path = os.path.join(out_dir, "%s_%s_amd64.deb" % (package, version))
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", work, path],
                   check=True, capture_output=True)
    shutil.rmtree(work)
    return path


def build_repo(repo, version, revision=REVISION, prerm_dkms=PRERM_TEST_DKMS):
    """The driver's packages at ``version`` into folder ``repo``; returns {package: deb}.
    ``prerm_dkms``: the dkms nvidia-kernel-dkms's prerm calls (the test root's by default;
    the VM lab's guest passes its real ``dkms``)."""
    os.makedirs(repo, exist_ok=True)
    debver = version + revision
    src = {}
    tmp = os.path.join(repo, ".src-%s" % version)
    module_source(tmp, version)
    for name in os.listdir(tmp):
        with open(os.path.join(tmp, name)) as handle:
            src["/usr/src/nvidia-%s/%s" % (version, name)] = handle.read()
    shutil.rmtree(tmp)
    smi = "#!/bin/sh\necho 'stand-in nvidia-smi %s'\n" % version
    out = {
        "nvidia-kernel-dkms": build_deb(repo, "nvidia-kernel-dkms", debver, src,
                                        scripts={"prerm": PRERM % {
                                            "dkms": prerm_dkms, "version": version}}),
        "libcuda1": build_deb(repo, "libcuda1", debver, {
            "/%s/libcuda.so.%s" % (LIB, version): "stand-in libcuda %s\n" % version},
            links={"/%s/libcuda.so.1" % LIB: "libcuda.so.%s" % version}),
        "libnvidia-ml1": build_deb(repo, "libnvidia-ml1", debver, {
            "/%s/libnvidia-ml.so.%s" % (LIB, version): "stand-in NVML %s\n" % version},
            links={"/%s/libnvidia-ml.so.1" % LIB: "libnvidia-ml.so.%s" % version}),
        "nvidia-smi": build_deb(repo, "nvidia-smi", debver, {"/usr/bin/nvidia-smi": smi},
                                depends="libnvidia-ml1 (= %s)" % debver),
    }
    return out


def build_run(path, version):
    """The stand-in ``NVIDIA-Linux-x86_64-<version>.run``: the header script with the
    module source as a tar.gz payload after its marker line."""
    with open(os.path.join(ASSETS, "standin-run.sh")) as handle:
        head = handle.read().replace("@VERSION@", version)
    buf = io.BytesIO()
    src = module_source(path + ".src", version)
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in sorted(os.listdir(src)):
            tar.add(os.path.join(src, name), arcname=name)
    shutil.rmtree(src)
    with open(path, "w") as handle:
        handle.write(head)
        handle.write(base64.encodebytes(buf.getvalue()).decode())
    os.chmod(path, 0o755)
    return path


def dpkg_root(root):
    """An empty dpkg database under ``root``."""
    for sub in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/cache/apt/archives"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    status = os.path.join(root, "var/lib/dpkg/status")
    if not os.path.exists(status):
        open(status, "w").close()


def dpkg_install(root, debs):
    """The real dpkg installing ``debs`` into ``root`` (no maintainer scripts run)."""
    dpkg_root(root)
    subprocess.run(["dpkg", "--root=%s" % root, "--force-not-root", "--force-depends",
                    "--force-script-chrootless", "-i"] + list(debs), check=True,
                   capture_output=True)


def copy_headers(dest_root, release):
    """This machine's real headers for ``release`` copied to ``dest_root`` with the kbuild
    tree their ``scripts``/``tools`` links lead to (Debian: ../../lib/linux-kbuild-6.1);
    Debian's headers Makefile includes the -common tree by its absolute path, which the
    build only reads. Returns the headers' path inside the root."""
    real = os.path.realpath("/lib/modules/%s/build" % release)
    shutil.copytree(real, os.path.join(dest_root, real.lstrip("/")), symlinks=True)
    for name in ("scripts", "tools"):
        link = os.path.join(real, name)
        if os.path.islink(link):
            target = os.path.dirname(os.path.realpath(link))
            dest = os.path.join(dest_root, target.lstrip("/"))
            if not os.path.exists(dest):
                shutil.copytree(target, dest, symlinks=True)
    return real


def host_root(root, kernels, headers_from, headers_tree):
    """A host root: ``/lib/modules/<k>/build`` -> the copied headers for each kernel in
    ``kernels`` (``headers_from``: kernels given no link are left without headers), an
    empty dkms tree and dpkg database."""
    for release in kernels:
        os.makedirs(os.path.join(root, "lib/modules", release, "kernel"), exist_ok=True)
        if release in headers_from:
            os.symlink(headers_tree, os.path.join(root, "lib/modules", release, "build"))
    os.makedirs(os.path.join(root, "var/lib/dkms"), exist_ok=True)
    os.makedirs(os.path.join(root, "usr/src"), exist_ok=True)
    dpkg_root(root)
    return root
