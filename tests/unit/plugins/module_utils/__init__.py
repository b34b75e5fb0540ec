"""Mirror tests of plugins/module_utils, one folder per package."""
