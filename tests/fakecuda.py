"""The stand-in CUDA driver library (tests/assets/fakecuda/fakecuda.c), compiled with the
system C compiler once per source version into tests/output/fakecuda/<hash>/libcuda.so.1,
and the stand-in cuBLAS (fakecublas.c, ``build_cublas()``) linked against it.

``env(...)`` turns keyword settings into the FAKECUDA_* variables the library reads.
"""

import hashlib
import os
import shutil
import subprocess
import tempfile

TESTS = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(TESTS, "assets", "fakecuda", "fakecuda.c")
CUBLAS_SOURCE = os.path.join(TESTS, "assets", "fakecuda", "fakecublas.c")
OUTPUT = os.path.join(TESTS, "output", "fakecuda")


def build():
    """Path of the compiled ``libcuda.so.1`` (built when missing)."""
    with open(SOURCE, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()[:16]
    return _compile(SOURCE, os.path.join(OUTPUT, digest), "libcuda.so.1", ["-lm"])


def build_cublas():
    """Path of the compiled stand-in ``libcublas.so.12``, linked against ``build()``'s
    ``libcuda.so.1`` by its folder (run path): the loader binds it to the very copy the
    probe loaded by that path, so both share the current context."""
    cuda = build()
    folder = os.path.dirname(cuda)
    with open(CUBLAS_SOURCE, "rb") as handle:
        digest = hashlib.sha256(handle.read() + folder.encode()).hexdigest()[:16]
    return _compile(CUBLAS_SOURCE, os.path.join(OUTPUT, "cublas-" + digest), "libcublas.so.12",
                    ["-L" + folder, "-l:libcuda.so.1", "-Wl,-rpath," + folder])


def _compile(source, folder, name, libs):
    lib = os.path.join(folder, name)
    if os.path.exists(lib):
        return lib
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError("no C compiler (cc) on the PATH: apt-get install gcc libc6-dev")
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".so")
    os.close(fd)
    try:
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror",
                        "-o", tmp, source] + libs, check=True, capture_output=True, text=True)
        os.rename(tmp, lib)
    except subprocess.CalledProcessError as exc:
        os.unlink(tmp)
        raise RuntimeError("compiling %s failed: %s" % (source, exc.stderr))
    return lib


def env(**settings):
    """``env(devices="0000:a1:00.0,0000:c1:00.0", h2d_gbs="2,1")`` -> FAKECUDA_* strings.

    The ceiling probe's keywords (per GPU, comma-separated, the last repeats; see
    fakecuda.c): ``cc="9.0"``, ``sm_count=132``, ``d2d_gbs`` (read + write counted),
    ``fp32_tflops``, ``bf16_tflops``, ``fp8_tflops``, ``rate_scale="1,1,1,0.8"`` (every rate
    of a GPU times this) and ``wrong_result=1`` (kernels write result + 1, device copies
    copy nothing). The stand-in cuBLAS (fakecublas.c): ``cublas_tflops``, ``cublas_wrong=1``
    (C gets the product + 1), ``cublas_status=13``. A list or tuple value is joined with
    commas."""
    return {"FAKECUDA_" + key.upper(): ",".join(str(v) for v in value)
            if isinstance(value, (list, tuple)) else str(value)
            for key, value in settings.items()}


def clean_environ():
    """This process's environment without any FAKECUDA_* variable."""
    return {k: v for k, v in os.environ.items() if not k.startswith("FAKECUDA_")}


def pct_cuda_env(**settings):
    """``cuda_env`` for the pct double's state: containers find the stand-in as
    ``libcuda.so.1`` and behave as ``settings`` say (the device story still sets the
    init code when a container's device rules block the GPU)."""
    out = {"LD_LIBRARY_PATH": os.path.dirname(build())}
    out.update(env(**settings))
    return out


def configurer(monkeypatch):
    """For a test's ``fake`` fixture: clears every FAKECUDA_* variable, and returns
    ``configure(**settings)``, which sets the stand-in's behaviour for this test only (it
    reads FAKECUDA_* at each call)."""
    for key in list(os.environ):
        if key.startswith("FAKECUDA_"):
            monkeypatch.delenv(key)

    def configure(**settings):
        for key, value in env(**settings).items():
            monkeypatch.setenv(key, value)
    return configure


def link_tree(root, links):
    """``{bdf: (speed text, width)}`` as the sysfs link files the probe reads, under root."""
    for bdf, (speed, width) in links.items():
        folder = os.path.join(str(root), "sys/bus/pci/devices", bdf)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "current_link_speed"), "w") as handle:
            handle.write(speed + "\n")
        with open(os.path.join(folder, "current_link_width"), "w") as handle:
            handle.write("%s\n" % width)
    return str(root)
