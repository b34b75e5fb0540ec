/*
 * Stand-in for the NVIDIA CUDA driver library (libcuda.so.1), for tests only.
 *
 * Exports exactly the driver API entry points plugins/module_utils/cuda.py calls, with the
 * names the real library exports (the _v2 ABI where one exists), and behaves as the
 * environment says, so a test can give it N GPUs at set PCI addresses and copy rates, or
 * make cuInit or a later call fail the way real hosts fail:
 *
 *   FAKECUDA_INIT=999           cuInit's return code (default 0; 100 when no GPU is listed)
 *   FAKECUDA_DRIVER=13000       cuDriverGetVersion
 *   FAKECUDA_DEVICES=0000:A1:00.0,0000:C1:00.0   bus ids as the driver prints them
 *                               (default one GPU at 0000:00:06.0; empty: no GPU)
 *   FAKECUDA_NAME, FAKECUDA_TOTAL_MB, FAKECUDA_FREE_MB, FAKECUDA_H2D_GBS, FAKECUDA_D2H_GBS,
 *   FAKECUDA_COMPUTE_MODE, FAKECUDA_BUSY
 *                               per GPU, comma-separated (the last value repeats)
 *   FAKECUDA_PEER=all | 0-1,1-0 pairs with peer access; FAKECUDA_PEER_GBS their rate
 *   FAKECUDA_FAIL=cuMemcpyDtoH_v2:700,...   make an entry point return a code
 *   FAKECUDA_HANG=cuInit,...    the entry point never returns (sleeps until a signal kills
 *                               the process), as a driver with a GPU fallen off the bus does
 *   FAKECUDA_CRASH=cuInit:segv  the entry point crashes the process: segv (a write through
 *                               a null pointer, SIGSEGV) or abort (abort(), SIGABRT)
 *   FAKECUDA_COUNT=0            cuDeviceGetCount's answer while cuInit succeeds (default:
 *                               the listed GPUs), as a driver that sees none of them
 *   FAKECUDA_H2D_GBS=0.000001   (or D2H, PEER) absurdly slow copies: 256 MiB take 3 days
 *   FAKECUDA_CORRUPT=1          device-to-host copies return altered data
 *   FAKECUDA_LAUNCH_US=20       per GPU: how long a launched kernel runs until a synchronise
 *                               returns (default 8 us, about an empty kernel's round trip)
 *   FAKECUDA_WAKE_US=100        per GPU: added to a launch made after the caller was idle
 *                               (no launch or synchronise) for FAKECUDA_WAKE_AFTER_US (200):
 *                               a core waking from a deep idle state, what sleeping callers see
 *   FAKECUDA_LOG=path           at unload, append "contexts=N device_allocs=N host_allocs=N
 *                               modules=N" (what was never freed) and the calls made
 *
 * Copies really move the bytes (device memory is host memory here) and then sleep until
 * size / rate has passed since the call began, so the caller measures the set rate.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fake_ctx *CUcontext;
typedef struct fake_module *CUmodule;
typedef struct fake_module *CUfunction;
typedef void *CUstream;

struct fake_ctx { int device; int alive; double done; double idle_since; };
struct fake_module { int alive; };
struct block { size_t size; int device; };

#define MAX_GPUS 64
static int initialised;
static __thread CUcontext current;
static long open_contexts, device_allocs, host_allocs, open_modules;
static char calls[8192];

static void note(const char *name)
{
    size_t used = strlen(calls);
    if (used + strlen(name) + 2 < sizeof(calls)) {
        strcat(calls, name);
        strcat(calls, " ");
    }
}

/* The i-th comma-separated item of an environment variable (the last one repeats). */
static int item(const char *var, int index, char *out, size_t len)
{
    const char *v = getenv(var);
    if (!v || !*v)
        return 0;
    const char *start = v;
    for (int i = 0; i < index; i++) {
        const char *comma = strchr(start, ',');
        if (!comma)
            break;
        start = comma + 1;
    }
    size_t n = strcspn(start, ",");
    if (n >= len)
        n = len - 1;
    memcpy(out, start, n);
    out[n] = 0;
    return 1;
}

static double number(const char *var, int index, double fallback)
{
    char buf[64];
    return item(var, index, buf, sizeof(buf)) ? atof(buf) : fallback;
}

