"""module_utils/deprecated: the spec keys made from OPTION_ALIASES."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import deprecated


def test_aliases_of_a_renamed_option():
    assert deprecated.aliases("setpci_maxreadreq", "mrrs_size") == {
        "aliases": ["size"],
        "deprecated_aliases": [{"name": "size", "version": "0.3.0",
                                "collection_name": "gpuhost.tuning"}]}


def test_no_aliases_for_other_options_or_modules():
    assert deprecated.aliases("setpci_maxreadreq", "size") == {}
    assert deprecated.aliases("sysctl_settings", "mrrs_size") == {}


def test_every_table_entry_gives_its_alias():
    for module, renamed in deprecated.OPTION_ALIASES.items():
        for old, new in renamed.items():
            spec = deprecated.aliases(module, new)
            assert old in spec["aliases"]
            assert {"name": old, "version": deprecated.REMOVED_IN,
                    "collection_name": deprecated.COLLECTION} in spec["deprecated_aliases"]
