"""cmdout.CommandOutputs: on the live root ``produce(runner)`` runs once and a command
error or timeout becomes the output's error; on any other root (an unpacked capture, a
test tree) the stored ``/.gpuhost-capture/<name>`` is read, bounded by hostfs's output cap,
and nothing runs. The stored output here is the real ``nvidia-smi -q -x`` of an H200 host
(tests/fixtures/nvidia/h200-580-process.xml)."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import nvsmi
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandError,
    CommandTimeout,
)
from conftest import TESTS

XML = os.path.join(TESTS, "fixtures", "nvidia", "h200-580-process.xml")


def _store(root, name, data):
    path = cmdout.stored_path(str(root), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def _never(runner):
    raise AssertionError("no command may run on a root that is not the live host")


def test_is_live_only_for_the_host_root(tmp_path):
    assert cmdout.is_live("/") and cmdout.is_live(None) and cmdout.is_live("/./")
    assert not cmdout.is_live(str(tmp_path))
    assert cmdout.stored_path(str(tmp_path), "x.xml") == str(tmp_path / ".gpuhost-capture/x.xml")


def test_a_capture_root_reads_the_stored_output_and_runs_nothing(tmp_path):
    with open(XML, "rb") as handle:
        data = handle.read()
    _store(tmp_path, nvsmi.OUTPUT_NAME, data)
    outputs = cmdout.CommandOutputs(str(tmp_path))
    text = outputs.get(nvsmi.OUTPUT_NAME, _never)
    assert text == data.decode("utf-8")
    assert outputs.info[nvsmi.OUTPUT_NAME] == {"source": "capture",
                                               "path": "/.gpuhost-capture/" + nvsmi.OUTPUT_NAME}
    # parsed the way the audit parses it
    assert nvsmi.parse(text)["gpus"]
    assert outputs.captured() == {"/.gpuhost-capture/" + nvsmi.OUTPUT_NAME: data}


def test_a_capture_without_the_output_says_so(tmp_path):
    outputs = cmdout.CommandOutputs(str(tmp_path))
    assert outputs.get("journal.txt", _never) is None
    assert "no /.gpuhost-capture/journal.txt under it" in outputs.info["journal.txt"]["error"]
    assert outputs.captured() == {}


def test_a_stored_output_over_its_cap_or_a_fifo_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setattr(hostfs, "OUTPUT_LIMIT", 1024)
    _store(tmp_path, "big.txt", b"x" * 4096)
    fifo = cmdout.stored_path(str(tmp_path), "fifo.txt")
    os.mkfifo(fifo)
    outputs = cmdout.CommandOutputs(str(tmp_path))
    assert outputs.get("big.txt", _never) is None
    assert outputs.info["big.txt"]["error"].startswith("stored output not read: ")
    assert outputs.get("fifo.txt", _never) is None  # returns, never blocks on the FIFO
    assert outputs.info["fifo.txt"]["error"].startswith("stored output not read: ")


class _Produce:
    def __init__(self, result):
        self.result = result
        self.runners = []

    def __call__(self, runner):
        self.runners.append(runner)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def test_the_live_root_produces_once_and_keeps_it(monkeypatch):
    runner = object()
    produce = _Produce(("<xml/>", {"source": "command", "rc": 0}))
    outputs = cmdout.CommandOutputs("/", runner)
    assert outputs.get("a", produce) == "<xml/>"
    assert outputs.get("a", produce) == "<xml/>"
    assert produce.runners == [runner]
    info = outputs.info["a"]
    assert info["source"] == "command" and info["rc"] == 0 and info["seconds"] >= 0


@pytest.mark.parametrize("error", [
    CommandTimeout(["nvidia-smi", "-q", "-x"], 20, "", ""),
    CommandError(["journalctl", "-k"], 1, "", "No journal files were found."),
])
def test_a_failing_or_hanging_command_is_the_outputs_error_not_a_crash(error):
    outputs = cmdout.CommandOutputs("/", object())
    assert outputs.get("a", _Produce(error)) is None
    assert outputs.info["a"]["error"] == str(error)
    assert outputs.captured() == {}
