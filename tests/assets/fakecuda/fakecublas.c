/*
 * Stand-in for cuBLAS (libcublas.so.12), for tests only: the entry points the ceiling
 * probe's optional GEMM calls (plugins/module_utils/subjects/cuda/cuda_cublas.py).
 *
 * Linked against the stand-in libcuda.so.1 (tests/fakecuda.py build_cublas(): the same
 * file the probe loads, so the dynamic loader binds this library to that very copy): a
 * handle is only created while a context is current on the thread (cuMemGetInfo_v2 answers
 * 201 otherwise), as real cuBLAS needs. Device pointers of the stand-in libcuda are host
 * memory, so the GEMM reads A and B and writes C directly.
 *
 *   FAKECUDA_CUBLAS_TFLOPS=700   how fast cublasGemmEx runs: a call returns when
 *                                2 m n k / rate has passed since it began
 *   FAKECUDA_CUBLAS_WRONG=1      C gets the product + 1 (the probe's check is proven)
 *   FAKECUDA_CUBLAS_STATUS=13    cublasGemmEx returns this status (no work)
 *   FAKECUDA_LOG=path            at unload, append "cublas handles=N gemms=N" (handles never
 *                                destroyed, GEMMs run)
 *
 * cublasGemmEx does the real product (FP32 sums, BF16 A and B, FP32 or BF16 C, either
 * operand transposed or not) for at most MAX_MACS multiply-adds; a larger one is
 * CUBLAS_STATUS_NOT_SUPPORTED (15). A call with the same operands, shapes and A/B contents
 * as the last one writes the kept product again (the probe's timed loop stays cheap).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total);    /* the stand-in libcuda */

#define MAX_MACS (1ULL << 28)
#define CUDA_R_32F 0
#define CUDA_R_16BF 14
#define COMPUTE_32F 68

struct handle { int alive; };
static long open_handles, gemms;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void finish_at(double t)
{
    if (t - now() > 0.002) {
        struct timespec ts;
        double until = t - 0.001;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
            ;
    }
    while (now() < t)
        ;
}

static double setting(const char *name, double fallback)
{
    const char *v = getenv(name);
    return v && *v ? atof(v) : fallback;
}

int cublasCreate_v2(struct handle **out)
{
    size_t free_bytes, total;
    if (!out)
        return 7;
    if (cuMemGetInfo_v2(&free_bytes, &total) != 0)
        return 1;                   /* CUBLAS_STATUS_NOT_INITIALIZED: no current context */
    *out = calloc(1, sizeof(**out));
    (*out)->alive = 1;
    open_handles++;
    return 0;
}

int cublasDestroy_v2(struct handle *h)
{
    if (!h || !h->alive)
        return 1;
    h->alive = 0;
    open_handles--;
    return 0;
}

static float bf16(uint16_t bits)
{
    uint32_t word = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &word, sizeof(f));
    return f;
}

static uint16_t to_bf16(float f)
{
    uint32_t word;
    memcpy(&word, &f, sizeof(word));
    return (uint16_t)((word + 0x7fff + ((word >> 16) & 1)) >> 16);
}

/* The last product, kept with what it was computed from. */
static struct {
    const void *a, *b;
    int ta, tb, m, n, k, lda, ldb;
    size_t a_len, b_len;
    uint16_t *a_copy, *b_copy;
    float *product;             /* m x n, column-major */
} kept;

static size_t extent(int trans, int rows, int cols, int ld)
{
    /* elements spanned by a column-major operand of op(X) = rows x cols */
    int stored_cols = trans ? rows : cols;
    return (size_t)ld * (size_t)(stored_cols - 1) + (size_t)(trans ? cols : rows);
}