static int gpu_count(void)
{
    const char *v = getenv("FAKECUDA_DEVICES");
    if (!v)
        return 1;
    if (!*v)
        return 0;
    int n = 1;
    for (; *v; v++)
        n += *v == ',';
    return n > MAX_GPUS ? MAX_GPUS : n;
}

/* The entry in a comma-separated list of ``name`` or ``name:value`` items naming this entry
 * point, else NULL. */
static const char *listed(const char *var, const char *name)
{
    const char *v = getenv(var);
    size_t len = strlen(name);
    while (v && *v) {
        if (strncmp(v, name, len) == 0 && (v[len] == ':' || v[len] == ',' || v[len] == 0))
            return v + len;
        v = strchr(v, ',');
        if (v)
            v++;
    }
    return NULL;
}

/* FAKECUDA_HANG and FAKECUDA_CRASH for this entry point. */
static void misbehave(const char *name)
{
    const char *crash = listed("FAKECUDA_CRASH", name);
    if (crash && *crash == ':') {
        if (strncmp(crash + 1, "abort", 5) == 0)
            abort();
        *(volatile int *)(uintptr_t)0 = 1;      /* SIGSEGV */
    }
    if (listed("FAKECUDA_HANG", name))
        for (;;)
            pause();
}

/* A configured failure for this entry point, else 0. */
static CUresult failure(const char *name)
{
    note(name);
    misbehave(name);
    const char *v = getenv("FAKECUDA_FAIL");
    size_t len = strlen(name);
    while (v && *v) {
        if (strncmp(v, name, len) == 0 && v[len] == ':')
            return atoi(v + len + 1);
        v = strchr(v, ',');
        if (v)
            v++;
    }
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void wait_until(double t)
{
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

static struct block *header(CUdeviceptr p)
{
    return (struct block *)(uintptr_t)p - 1;
}

#define NEED_INIT() do { if (!initialised) return 3; } while (0)
#define NEED_CTX() do { NEED_INIT(); if (!current || !current->alive) return 201; } while (0)

static const struct { int code; const char *name; const char *text; } errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult describe(CUresult code, const char **out, int text)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].code == code) {
            *out = text ? errors[i].text : errors[i].name;
            return 0;
        }
    *out = NULL;
    return 1;
}

CUresult cuGetErrorName(CUresult code, const char **out) { return describe(code, out, 0); }
CUresult cuGetErrorString(CUresult code, const char **out) { return describe(code, out, 1); }

CUresult cuDriverGetVersion(int *version)
{
    CUresult f = failure("cuDriverGetVersion");
    if (f)
        return f;
    *version = (int)number("FAKECUDA_DRIVER", 0, 13000);
    return 0;
}

CUresult cuInit(unsigned int flags)
{
    CUresult f = failure("cuInit");
    if (f)
        return f;
    if (flags != 0)
        return 1;
    int code = (int)number("FAKECUDA_INIT", 0, 0);
    if (code)
        return code;
    if (gpu_count() == 0)
        return 100;
    initialised = 1;
    return 0;
}

CUresult cuDeviceGetCount(int *count)
{
    NEED_INIT();
    CUresult f = failure("cuDeviceGetCount");
    if (f)
        return f;
    *count = (int)number("FAKECUDA_COUNT", 0, gpu_count());
    return 0;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    NEED_INIT();
    CUresult f = failure("cuDeviceGet");
    if (f)
        return f;
    if (ordinal < 0 || ordinal >= gpu_count())
        return 101;
    *dev = ordinal;
    return 0;
}

#define NEED_DEV(d) do { NEED_INIT(); if ((d) < 0 || (d) >= gpu_count()) return 101; } while (0)

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    NEED_DEV(dev);
    CUresult f = failure("cuDeviceGetName");
    if (f)
        return f;
    char buf[256] = "NVIDIA H200";
    item("FAKECUDA_NAME", dev, buf, sizeof(buf));
    snprintf(name, (size_t)len, "%s", buf);
    return 0;
}

CUresult cuDeviceGetPCIBusId(char *out, int len, CUdevice dev)
{
    NEED_DEV(dev);
    CUresult f = failure("cuDeviceGetPCIBusId");
    if (f)
        return f;
    char buf[64] = "0000:00:06.0";
    item("FAKECUDA_DEVICES", dev, buf, sizeof(buf));
    snprintf(out, (size_t)len, "%s", buf);
    return 0;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    NEED_DEV(dev);
    CUresult f = failure("cuDeviceTotalMem_v2");
    if (f)
        return f;
    *bytes = (size_t)(number("FAKECUDA_TOTAL_MB", dev, 143771) * 1048576.0);
    return 0;
}

