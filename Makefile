# gpuhost.tuning: the two commands are `make audit` and `make test`; both set themselves up.
SHELL := /bin/bash
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
COLLECTIONS := $(CURDIR)/collections
INSTALLED := $(COLLECTIONS)/ansible_collections/gpuhost/tuning
REPORTS ?= $(CURDIR)/gpuhost-reports

export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export PATH := $(BIN):$(PATH)

# Debian packages the test tiers need (installed only when missing).
UNIT_PKGS := pciutils gcc libc6-dev openjdk-17-jre-headless
# The hostile tier checks a written unit with systemd's own parser (systemd-analyze) and
# gpuhost.prom with promtool (prometheus).
HOSTILE_PKGS := $(UNIT_PKGS) systemd prometheus
INTEGRATION_PKGS := dkms linux-headers-amd64 build-essential kmod chromium prometheus prometheus-node-exporter \
  lxc lxc-templates busybox-static
MOLECULE_PKGS := podman runc mmdebstrap time
# shellcheck: without it ansible-test sanity skips its shellcheck test. python3-venv:
# ansible-test makes a virtualenv per sanity test (ensurepip, on Debian's python3).
SANITY_PKGS := shellcheck python3-venv
# The fleet benchmark (make bench; not part of make test): sshd per namespace, ip netns.
BENCH_PKGS := openssh-server openssh-client iproute2
# pytest-xdist workers for the unit, hostile and integration tiers (auto: one per core; 2 on
# the CI machine, where it took the unit tier from 334 s to 144 s under load). PYTEST_N=0 runs
# them in one process. Integration spreads single tests except the files marked xdist_group,
# which run whole on one worker (--dist loadgroup: shared module fixtures, one real DKMS tree).
PYTEST_N ?= auto
XDIST = -n $(PYTEST_N) --durations=10
LAB_PKGS := qemu-system-x86 qemu-utils ovmf mtools dosfstools mmdebstrap e2fsprogs fdisk openssh-client
# The cgroup guest (lab/cgroup-real.sh): Debian's kernel, LXC and busybox in an initramfs.
LAB_CGROUP_PKGS := qemu-system-x86 lxc busybox-static cpio build-essential kmod

.PHONY: help setup venv collection audit test unit packaging integration molecule lint sanity controller-next build clean lab lab-cgroup lab-collection lab-driver lab-trixie ee

help:
	@echo "make audit   audit this machine read-only; reports in gpuhost-reports/"
	@echo "make test    every test tier (unit, packaging, lint, sanity, integration, molecule)"

venv:
	@scripts/venv.sh test

# The collection, installed into ./collections from this checkout (honours build_ignore).
collection: venv
	@$(BIN)/ansible-galaxy collection install --force -p $(COLLECTIONS) . >/dev/null

setup: collection

# make audit's own setup: a venv with ansible-core only (scripts/venv.sh audit; a test venv
# already there serves as it is) and the collection installed from this checkout.
.PHONY: audit-setup
audit-setup:
	@scripts/venv.sh audit
	@$(BIN)/ansible-galaxy collection install --force -p $(COLLECTIONS) . >/dev/null

audit: audit-setup
	@$(BIN)/ansible-playbook -i localhost, -c local gpuhost.tuning.audit \
	  -e ansible_python_interpreter=$(PY) -e gpuhost_audit_report_dir=$(REPORTS)
	@echo "Reports: $(REPORTS)/ (index.html, summary.md, one JSON per host)"

# Fast tiers first, so a finding stops the run before the slow ones: unit, packaging, lint
# (18 s idle, 50 s under load), sanity (35 s idle to 105 s under load once warm; 139-202 s
# the first time, when ansible-test fills ~/.ansible/test from PyPI), integration, molecule.
test: unit hostile packaging lint sanity integration lanes

# The two slowest lanes side by side: molecule (podman containers: Debian 12 and 13,
# MOLECULE_TEST_SUITES; lanes of its own, scripts/molecule.sh) and
# controller-next (a Debian 13 chroot with the newest ansible-core). They share no folder,
# cache or HOME, and molecule's waits on its containers leave room on two cores; each one's
# output is printed whole when it ends (--output-sync). Their Debian packages are already
# there (integration installs MOLECULE_PKGS, mmdebstrap among them), so no two apt runs meet.
.PHONY: lanes
lanes: setup
	@scripts/apt-ensure.sh $(MOLECULE_PKGS)
	@$(MAKE) --no-print-directory -j2 --output-sync=target molecule controller-next

