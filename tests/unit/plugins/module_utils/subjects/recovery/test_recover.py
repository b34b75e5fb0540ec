"""recover: the ladder with a fake runner that records every command: only the holders of
the GPU to reset are stopped, the refusals name the VM or the host process, a reset the
driver refuses or that hangs marks the host for the reboot, check mode runs nothing."""

import json

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandTimeout,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import recover

GPU, OTHER = "0000:04:00.0", "0000:82:00.0"
SMI = ('<?xml version="1.0" ?><nvidia_smi_log><driver_version>590.48.01</driver_version>'
       '%s</nvidia_smi_log>')
GPU_XML = ('<gpu id="%s"><persistence_mode>%s</persistence_mode><gpu_recovery_action>%s'
           '</gpu_recovery_action><processes>%s</processes></gpu>')
OPTIONS = {"root": "/", "pct": "pct", "qm": "qm", "nvidia_smi": "nvidia-smi", "shutdown_timeout": 5,
           "reset_timeout": 9, "cuda_timeout": 30, "cuda_library": "libcuda.so.1"}


def holders(containers=(), vms=(), processes=()):
    return {"containers": list(containers), "vms": list(vms), "processes": list(processes)}


def fact(need="reset", **held):
    return [{"address": GPU, "need": need, "driver_action": "Reset",
             "evidence": ["driver recovery action Reset"], "holders": holders(**held)},
            {"address": OTHER, "need": "none", "driver_action": "None", "evidence": [],
             "holders": holders(containers=["130"])}]


class Fake(object):
    """Answers like the host: containers' states, nvidia-smi's log and reset, the probe."""

    def __init__(self, reset="GPU 00000000:04:00.0 was successfully reset.", reset_rc=0,
                 running=("129", "130"), action_after="None", processes="", cuda_ok=True):
        self.calls = []
        self.running = set(running)
        self.reset_answer = (reset_rc, reset)
        self.action = "Reset"
        self.action_after = action_after
        self.processes = processes
        self.cuda_ok = cuda_ok

    def run(self, argv, check=True, timeout=None, data=None, **kwargs):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        if argv[0] == "pct" and argv[1] == "status":
            return 0, "status: %s\n" % ("running" if argv[2] in self.running else "stopped"), ""
        if argv[0] == "pct" and argv[1] in ("shutdown", "stop"):
            self.running.discard(argv[2])
            return 0, "", ""
        if argv[0] == "pct" and argv[1] == "start":
            self.running.add(argv[2])
            return 0, "", ""
        if argv[0] == "pct" and argv[1] == "exec":
            return 0, json.dumps({"init": {"code": 0}, "devices": [
                {"index": 0, "pci_bus_id": "0000:04:00.0", "error": None}], "error": None}), ""
        if argv[:2] == ["qm", "status"]:
            return 0, "status: running\n", ""
        if argv[:3] == ["nvidia-smi", "-q", "-x"]:
            gpus = [GPU_XML % ("00000000:04:00.0", "Enabled", self.action, self.processes),
                    GPU_XML % ("00000000:82:00.0", "Enabled", "None", "")]
            return 0, SMI % "".join(gpus), ""
        if argv[:2] == ["nvidia-smi", "-pm"]:
            return 0, "All done.\n", ""
        if argv[:2] == ["nvidia-smi", "-r"]:
            if self.reset_answer[1] is None:
                raise CommandTimeout(argv, timeout, "", "")
            if self.reset_answer[0] == 0:
                self.action = self.action_after
            return self.reset_answer[0], self.reset_answer[1] + "\n", ""
        if argv[1:2] == ["-"]:      # the host CUDA probe
            dev = {"index": 3, "pci_bus_id": "0000:04:00.0", "name": "NVIDIA B200",
                   "error": None if self.cuda_ok else {"code": 999}}
            return 0, json.dumps({"init": {"code": 0}, "devices": [dev],
                                  "error": None if self.cuda_ok else "GPU 3: 999"}), ""
        raise AssertionError("unexpected command %r" % argv)

    def which(self, name):
        return name

    def commands(self, tool, verb=None):
        return [c for c in self.calls if c[0] == tool and (verb is None or c[1] == verb)]


def found(gpus):
    return {"gpu_recovery": gpus, "gpu_processes": [], "passthrough": {}}


def test_only_the_holder_of_the_gpu_is_stopped_and_started():
    runner = Fake()
    got = recover.run(runner, OPTIONS, found(fact(containers=["129"])))
    [gpu] = got["gpus"]
    assert gpu["result"] == "recovered" and not got["reboot_needed"] and got["changed"]
    assert runner.commands("pct", "shutdown") == [["pct", "shutdown", "129", "--timeout", "5"]]
    assert runner.commands("pct", "start") == [["pct", "start", "129"]]
    assert not [c for c in runner.calls if "130" in c]
    assert runner.commands("nvidia-smi", "-pm") == [["nvidia-smi", "-pm", "0", "-i", GPU],
                                                    ["nvidia-smi", "-pm", "1", "-i", GPU]]
    assert got["containers"][0]["stopped"] == "shutdown"