static int busy(int dev) { return (int)number("FAKECUDA_BUSY", dev, 0); }

CUresult cuDeviceGetAttribute(int *value, int attr, CUdevice dev)
{
    NEED_DEV(dev);
    CUresult f = failure("cuDeviceGetAttribute");
    if (f)
        return f;
    if (attr != 20)         /* CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: the only one modelled */
        return 1;
    *value = (int)number("FAKECUDA_COMPUTE_MODE", dev, busy(dev) ? 3 : 0);
    return 0;
}

CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    NEED_DEV(dev);
    CUresult f = failure("cuCtxCreate_v2");
    if (f)
        return f;
    int mode = (int)number("FAKECUDA_COMPUTE_MODE", dev, busy(dev) ? 3 : 0);
    if (mode == 2 || (mode == 3 && busy(dev)))
        return 46;
    struct fake_ctx *c = calloc(1, sizeof(*c));
    c->device = dev;
    c->alive = 1;
    *ctx = c;
    current = c;
    open_contexts++;
    return 0;
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    NEED_INIT();
    CUresult f = failure("cuCtxDestroy_v2");
    if (f)
        return f;
    if (!ctx || !ctx->alive)
        return 201;
    ctx->alive = 0;
    if (current == ctx)
        current = NULL;
    open_contexts--;
    return 0;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    NEED_INIT();
    CUresult f = failure("cuCtxSetCurrent");
    if (f)
        return f;
    if (ctx && !ctx->alive)
        return 201;
    current = ctx;
    return 0;
}

/* Spin (not sleep) until t: the caller times microseconds, and a sleep overshoots them. */
static void spin_until(double t)
{
    while (now() < t)
        ;
}

CUresult cuCtxSynchronize(void)
{
    NEED_CTX();
    CUresult f = failure("cuCtxSynchronize");
    if (f)
        return f;
    if (current->done > 0) {
        spin_until(current->done);
        current->done = 0;
    }
    current->idle_since = now();
    return 0;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    NEED_CTX();
    CUresult f = failure("cuMemGetInfo_v2");
    if (f)
        return f;
    int dev = current->device;
    double total_mb = number("FAKECUDA_TOTAL_MB", dev, 143771);
    *total = (size_t)(total_mb * 1048576.0);
    *free_bytes = (size_t)(number("FAKECUDA_FREE_MB", dev, total_mb - 600) * 1048576.0);
    return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t size)
{
    NEED_CTX();
    CUresult f = failure("cuMemAlloc_v2");
    if (f)
        return f;
    int dev = current->device;
    double free_mb = number("FAKECUDA_FREE_MB", dev, number("FAKECUDA_TOTAL_MB", dev, 143771));
    if ((double)size > free_mb * 1048576.0)
        return 2;
    struct block *b = malloc(sizeof(*b) + size);
    if (!b)
        return 2;
    b->size = size;
    b->device = dev;
    *ptr = (CUdeviceptr)(uintptr_t)(b + 1);
    device_allocs++;
    return 0;
}

CUresult cuMemFree_v2(CUdeviceptr ptr)
{
    NEED_CTX();
    CUresult f = failure("cuMemFree_v2");
    if (f)
        return f;
    if (!ptr)
        return 1;
    free(header(ptr));
    device_allocs--;
    return 0;
}

CUresult cuMemHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    (void)flags;
    NEED_CTX();
    CUresult f = failure("cuMemHostAlloc");
    if (f)
        return f;
    *ptr = malloc(size);
    if (!*ptr)
        return 2;
    host_allocs++;
    return 0;
}

CUresult cuMemFreeHost(void *ptr)
{
    NEED_CTX();
    CUresult f = failure("cuMemFreeHost");
    if (f)
        return f;
    free(ptr);
    host_allocs--;
    return 0;
}

