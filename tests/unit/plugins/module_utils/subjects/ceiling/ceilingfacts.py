"""Facts with CUDA ceiling results shaped as subjects/cuda/cuda_ceiling.py returns them,
for the ceiling subject's mirror tests."""

NAME = "NVIDIA H200"


def bus(index):
    return "0000:%02x:00.0" % (0x18 + index * 0x10)


def _kernel(value, path):
    if isinstance(value, dict):
        return value
    return {"tflops": value, "runs_tflops": [value], "checked": True, "path": path}


def ceiling(fp32=60.0, bf16=620.0, fp8=1200.0, gbs=4100.0, **override):
    """One GPU's ceiling result (H200-like figures; a part given as a dict, or in
    ``override``, is that part's result whole)."""
    out = {"compute_capability": "9.0", "sm_count": 132, "seconds": 4.2,
           "memory": {"gbs": gbs, "bytes": 1 << 30, "runs_gbs": [gbs * 0.99, gbs],
                      "checked": True, "path": "ptx-dtod"},
           "fp32": _kernel(fp32, "ptx-fma"), "bf16": _kernel(bf16, "ptx-mma"),
           "fp8": _kernel(fp8, "ptx-mma")}
    out.update(override)
    return out


def smi_gpu(index, reasons=(), limit=700.0, default=700.0, temp=45, counters=None):
    return {"address": bus(index), "name": NAME, "performance_state": "P0",
            "power": {"limit_w": limit, "default_limit_w": default, "max_limit_w": 700.0,
                      "draw_w": 650.0, "management": "Supported"},
            "clock_reasons_active": list(reasons), "clock_reasons_read": ["sw_power_cap"],
            "clock_event_counters_us": counters or {}, "temperature_c": temp,
            "temperature_margin_c": 40}


def node(ceilings, name=NAME, smi=None, extra_results=()):
    """Host facts: one host probe result whose devices carry ``ceilings`` (a list, one per
    GPU), nvidia-smi's GPU dicts (``smi``: index -> smi_gpu kwargs) and any other results."""
    devices = [{"index": i, "name": name, "pci_bus_id": bus(i), "h2d_gbs": 55.0,
                "d2h_gbs": 55.0, "ceiling": c} for i, c in enumerate(ceilings)]
    gpus = [smi_gpu(i, **(smi or {}).get(i, {})) for i in range(len(ceilings))]
    return {"cuda": [{"init": {"code": 0}, "devices": devices}] + list(extra_results),
            "nvidia_smi": {"available": True, "gpus": gpus}}