unit: setup
	@scripts/apt-ensure.sh $(UNIT_PKGS)
	$(BIN)/pytest -q $(XDIST) tests/unit

# What the collection ships and how the ecosystem's tools read it: galaxy build contents,
# the execution environment's build context (ansible-builder), the example inventories.
packaging: setup
	$(BIN)/pytest -q tests/packaging

# Hostile operator cases (bad options, escapes, operator files, partial failures, locks),
# each checked against a full digest of the tree; fast, no packages beyond the unit tier's.
.PHONY: hostile
hostile: setup
	@scripts/apt-ensure.sh $(HOSTILE_PKGS)
	$(BIN)/pytest -q $(XDIST) tests/hostile

# The integration tier runs the boot service in a podman container too, and its real-tool
# tests run their Debian 13 case inside the trixie test image (tests/platforms.py): install
# podman (MOLECULE_PKGS) and build both images before it (molecule then finds them built),
# so a fresh machine does not skip those tests.
TEST_SUITES := bookworm trixie
# molecule's suites: Debian 12 and 13, both under make test; the lanes
# (scripts/molecule.sh: per suite gate then kernel, one lane of the other scenarios) run side
# by side. `make molecule MOLECULE_TEST_SUITES=bookworm` runs one.
MOLECULE_TEST_SUITES ?= $(TEST_SUITES)
integration: setup
	@scripts/apt-ensure.sh $(INTEGRATION_PKGS) $(MOLECULE_PKGS)
	@for suite in $(TEST_SUITES); do scripts/build-test-image.sh $$suite >/dev/null || exit 1; done
	GPUHOST_TEST_STRICT=1 $(BIN)/pytest -q $(XDIST) --dist loadgroup -m "not rollout" tests/integration

# The 5-host rollout tests (tests/integration/test_rollout.py): reboot_verify stopping at
# host 2 of 5 and resuming, serial [1, "50%"], tune with one host ignoring MRRS. Not in make
# test (CI budget): see docs/testing.md "Rollouts (make rollout)" for the measured time.
.PHONY: rollout
rollout: setup
	$(BIN)/pytest -q $(XDIST) -m rollout tests/integration

molecule: setup
	@scripts/apt-ensure.sh $(MOLECULE_PKGS)
	MOLECULE_SUITES="$(MOLECULE_TEST_SUITES)" scripts/molecule.sh

# The NVIDIA driver upgrade (playbook driver_upgrade, no reboot) on both suites: real apt,
# dkms and dpkg in the container's root and container 130's; not in make test (CI budget).
.PHONY: molecule-driver
molecule-driver: setup
	@scripts/apt-ensure.sh $(MOLECULE_PKGS) dpkg-dev
	MOLECULE_SUITES="$(MOLECULE_TEST_SUITES)" scripts/molecule.sh driver

# The execution environment execution-environment.yml defines: its local Debian base
# (scripts/ee-base.sh), ansible-builder + podman (scripts/ee-build.sh), then the audit of two
# host trees inside it through ansible-runner --process-isolation (scripts/ee-run.sh), its
# reports checked against a run on this machine (tests/integration/test_ee.py, which make
# integration skips while the image is not built). Not in make test: see
# docs/execution-environment.md for the measured time. Its Debian packages are molecule's (podman,
# runc, mmdebstrap).
ee: setup
	@scripts/apt-ensure.sh $(MOLECULE_PKGS)
	scripts/ee-build.sh
	GPUHOST_EE_STRICT=1 $(BIN)/pytest -q -n 0 -p no:cacheprovider tests/integration/test_ee.py

# Fleet benchmark: N namespace hosts with sshd on this machine; bench/RESULTS.md, results.json,
# wall_time.png. Not part of make test. BENCH_SIZES="1 8 32" BENCH_FORKS=8 BENCH_REPEAT=1.
.PHONY: bench
bench: venv
	@scripts/apt-ensure.sh $(BENCH_PKGS)
	@$(BIN)/pip install -q --disable-pip-version-check -r bench/requirements.txt
	bench/run.sh

# ruff, ansible-lint (profile production, offline from Galaxy), antsibull-changelog lint.
lint: collection
	@scripts/lint.sh

# ansible-test sanity (every test that runs here, no ignore file) on an
# ansible_collections/gpuhost/tuning copy of the checkout (in ~/.cache/gpuhost-sanity);
# the first run installs ansible-test's pinned requirements from PyPI into
# ~/.ansible/test/venv, later runs reuse them.
sanity: venv
	@scripts/apt-ensure.sh $(SANITY_PKGS)
	@scripts/sanity.sh

