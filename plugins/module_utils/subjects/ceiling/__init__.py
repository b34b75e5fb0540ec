"""The ceiling subject: each GPU's compute and memory ceiling (the CUDA probe's ``ceiling``
results) judged against its model's table and the node's best GPU of that model."""
