"""NVLink state and error counters (issue 25 item 3): parsing nvidia-smi nvlink -s and -e in
NVIDIA's format and when the two commands run (the findings: checks/test_nvlink.py)."""

import os

from fixtures import hosts, nvhealth, pci
from fixtures import nvlink as nvl

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.nvlink import nvlink
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import CommandTimeout

WANTED = hosts.common_wanted(host="pve-gpu04")
IDS = ("nvlink_inactive", "nvlink_errors")

# stas00/ml-engineering, "How to check the error counters of NVLink links" (H100, verbatim
# apart from the elided links)
H100_ERRORS = """\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-abcdefab-cdef-abdc-abcd-abababababab)
         Link 0: Replay Errors: 0
         Link 0: Recovery Errors: 0
         Link 0: CRC Errors: 0

         Link 1: Replay Errors: 0
         Link 1: Recovery Errors: 0
         Link 1: CRC Errors: 0
"""


def _b200_host(tmp_path, status=None, errors=None):
    root = str(tmp_path / "hgx")
    built = pci.seed_gpus(root, mrrs=4096)
    nvhealth.write_smi(root, nvhealth.smi_xml(nvhealth.B200_580, gpus=built["gpus"]))
    result = audit.audit(root, WANTED)
    gpus = nvl.gpus_of(result["nvidia_smi"])
    nvl.write(root, status(gpus) if status else None, errors(gpus) if errors else None)
    return root, built


def _mine(result):
    return [f for f in result["findings"] if f["id"] in IDS]


def test_the_documented_formats_parse():
    [gpu] = nvlink.parse_errors(H100_ERRORS)
    assert gpu["uuid"] == "GPU-abcdefab-cdef-abdc-abcd-abababababab"
    assert gpu["counters"] == {0: {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0},
                               1: {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}}
    status = nvlink.parse_status("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-fde0)\n"
                                 "\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n"
                                 "\t Link 2: some status not seen yet\n")
    assert [ln["state"] for ln in status[0]["links"]] == ["active", "inactive", "unknown"]
    assert status[0]["links"][0]["gbs"] == 25.0


def test_pcie_only_hosts_run_no_command(tmp_path):
    # the seed host's RTX PRO 6000 (PCIe): nothing asked of nvidia-smi nvlink
    root = str(tmp_path / "seed")
    hosts.seed_health_host(root)
    outputs = cmdout.CommandOutputs(root)
    result = audit.audit(root, WANTED, outputs=outputs)
    assert not result["nvlink"]["checked"]
    assert "PCIe-only" in result["nvlink"]["reason"]
    assert nvlink.STATUS_NAME not in outputs.outputs


class _Runner(object):
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def which(self, name):
        return "/usr/bin/" + name

    def run(self, args, check=True, timeout=None, **kwargs):
        self.calls.append((tuple(args[1:]), timeout))
        answer = self.answers[tuple(args[1:])]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_live_calls_are_bounded_and_a_hang_is_named(monkeypatch):
    smi = {"available": True, "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-a",
                                        "address": "0000:00:06.0"},
                                       {"name": "NVIDIA H200", "uuid": "GPU-b",
                                        "address": "0000:00:07.0"}]}
    runner = _Runner({
        ("nvlink", "-s"): CommandTimeout(["nvidia-smi", "nvlink", "-s"], 30, "", ""),
        ("nvlink", "-e"): (0, "", "")})
    outputs = cmdout.CommandOutputs("/", runner)
    fact = nvlink.facts(outputs, smi, {"needed": False})
    assert fact["checked"] and not fact["available"]
    assert "did not return in 30 s" in fact["error"]
    assert all(timeout == nvlink.TIMEOUT_S for _args, timeout in runner.calls)
    assert len(runner.calls) == 2


def test_capture_keeps_both_outputs(tmp_path):
    import io
    import tarfile

    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import host_capture
    root, _built = _b200_host(tmp_path, lambda g: nvl.status_text(g, inactive={0: [1]}),
                              nvl.errors_text)
    builder, original, _recorded = host_capture.capture(root, WANTED)
    buf = io.BytesIO()
    builder.write(buf, "{}")
    dest = str(tmp_path / "unpacked")
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r:gz") as tar:
        names = tar.getnames()
        tar.extractall(dest, filter="tar")
    assert ".gpuhost-capture/" + nvlink.STATUS_NAME in names
    assert ".gpuhost-capture/" + nvlink.ERRORS_NAME in names
    again = audit.audit(dest, WANTED)
    assert _mine(again) == _mine(original) and len(_mine(again)) == 1
    assert os.path.isdir(dest)


def test_a_number_over_20_digits_fails_only_its_line():
    """bounded.INT: 5,000 digits were a ValueError (Python's int limit) for the section."""
    huge = "9" * 5000
    text = "\n".join(["GPU 0: NVIDIA H200 (UUID: GPU-0)", "\t Link 0: Replay Errors: %s" % huge,
                      "\t Link 0: CRC Errors: 2", "\t Link %s: CRC Errors: 1" % huge])
    assert nvlink.parse_errors(text) == [{"index": 0, "uuid": "GPU-0",
                                          "counters": {0: {"CRC Errors": 2}}}]
    assert nvlink.parse_status("GPU %s: H200 (UUID: GPU-9)\n\t Link 0: 26.562 GB/s" % huge) == []
