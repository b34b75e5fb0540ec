"""Every module's DOCUMENTATION, EXAMPLES and RETURN is YAML that parses: ansible-doc and
every ansible-test sanity test that reads the docs stop at the first module whose block
does not (a ``): `` inside a plain list item did, in cuda_probe)."""

import ast
import glob
import os

import pytest
import yaml

MODULES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "plugins", "modules")


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(MODULES, "*.py"))),
                         ids=os.path.basename)
def test_doc_blocks_parse(path):
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    blocks = dict((node.targets[0].id, node.value.value) for node in tree.body
                  if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in (
                      "DOCUMENTATION", "EXAMPLES", "RETURN"))
    assert sorted(blocks) == ["DOCUMENTATION", "EXAMPLES", "RETURN"]
    for name, text in blocks.items():
        assert yaml.safe_load(text) is not None, name