static int same_as_kept(const uint16_t *a, const uint16_t *b, int ta, int tb, int m, int n,
                        int k, int lda, int ldb, size_t a_len, size_t b_len)
{
    return kept.product && kept.a == a && kept.b == b && kept.ta == ta && kept.tb == tb
        && kept.m == m && kept.n == n && kept.k == k && kept.lda == lda && kept.ldb == ldb
        && !memcmp(kept.a_copy, a, a_len * 2) && !memcmp(kept.b_copy, b, b_len * 2);
}

static void compute(const uint16_t *a, const uint16_t *b, int ta, int tb, int m, int n, int k,
                    int lda, int ldb, size_t a_len, size_t b_len)
{
    free(kept.a_copy);
    free(kept.b_copy);
    free(kept.product);
    kept.a_copy = malloc(a_len * 2);
    kept.b_copy = malloc(b_len * 2);
    kept.product = malloc((size_t)m * n * sizeof(float));
    memcpy(kept.a_copy, a, a_len * 2);
    memcpy(kept.b_copy, b, b_len * 2);
    float *arow = malloc((size_t)k * sizeof(float));
    for (int i = 0; i < m; i++) {
        for (int l = 0; l < k; l++)
            arow[l] = bf16(ta ? a[(size_t)i * lda + l] : a[(size_t)l * lda + i]);
        for (int j = 0; j < n; j++) {
            float sum = 0;
            for (int l = 0; l < k; l++)
                sum += arow[l] * bf16(tb ? b[(size_t)l * ldb + j] : b[(size_t)j * ldb + l]);
            kept.product[(size_t)j * m + i] = sum;
        }
    }
    free(arow);
    kept.a = a;
    kept.b = b;
    kept.ta = ta;
    kept.tb = tb;
    kept.m = m;
    kept.n = n;
    kept.k = k;
    kept.lda = lda;
    kept.ldb = ldb;
}

int cublasGemmEx(struct handle *h, int transa, int transb, int m, int n, int k,
                 const float *alpha, const void *A, int atype, int lda, const void *B,
                 int btype, int ldb, const float *beta, void *C, int ctype, int ldc,
                 int compute_type, int algo)
{
    double start = now();
    (void)algo;
    if (!h || !h->alive)
        return 1;
    int status = (int)setting("FAKECUDA_CUBLAS_STATUS", 0);
    if (status)
        return status;
    if (m <= 0 || n <= 0 || k <= 0 || !alpha || !beta || !A || !B || !C
        || transa < 0 || transa > 1 || transb < 0 || transb > 1
        || lda < (transa ? k : m) || ldb < (transb ? n : k) || ldc < m)
        return 7;
    if (atype != CUDA_R_16BF || btype != CUDA_R_16BF || compute_type != COMPUTE_32F
        || (ctype != CUDA_R_32F && ctype != CUDA_R_16BF))
        return 15;
    if ((unsigned long long)m * n * k > MAX_MACS)
        return 15;
    size_t a_len = extent(transa, m, k, lda), b_len = extent(transb, k, n, ldb);
    if (!same_as_kept(A, B, transa, transb, m, n, k, lda, ldb, a_len, b_len))
        compute(A, B, transa, transb, m, n, k, lda, ldb, a_len, b_len);
    float wrong = (float)setting("FAKECUDA_CUBLAS_WRONG", 0);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            size_t at = (size_t)j * ldc + i;
            float old = ctype == CUDA_R_32F ? ((float *)C)[at] : bf16(((uint16_t *)C)[at]);
            float v = *alpha * kept.product[(size_t)j * m + i] + wrong;
            if (*beta != 0)
                v += *beta * old;
            if (ctype == CUDA_R_32F)
                ((float *)C)[at] = v;
            else
                ((uint16_t *)C)[at] = to_bf16(v);
        }
    gemms++;
    double rate = setting("FAKECUDA_CUBLAS_TFLOPS", 700);
    if (rate > 0)
        finish_at(start + 2.0 * m * n * (double)k / (rate * 1e12));
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
    fprintf(f, "cublas handles=%ld gemms=%ld\n", open_handles, gemms);
    fclose(f);
}
