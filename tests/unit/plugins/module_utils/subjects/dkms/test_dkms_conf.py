"""dkms_conf.parse_conf: the dkms.conf keys the offline DKMS reader needs.

Inputs: the dkms.conf the NVIDIA .run installer writes (tests/fixtures/dkms.py
``NVIDIA_DKMS_CONF``, with its indexed BUILT_MODULE_NAME/DEST_MODULE_LOCATION arrays) and
the scalar form of dkms(8)'s manual page (``BUILT_MODULE_NAME=`` without an index means
index 0; a conf without it builds a module named after PACKAGE_NAME)."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms_conf
from fixtures import dkms as dkmsfix


def _nvidia(version="590.48.01"):
    modules = "\n".join(
        'BUILT_MODULE_NAME[{i}]="{m}"\nDEST_MODULE_LOCATION[{i}]="/kernel/drivers/video"'
        .format(i=i, m=m) for i, m in enumerate(dkmsfix.NVIDIA_MODULES))
    return dkmsfix.NVIDIA_DKMS_CONF.format(name="nvidia", version=version, modules=modules)


def test_the_nvidia_installer_conf_gives_package_and_every_indexed_module():
    conf = dkms_conf.parse_conf(_nvidia())
    assert conf["package_name"] == "nvidia"
    assert conf["package_version"] == "590.48.01"
    assert [m["built"] for m in conf["modules"]] == list(dkmsfix.NVIDIA_MODULES)
    for module in conf["modules"]:
        # no DEST_MODULE_NAME: the installed copy keeps the built name
        assert module["dest"] == module["built"]
        assert module["location"] == "/kernel/drivers/video"


def test_modules_come_in_index_order_not_file_order():
    text = ('PACKAGE_NAME=x\nPACKAGE_VERSION=1\nBUILT_MODULE_NAME[10]="k"\n'
            'BUILT_MODULE_NAME[2]="b"\nBUILT_MODULE_NAME[0]="a"\n')
    assert [m["built"] for m in dkms_conf.parse_conf(text)["modules"]] == ["a", "b", "k"]


def test_scalar_keys_are_index_zero_and_variables_expand():
    text = ("PACKAGE_NAME='ofed'\nPACKAGE_VERSION=24.10\n"
            "BUILT_MODULE_NAME=${PACKAGE_NAME}_core\n"
            "DEST_MODULE_NAME=$PACKAGE_NAME-$PACKAGE_VERSION\n"
            'DEST_MODULE_LOCATION="/updates/$kernelver"\n')
    conf = dkms_conf.parse_conf(text, kernel="6.8.12-9-pve")
    assert conf["modules"] == [{"built": "ofed_core", "dest": "ofed-24.10",
                                "location": "/updates/6.8.12-9-pve"}]


def test_without_built_module_name_the_package_name_is_the_module():
    conf = dkms_conf.parse_conf('PACKAGE_NAME="zfs"\nPACKAGE_VERSION="2.2.7"\n')
    assert conf["modules"] == [{"built": "zfs", "dest": "zfs", "location": ""}]


def test_comments_quotes_and_shell_lines_are_handled():
    text = ("# PACKAGE_NAME=commented\n  PACKAGE_NAME=real # trailing comment\n"
            "PACKAGE_VERSION=\"1.0 # not a comment inside quotes\"\n"
            "if [ -n \"$x\" ]; then\nMAKE[0]=\"make\"\nfi\n")
    conf = dkms_conf.parse_conf(text)
    assert conf["package_name"] == "real"
    assert conf["package_version"] == "1.0 # not a comment inside quotes"


def test_empty_or_none_text_gives_no_package_and_no_module():
    for text in ("", None, "garbage without assignments\n"):
        assert dkms_conf.parse_conf(text) == {"package_name": "", "package_version": "",
                                              "modules": []}
