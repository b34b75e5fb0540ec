"""Mirror tests of plugins/module_utils/subjects/ceiling."""
