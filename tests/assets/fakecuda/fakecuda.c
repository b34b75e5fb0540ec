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
 * The ceiling probe's parts (cuda_ceiling.py), per GPU (comma-separated, the last repeats):
 *   FAKECUDA_CC=9.0             compute capability (attributes 75/76; default 9.0): a
 *                               module whose .target sm_XY is above it is refused with 218
 *   FAKECUDA_SM_COUNT=132       multiprocessors (attribute 16)
 *   FAKECUDA_D2D_GBS=4000       device-to-device copy rate, read + write counted (2 x bytes)
 *   FAKECUDA_FP32_TFLOPS=60, FAKECUDA_BF16_TFLOPS=700, FAKECUDA_FP8_TFLOPS=1400
 *                               how fast the probe's kernels (by entry name) run: a launch
 *                               takes the kernel's FLOPs (from its grid and parameters, as
 *                               cuda_ceiling counts them) / rate until a synchronise returns
 *   FAKECUDA_RATE_SCALE=1,1,1,0.8   every rate of that GPU times this (one slow GPU)
 *   FAKECUDA_WRONG_RESULT=1     the kernels write their result + 1 and device-to-device
 *                               copies copy nothing, so the probe's checks are proven
 * The kernels do the work for real on the output buffer: the fake computes what each thread
 * of the real kernel writes (the FMA chains in closed form, the mma products from the A/B
 * fragments in the input buffer, decoded with the PTX ISA's fragment layout).
 *
 * Copies really move the bytes (device memory is host memory here) and then sleep until
 * size / rate has passed since the call began, so the caller measures the set rate.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
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
struct fake_module { int alive; char entry[64]; };
struct block { size_t size; int device; struct block *next; };

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

static struct block *blocks;        /* the live device allocations */

static struct block *header(CUdeviceptr p)
{
    return (struct block *)(uintptr_t)p - 1;
}

/* The live allocation holding address p (an offset into it included), else NULL. */
static struct block *owner(CUdeviceptr p)
{
    for (struct block *b = blocks; b; b = b->next) {
        CUdeviceptr base = (CUdeviceptr)(uintptr_t)(b + 1);
        if (p >= base && p < base + (b->size ? b->size : 1))
            return b;
    }
    return NULL;
}

/* The allocation holding [p, p + n), else NULL. */
static struct block *holds(CUdeviceptr p, size_t n)
{
    struct block *b = p ? owner(p) : NULL;
    if (!b || p - (CUdeviceptr)(uintptr_t)(b + 1) + n > b->size)
        return NULL;
    return b;
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

/* 90 for "9.0" */
static int compute_capability(int dev)
{
    return (int)lround(number("FAKECUDA_CC", dev, 9.0) * 10);
}

static double rate_scale(int dev) { return number("FAKECUDA_RATE_SCALE", dev, 1); }
static int wrong_result(int dev) { return (int)number("FAKECUDA_WRONG_RESULT", dev, 0); }

CUresult cuDeviceGetAttribute(int *value, int attr, CUdevice dev)
{
    NEED_DEV(dev);
    CUresult f = failure("cuDeviceGetAttribute");
    if (f)
        return f;
    switch (attr) {
    case 16:                /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
        *value = (int)number("FAKECUDA_SM_COUNT", dev, 132);
        return 0;
    case 75:                /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, MINOR */
        *value = compute_capability(dev) / 10;
        return 0;
    case 76:
        *value = compute_capability(dev) % 10;
        return 0;
    case 20:                /* CU_DEVICE_ATTRIBUTE_COMPUTE_MODE */
        *value = (int)number("FAKECUDA_COMPUTE_MODE", dev, busy(dev) ? 3 : 0);
        return 0;
    default:
        return 1;
    }
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
        if (current->done - now() > 0.002)
            wait_until(current->done - 0.001);
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
    b->next = blocks;
    blocks = b;
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
    struct block **at = &blocks;
    while (*at && *at != header(ptr))
        at = &(*at)->next;
    if (!*at)
        return 1;
    *at = header(ptr)->next;
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
    struct block *b = holds(dst, n);
    if (!b)
        return 1;
    return copy("cuMemcpyHtoD_v2", (void *)(uintptr_t)dst, src, n,
                number("FAKECUDA_H2D_GBS", b->device, 50), 0);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    struct block *b = holds(src, n);
    if (!b)
        return 1;
    return copy("cuMemcpyDtoH_v2", dst, (const void *)(uintptr_t)src, n,
                number("FAKECUDA_D2H_GBS", b->device, 50),
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
    if (!dst_ctx || !src_ctx || !holds(dst, n) || !holds(src, n))
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
    const char *target = strstr(ptx, ".target sm_");
    if (target && atoi(target + 11) > compute_capability(current->device))
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
    snprintf(module->entry, sizeof(module->entry), "%s", name);
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

/* The ceiling probe's device-to-device copies, read + write counted in the rate. */
static CUresult device_copy(const char *name, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    double start = now();
    NEED_CTX();
    CUresult f = failure(name);
    if (f)
        return f;
    if (!holds(dst, n) || !holds(src, n))
        return 1;
    int dev = current->device;
    if (!wrong_result(dev))
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    double gbs = number("FAKECUDA_D2D_GBS", dev, 4000) * rate_scale(dev);
    if (gbs > 0)
        wait_until(start + 2.0 * (double)n / (gbs * 1e9));
    return 0;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return device_copy("cuMemcpyDtoD_v2", dst, src, n);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    (void)stream;
    return device_copy("cuMemcpyDtoDAsync_v2", dst, src, n);
}

CUresult cuMemsetD32_v2(CUdeviceptr ptr, unsigned int value, size_t count)
{
    NEED_CTX();
    CUresult f = failure("cuMemsetD32_v2");
    if (f)
        return f;
    if (!holds(ptr, count * 4))
        return 1;
    uint32_t *p = (uint32_t *)(uintptr_t)ptr;
    for (size_t i = 0; i < count; i++)
        p[i] = value;
    return 0;
}

/* The ceiling kernels' shape (cuda_ceiling.py FMA_*, MMA_*). */
#define FMA_CHAINS 8
#define FMA_UNROLL 15
#define MMA_CHAINS 4
#define MMA_ROUNDS 2
#define MMA_WORDS 8

static float bf16_value(unsigned bits)
{
    uint32_t word = bits << 16;
    float f;
    memcpy(&f, &word, sizeof(f));
    return f;
}

static float e4m3_value(unsigned bits)
{
    int exponent = (bits >> 3) & 0xf;
    float mantissa = (float)(bits & 7) / 8.0f;
    float v = exponent ? ldexpf(1.0f + mantissa, exponent - 7) : ldexpf(mantissa, -6);
    return (bits & 0x80) ? -v : v;
}

/* gpuhost_fma(out, iters, a, c): FMA_CHAINS chains per thread from (thread & 1023) + k,
 * x = fma(x, a, c) FMA_UNROLL x iters times (a = -1: period 2), the chains summed. */
static double fma_kernel(void **params, size_t threads, int dev)
{
    CUdeviceptr out = *(CUdeviceptr *)params[0];
    unsigned iters = *(unsigned *)params[1];
    float a = *(float *)params[2], c = *(float *)params[3];
    if (!holds(out, threads * 4))
        return -1;
    unsigned long long steps = (unsigned long long)iters * FMA_UNROLL;
    if (a == -1.0f)
        steps %= 2;
    static float result[1024];
    for (int base = 0; base < 1024; base++) {
        float sum = 0;
        for (int k = 0; k < FMA_CHAINS; k++) {
            float x = (float)(base + k);
            for (unsigned long long i = 0; i < steps; i++)
                x = fmaf(x, a, c);
            sum = k ? sum + x : x;
        }
        result[base] = sum + (float)wrong_result(dev);
    }
    float *o = (float *)(uintptr_t)out;
    for (size_t t = 0; t < threads; t++)
        o[t] = result[t & 1023];
    double flops = (double)threads * ((double)iters * FMA_CHAINS * FMA_UNROLL * 2
                                      + FMA_CHAINS - 1);
    return flops / (number("FAKECUDA_FP32_TFLOPS", dev, 60) * rate_scale(dev) * 1e12);
}

/* gpuhost_mma_bf16 / gpuhost_mma_fp8(out, in, iters): A and B decoded from each lane's
 * fragment registers in ``in`` (PTX ISA layout of m16n8k16 / m16n8k32), every thread's
 * four accumulator elements MMA_CHAINS x (A.B) at its places. */
static double mma_kernel(void **params, size_t threads, int dev, int fp8)
{
    CUdeviceptr out = *(CUdeviceptr *)params[0], in = *(CUdeviceptr *)params[1];
    unsigned iters = *(unsigned *)params[2];
    int per = fp8 ? 4 : 2, bits = fp8 ? 8 : 16, depth = fp8 ? 32 : 16, half = depth / 2;
    if (!holds(out, threads * 16) || !holds(in, 32 * MMA_WORDS * 4) || threads % 32)
        return -1;
    const uint32_t *w = (const uint32_t *)(uintptr_t)in;
    unsigned mask = (1u << bits) - 1;
    float a[16][32], b[32][8], d[16][8];
    for (int lane = 0; lane < 32; lane++) {
        int group = lane / 4, tig = lane % 4;
        for (int r = 0; r < 4; r++)
            for (int i = 0; i < per; i++) {
                unsigned v = (w[lane * MMA_WORDS + r] >> (bits * i)) & mask;
                a[group + 8 * (r % 2)][tig * per + i + half * (r >= 2)] =
                    fp8 ? e4m3_value(v) : bf16_value(v);
            }
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < per; i++) {
                unsigned v = (w[lane * MMA_WORDS + 4 + r] >> (bits * i)) & mask;
                b[tig * per + i + half * r][group] = fp8 ? e4m3_value(v) : bf16_value(v);
            }
    }
    for (int r = 0; r < 16; r++)
        for (int col = 0; col < 8; col++) {
            d[r][col] = 0;
            for (int i = 0; i < depth; i++)
                d[r][col] += a[r][i] * b[i][col];
        }
    float *o = (float *)(uintptr_t)out;
    for (size_t t = 0; t < threads; t++) {
        int lane = (int)(t % 32);
        for (int e = 0; e < 4; e++)
            o[t * 4 + e] = MMA_CHAINS * d[lane / 4 + 8 * (e >= 2)][(lane % 4) * 2 + e % 2]
                + (float)wrong_result(dev);
    }
    double flops = (double)(threads / 32) * ((double)iters * MMA_ROUNDS * 2 * MMA_CHAINS
                                             + MMA_CHAINS) * 2 * 16 * 8 * depth
        + (double)threads * 4 * (MMA_CHAINS - 1);
    double tflops = fp8 ? number("FAKECUDA_FP8_TFLOPS", dev, 1400)
                        : number("FAKECUDA_BF16_TFLOPS", dev, 700);
    return flops / (tflops * rate_scale(dev) * 1e12);
}

/* Seconds the launched kernel runs beyond the launch itself; -1 for a bad buffer. */
static double kernel(const char *entry, size_t threads, void **params, int dev)
{
    int known = !strcmp(entry, "gpuhost_fma") || !strcmp(entry, "gpuhost_mma_bf16")
        || !strcmp(entry, "gpuhost_mma_fp8");
    if (!known)
        return 0;           /* the latency probe's empty kernel */
    if (!params)
        return -1;
    if (!strcmp(entry, "gpuhost_fma"))
        return fma_kernel(params, threads, dev);
    return mma_kernel(params, threads, dev, !strcmp(entry, "gpuhost_mma_fp8"));
}

CUresult cuLaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        CUstream stream, void **params, void **extra)
{
    double start = now();
    (void)shared;
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
    double work = kernel(fn->entry, (size_t)gx * gy * gz * bx * by * bz, params, dev);
    if (work < 0)
        return 700;
    double run = number("FAKECUDA_LAUNCH_US", dev, 8) / 1e6 + work;
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