static CUresult copy(const char *name, void *dst, const void *src, size_t n, double gbs,
                     int corrupt)
{
    double start = now();
    NEED_CTX();
    CUresult f = failure(name);
    if (f)
        return f;
    memcpy(dst, src, n);
    if (corrupt && n)
        ((unsigned char *)dst)[0] ^= 0xff;
    if (gbs > 0)
        wait_until(start + (double)n / (gbs * 1e9));
    return 0;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    if (!dst || n > header(dst)->size)
        return 1;
    return copy("cuMemcpyHtoD_v2", (void *)(uintptr_t)dst, src, n,
                number("FAKECUDA_H2D_GBS", header(dst)->device, 50), 0);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    if (!src || n > header(src)->size)
        return 1;
    return copy("cuMemcpyDtoH_v2", dst, (const void *)(uintptr_t)src, n,
                number("FAKECUDA_D2H_GBS", header(src)->device, 50),
                (int)number("FAKECUDA_CORRUPT", 0, 0));
}

static int peer_pair(int a, int b)
{
    const char *v = getenv("FAKECUDA_PEER");
    if (!v || !*v || a == b)
        return 0;
    if (strcmp(v, "all") == 0)
        return 1;
    char want[32];
    snprintf(want, sizeof(want), "%d-%d", a, b);
    size_t len = strlen(want);
    while (v && *v) {
        if (strncmp(v, want, len) == 0 && (v[len] == ',' || v[len] == 0))
            return 1;
        v = strchr(v, ',');
        if (v)
            v++;
    }
    return 0;
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
    NEED_DEV(dev);
    NEED_DEV(peer);
    CUresult f = failure("cuDeviceCanAccessPeer");
    if (f)
        return f;
    *can = peer_pair(dev, peer);
    return 0;
}

CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    NEED_CTX();
    CUresult f = failure("cuCtxEnablePeerAccess");
    if (f)
        return f;
    if (flags || !peer || !peer->alive)
        return 1;
    return peer_pair(current->device, peer->device) ? 0 : 217;
}

CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                      size_t n)
{
    if (!dst || !src || !dst_ctx || !src_ctx || n > header(dst)->size || n > header(src)->size)
        return 1;
    return copy("cuMemcpyPeer", (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n,
                number("FAKECUDA_PEER_GBS", 0, 100), 0);
}

/* The PTX the probe loads: accepted when it is PTX with an entry point (".version",
 * ".target", ".entry"), the way the real JIT refuses anything else with 218. */
CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    NEED_CTX();
    CUresult f = failure("cuModuleLoadData");
    if (f)
        return f;
    const char *ptx = image;
    if (!ptx || !strstr(ptx, ".version") || !strstr(ptx, ".target") || !strstr(ptx, ".entry"))
        return 218;
    struct fake_module *m = calloc(1, sizeof(*m) + strlen(ptx) + 1);
    m->alive = 1;
    strcpy((char *)(m + 1), ptx);
    *module = m;
    open_modules++;
    return 0;
}

CUresult cuModuleGetFunction(CUfunction *fn, CUmodule module, const char *name)
{
    NEED_CTX();
    CUresult f = failure("cuModuleGetFunction");
    if (f)
        return f;
    if (!module || !module->alive)
        return 400;
    char want[300];
    snprintf(want, sizeof(want), ".entry %s", name);
    if (!strstr((const char *)(module + 1), want))
        return 500;
    *fn = module;
    return 0;
}

CUresult cuModuleUnload(CUmodule module)
{
    NEED_CTX();
    CUresult f = failure("cuModuleUnload");
    if (f)
        return f;
    if (!module || !module->alive)
        return 400;
    module->alive = 0;
    open_modules--;
    return 0;
}

CUresult cuLaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        CUstream stream, void **params, void **extra)
{
    double start = now();
    (void)shared;
    (void)params;
    (void)extra;
    NEED_CTX();
    CUresult f = failure("cuLaunchKernel");
    if (f)
        return f;
    if (!fn || !fn->alive)
        return 400;
    if (stream || !gx || !gy || !gz || !bx || !by || !bz)
        return 1;
    int dev = current->device;
    double run = number("FAKECUDA_LAUNCH_US", dev, 8) / 1e6;
    double after = number("FAKECUDA_WAKE_AFTER_US", dev, 200) / 1e6;
    if (current->idle_since > 0 && start - current->idle_since >= after)
        run += number("FAKECUDA_WAKE_US", dev, 0) / 1e6;
    current->done = start + run;
    return 0;
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("FAKECUDA_LOG");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "contexts=%ld device_allocs=%ld host_allocs=%ld modules=%ld calls=%s\n",
            open_contexts, device_allocs, host_allocs, open_modules, calls);
    fclose(f);
}
