"""What the hostfs mirror tests share: a small host tree with a file outside it (to show a
link out of the root is never followed out), and a 10 s alarm so a read or write that
blocks (a FIFO opened without O_NONBLOCK) fails its case instead of hanging the run."""

import signal

import pytest


@pytest.fixture
def never_hang():
    def boom(_sig, _frame):
        raise AssertionError("blocked: the call did not return in 10 s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def host_tree(tmp_path):
    """``(root, outside)``: ``<tmp>/host`` with proc/cmdline and etc/, and ``<tmp>/outside``
    holding ``secret`` ("outside text")."""
    root = tmp_path / "host"
    (root / "proc").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz root=ZFS=rpool\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("outside text\n")
    return str(root), str(outside)
