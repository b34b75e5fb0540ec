"""boot_service --check --diff: the library files are listed one per line, as Ansible's own
diff display (CallbackBase._get_diff, which joins the prepared texts as they are) prints
them; before, the 81 files came out as one 10,645-character line."""

from ansible.plugins.callback import CallbackBase

from ansible_collections.gpuhost.tuning.plugins.modules import boot_service
from modrun import run_module


def test_diff_lists_each_library_file_on_its_own_line(tmp_path):
    result = run_module(boot_service, {"root": str(tmp_path)}, check_mode=True, diff=True)
    prepared = [d["prepared"] for d in result["diff"] if "prepared" in d]
    assert len(prepared) > 20
    text = CallbackBase()._get_diff([d for d in result["diff"] if "prepared" in d])
    lines = text.splitlines()
    assert len(lines) == len(prepared)
    for line in lines:
        assert line.startswith("create /usr/local/lib/gpuhost-tuning/"), line
        assert line.endswith(" bytes)") and len(line) < 200, line
