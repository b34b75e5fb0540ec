"""The collection's version is the same everywhere it is written: galaxy.yml, the changelog's
newest release (changelogs/changelog.yaml and CHANGELOG.rst), the README, the execution
environment's tarball and image tag, and the modules' version_added. `make release
VERSION=X.Y.Z` moves them together (Makefile); these tests say which one is behind."""

import glob
import os
import re

import yaml
from packaging.version import Version

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import deprecated
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A version of this collection named in prose: "gpuhost.tuning 0.2.0", "until 0.3.0", ...
MENTION = re.compile(r"\b(?:gpuhost\.tuning|before|until|in|since|from|version|release)"
                     r"\s+`?v?(0\.[0-9]+\.[0-9]+)\b")


def _read(*path):
    with open(os.path.join(REPO, *path), encoding="utf-8") as handle:
        return handle.read()


def galaxy_version():
    return Version(yaml.safe_load(_read("galaxy.yml"))["version"])


def released():
    return sorted(Version(v) for v in yaml.safe_load(_read("changelogs", "changelog.yaml"))[
        "releases"])


def pending_fragments():
    return glob.glob(os.path.join(REPO, "changelogs", "fragments", "*.yml"))


def test_the_changelog_newest_release_is_galaxy_version():
    version = galaxy_version()
    assert released()[-1] == version, (
        "changelogs/changelog.yaml's newest release is %s, galaxy.yml says %s: run `make "
        "release VERSION=%s`" % (released()[-1], version, version))
    heading = re.search(r"^v([0-9.]+)\n=+$", _read("CHANGELOG.rst"), re.M).group(1)
    assert Version(heading) == version, "CHANGELOG.rst's first release is v%s" % heading


def test_the_readme_names_the_galaxy_version_and_only_real_ones():
    version = galaxy_version()
    text = _read("README.md")
    stated = re.search(r"^This README describes gpuhost\.tuning ([0-9.]+) ", text, re.M)
    assert stated and Version(stated.group(1)) == version, "README's version line"
    allowed = set(released()) | {version, Version(deprecated.REMOVED_IN)}
    for match in MENTION.finditer(text):
        assert Version(match.group(1)) in allowed, (
            "README names version %s (%r): neither released, nor galaxy.yml's %s, nor the "
            "deprecations' removal %s" % (match.group(1), match.group(0), version,
                                          deprecated.REMOVED_IN))


def test_the_mention_pattern_finds_what_it_should():
    text = "until 0.3.0; the names before 0.2.0; gpuhost.tuning 0.1.0; ansible-core 2.19.14"
    assert [m.group(1) for m in MENTION.finditer(text)] == ["0.3.0", "0.2.0", "0.1.0"]


def test_deprecations_are_removed_in_a_later_version():
    version = galaxy_version()
    assert Version(deprecated.REMOVED_IN) > version
    assert Version(facts.PER_KEY_REMOVED_IN) == Version(deprecated.REMOVED_IN)


def test_the_execution_environment_names_this_version():
    version = str(galaxy_version())
    ee = yaml.safe_load(_read("execution-environment.yml"))
    assert ee["options"]["tags"] == ["gpuhost-tuning-ee:%s" % version]
    tarball = "gpuhost-tuning-%s.tar.gz" % version
    assert [c["name"] for c in ee["dependencies"]["galaxy"]["collections"]] == [
        "collections/" + tarball]


def test_every_version_added_is_released_or_the_next_release():
    """A plugin's version_added is a released version, or the one being prepared (galaxy.yml's
    next minor while fragments wait): "New Modules" in the changelog is made from it."""
    version = galaxy_version()
    known = set(released()) | {version}
    if pending_fragments():
        known.add(Version("%d.%d.0" % (version.major, version.minor + 1)))
    wrong = {}
    for path in sorted(glob.glob(os.path.join(REPO, "plugins", "*", "*.py"))):
        with open(path, encoding="utf-8") as handle:
            for found in re.findall(r"^\s*version_added:\s*\"?([0-9.]+)\"?\s*$", handle.read(),
                                    re.M):
                if Version(found) not in known:
                    wrong[os.path.relpath(path, REPO)] = found
    assert wrong == {}, "version_added not released nor the next release (%s): %s" % (
        ", ".join(str(v) for v in sorted(known)), wrong)