# The controller lanes on Python 3.13: a cached Debian 13 root (scripts/trixie-root.sh) used
# as a chroot, running on the newest ansible-core (requirements-controller-next.txt, 2.22)
# ansible-test sanity --python 3.13 (no ignore file), the unit tier and the playbook tests
# that need no podman; the playbook tests again on 2.21 and 2.20; and on ansible-core's devel
# from a snapshot when one newer than 2.22 is there (reported, never a failure). An
# ansible-core deprecation warning fails it. Its own cache, HOME and venvs (nothing shared
# with the 2.19 lane): it can run beside integration or molecule.
controller-next:
	@scripts/apt-ensure.sh mmdebstrap
	scripts/controller-next.sh

build: venv
	$(BIN)/ansible-galaxy collection build --force --output-path build .

# A release, run once every changelog fragment is in: `make release VERSION=0.2.0`. Sets the
# version where it is written down (galaxy.yml; execution-environment.yml's tarball and image
# tag; the README's "This README describes gpuhost.tuning X" line), compiles the fragments into
# changelogs/changelog.yaml and CHANGELOG.rst (antsibull-changelog release, which removes
# them), lints the changelog and runs tests/packaging/test_versions.py (they all agree).
# Modules' version_added must name a released version or this one before it runs: the
# changelog's "New Modules" lists those whose version_added is the release's.
.PHONY: release
release: venv
	@[[ "$(VERSION)" =~ ^[0-9]+\.[0-9]+\.[0-9]+$$ ]] || { echo "release: give the version," \
	  "make release VERSION=X.Y.Z (galaxy.yml has $$(sed -n 's/^version: //p' galaxy.yml))" >&2; exit 2; }
	@old=$$(sed -n 's/^version: //p' galaxy.yml); o=$${old//./\\.}; \
	  sed -i "s/^version: .*/version: $(VERSION)/" galaxy.yml && \
	  sed -i "s/gpuhost-tuning-$$o\.tar\.gz/gpuhost-tuning-$(VERSION).tar.gz/g; s/gpuhost-tuning-ee:$$o\b/gpuhost-tuning-ee:$(VERSION)/g" execution-environment.yml && \
	  sed -i "s/^This README describes gpuhost\.tuning $$o /This README describes gpuhost.tuning $(VERSION) /" README.md
	$(BIN)/antsibull-changelog release --version $(VERSION) --reload-plugins
	$(BIN)/antsibull-changelog lint
	$(BIN)/pytest -q -n 0 -p no:cacheprovider tests/packaging/test_versions.py

clean:
	rm -rf build collections tests/output .pytest_cache

# VM lab: a real reboot into a new kernel under QEMU/TCG; see lab/README.md.
# lab: the lab's own upgrade playbook; lab-collection: the collection's audit, tune and
# reboot_verify (real reboot, trial boot, containers) and the headers gate.
# lab-cgroup: lxc_cgroup_devices in a small guest with a real dynamic major (about 1 min).
lab: setup
	@scripts/apt-ensure.sh $(LAB_PKGS) $(LAB_CGROUP_PKGS)
	$(BIN)/pytest -q tests/lab
	lab/cgroup-real.sh
	lab/run.sh

lab-cgroup: setup
	@scripts/apt-ensure.sh $(LAB_CGROUP_PKGS)
	lab/cgroup-real.sh

lab-collection: setup
	@scripts/apt-ensure.sh $(LAB_PKGS)
	$(BIN)/pytest -q tests/lab
	LAB_COLLECTION=1 lab/run.sh

# The NVIDIA driver upgrade in the same VM: the stand-in driver 580.95.05 built
# by DKMS and loaded, gpuhost.tuning.driver_upgrade to 590.48.01 with a real reboot; a
# container left behind stops the gate first. dpkg-dev: dpkg-scanpackages for its apt index.
lab-driver: setup
	@scripts/apt-ensure.sh $(LAB_PKGS) dpkg-dev
	LAB_DRIVER=1 lab/run.sh

# The same collection run in a Debian 13 guest (Proxmox VE 9's userland): kernel
# 6.12.107+deb13-amd64 upgraded to 6.12.117+deb13-amd64, dkms 3.2, systemd 257.
lab-trixie: setup
	@scripts/apt-ensure.sh $(LAB_PKGS)
	$(BIN)/pytest -q tests/lab
	LAB_RECIPE=recipe-trixie LAB_COLLECTION=1 lab/run.sh