def test_a_container_that_ignores_shutdown_is_stopped():
    runner = Fake()
    original = runner.run

    def stubborn(argv, **kwargs):
        if argv[:2] == ["pct", "shutdown"]:
            runner.calls.append(list(argv))
            return 0, "", ""        # still running afterwards
        return original(argv, **kwargs)
    runner.run = stubborn
    got = recover.run(runner, OPTIONS, found(fact(containers=["129"])))
    assert got["containers"][0]["stopped"] == "stop"
    assert runner.commands("pct", "stop") == [["pct", "stop", "129"]]


def test_check_mode_runs_no_command():
    runner = Fake()
    got = recover.run(runner, OPTIONS, found(fact(containers=["129"])), check_mode=True)
    assert runner.calls == [] and got["gpus"][0]["result"] == "planned"
    assert got["gpus"][0]["stop"] == ["129"] and got["changed"] is True    # predicted


def test_nothing_to_do_is_no_change():
    runner = Fake()
    got = recover.run(runner, OPTIONS, found(fact(need="none")))
    assert (got["gpus"], got["changed"], runner.calls) == ([], False, [])


def test_a_gpu_passed_to_a_vm_is_refused_naming_the_vm():
    runner = Fake()
    got = recover.run(runner, OPTIONS, found(fact(vms=["201"])))
    assert got["gpus"][0]["result"] == "refused" and runner.calls == [["qm", "status", "201"]]
    assert "passed through to VM 201" in got["refused"][0]
    assert "(qm status: 201 running)" in got["refused"][0]
    assert "qm shutdown 201" in got["refused"][0] and not got["reboot_needed"]


def test_a_host_process_is_refused_naming_it():
    got = recover.run(Fake(), OPTIONS, found(fact(
        processes=[{"pid": 4242, "name": "python3"}])))
    assert "host process python3 (pid 4242)" in got["refused"][0]


def test_a_named_gpu_nvidia_smi_does_not_list_finds_its_vm_in_the_passthrough_fact():
    facts = {"gpu_recovery": [], "gpu_processes": [],
             "passthrough": {"devices": [{"address": "0000:83:00.0", "vmid": 201}]}}
    got = recover.run(Fake(), OPTIONS, facts, gpus=["0000:83:00.0"])
    assert "passed through to VM 201" in got["refused"][0]


def test_need_reboot_is_marked_not_reset():
    runner = Fake()
    got = recover.run(runner, OPTIONS, found(fact(need="reboot", containers=["129"])))
    assert got["reboot_needed"] and runner.calls == []
    assert "the driver asks for a reboot" in got["reboot_reasons"][0]


def test_a_reset_the_driver_refuses_marks_the_reboot_and_restores_the_container():
    runner = Fake(reset="The following GPUs could not be reset:\n  GPU 00000000:04:00.0: In "
                        "use by another client", reset_rc=255,
                  processes="<process_info><pid>77</pid><type>C</type><process_name>vllm"
                            "</process_name></process_info>")
    got = recover.run(runner, OPTIONS, found(fact(containers=["129"])))
    [gpu] = got["gpus"]
    assert gpu["result"] == "failed" and got["reboot_needed"]
    reset = [s for s in gpu["steps"] if s["step"] == "reset"][0]
    assert reset["outcome"] == "in_use" and "vllm pid 77" in reset["detail"]
    assert "reset in_use" in got["reboot_reasons"][0]
    assert runner.commands("pct", "start") == [["pct", "start", "129"]]


def test_a_hanging_reset_is_reported_and_marks_the_reboot():
    runner = Fake(reset=None)
    got = recover.run(runner, OPTIONS, found(fact(containers=["129"])))
    reset = [s for s in got["gpus"][0]["steps"] if s["step"] == "reset"][0]
    assert reset["outcome"] == "timed_out" and "did not return in 9 s" in reset["detail"]
    assert got["reboot_needed"]
    assert runner.commands("nvidia-smi", "-pm")[-1] == ["nvidia-smi", "-pm", "1", "-i", GPU]


def test_a_driver_still_asking_for_a_reset_fails_the_read_back():
    got = recover.run(Fake(action_after="Reset"), OPTIONS, found(fact(containers=["129"])))
    step = [s for s in got["gpus"][0]["steps"] if s["step"] == "read_back"][0]
    assert step["outcome"] == "failed" and "still Reset" in step["detail"]
    assert got["reboot_needed"]


def test_a_failed_proof_marks_the_reboot():
    got = recover.run(Fake(cuda_ok=False), OPTIONS, found(fact(containers=["129"])))
    step = [s for s in got["gpus"][0]["steps"] if s["step"] == "prove"][0]
    assert step["outcome"] == "failed" and got["reboot_needed"]
