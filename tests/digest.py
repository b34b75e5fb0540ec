"""A full digest of a tree: every entry's type, content hash, mode, owner and link target.

Hostile tests take one before and one after a module run and assert that nothing but the
documented paths changed (``changed(before, after)``).
"""

import hashlib
import os
import stat

# sha256 of file contents by (path, device, inode, size, mtime, ctime): any write to a file,
# or its replacement, changes its ctime (which no program can set back), so a file whose
# stat is the same still has the content hashed before. Digests stay exact and a tree is
# read once, not once per digest.
_HASHES = {}


def _content_hash(path, st):
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    found = _HASHES.get(key)
    if found is None:
        with open(path, "rb") as handle:
            found = hashlib.sha256(handle.read()).hexdigest()
        _HASHES[key] = found
    return found


def digest(root):
    """``{relative path: (type, sha256 or link target, mode, uid, gid)}`` of every entry
    under ``root`` (links not followed), the root itself as ``.``."""
    out = {}
    root = str(root)

    def entry(path):
        st = os.lstat(path)
        if os.path.islink(path):
            kind, data = "link", os.readlink(path)
        elif os.path.isdir(path):
            kind, data = "dir", None
        elif not stat.S_ISREG(st.st_mode):
            # a FIFO, socket or device a hostile case planted: its kind, never its content
            # (opening a FIFO would block the digest forever)
            kind, data = "special", stat.S_IFMT(st.st_mode)
        else:
            kind, data = "file", _content_hash(path, st)
        return (kind, data, st.st_mode & 0o7777, st.st_uid, st.st_gid)

    out["."] = entry(root)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = entry(path)
    return out


def changed(before, after):
    """Sorted relative paths added, removed or different between two digests."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
