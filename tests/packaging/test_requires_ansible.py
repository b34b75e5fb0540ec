"""``requires_ansible`` (meta/runtime.yml) admits the ansible-core releases the controller
lanes pin and test (requirements-test.txt: 2.19 on Python 3.11; requirements-controller-next.txt:
the newest, 2.22 on Python 3.13, make controller-next; requirements-controller-2.X.txt for
every line between), and no newer line than the newest tested one."""

import os
import re

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pinned(name):
    with open(os.path.join(REPO, name), encoding="utf-8") as handle:
        return Version(re.search(r"^ansible-core==(\S+)$", handle.read(), re.M).group(1))


def test_requires_ansible_is_the_tested_range():
    with open(os.path.join(REPO, "meta", "runtime.yml"), encoding="utf-8") as handle:
        spec = SpecifierSet(yaml.safe_load(handle)["requires_ansible"])
    old, new = _pinned("requirements-test.txt"), _pinned("requirements-controller-next.txt")
    assert (old.major, old.minor) == (2, 19) and new > old
    # a release candidate of the newest line counts (ansible-galaxy admits it as well)
    assert spec.contains(old, prereleases=True) and spec.contains(new, prereleases=True)
    assert Version("%d.%d.0" % (old.major, old.minor)) in spec
    assert Version("%d.%d.0" % (old.major, old.minor - 1)) not in spec   # older: untested
    assert Version("%d.%d.0" % (new.major, new.minor + 1)) not in spec   # newer line: untested


def test_every_line_between_is_pinned_and_inside():
    old, new = _pinned("requirements-test.txt"), _pinned("requirements-controller-next.txt")
    with open(os.path.join(REPO, "meta", "runtime.yml"), encoding="utf-8") as handle:
        spec = SpecifierSet(yaml.safe_load(handle)["requires_ansible"])
    for minor in range(old.minor + 1, new.minor):
        line = _pinned("requirements-controller-2.%d.txt" % minor)
        assert (line.major, line.minor) == (2, minor) and line in spec
