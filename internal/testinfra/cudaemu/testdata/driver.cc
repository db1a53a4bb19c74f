// Test driver for the CUDA emulator: dlopens the three libraries the way the
// backend does (RTLD_NOW | RTLD_LOCAL, our own prototypes, no CUDA headers)
// and runs one named test. Usage: driver LIBDIR TEST. Exit status 0 and
// "PASS" on success; failures are printed one a line.
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

typedef unsigned long long devptr;
typedef void* handle;

static int failures = 0;
static void fail(const char* fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	if (++failures > 30) {
		printf("too many failures\n");
		exit(1);
	}
}

#define EXPECT(cond, ...)                                                    \
	do {                                                                     \
		if (!(cond)) {                                                       \
			printf("%s:%d: %s: ", __FILE__, __LINE__, #cond);                \
			fail(__VA_ARGS__);                                               \
		}                                                                    \
	} while (0)
#define EXPECT_RC(want, call)                                                      \
	do {                                                                           \
		int rc_ = (call);                                                          \
		if (rc_ != (want)) fail("%s:%d: %s = %d, want %d", __FILE__, __LINE__, #call, rc_, (int)(want)); \
	} while (0)
#define OK(call) EXPECT_RC(0, call)

static void* libs[3];

template <typename F> static F sym(const char* name, int lib = 0) {
	void* p = dlsym(libs[lib], name);
	if (!p) {
		printf("dlsym %s: %s\n", name, dlerror());
		exit(2);
	}
	return (F)p;
}

// ---- the API, resolved with our own prototypes ----
static int (*cuInit)(unsigned);
static int (*cuDriverGetVersion)(int*);
static int (*cuDeviceGetCount)(int*);
static int (*cuDeviceGet)(int*, int);
static int (*cuDeviceGetName)(char*, int, int);
static int (*cuDeviceGetAttribute)(int*, int, int);
static int (*cuDeviceTotalMem)(size_t*, int);
static int (*cuDevicePrimaryCtxRetain)(handle*, int);
static int (*cuDevicePrimaryCtxRelease)(int);
static int (*cuCtxSetCurrent)(handle);
static int (*cuCtxSynchronize)(void);
static int (*cuMemAlloc)(devptr*, size_t);
static int (*cuMemFree)(devptr);
static int (*cuMemGetInfo)(size_t*, size_t*);
static int (*cuMemcpyHtoD)(devptr, const void*, size_t);
static int (*cuMemcpyDtoH)(void*, devptr, size_t);
static int (*cuMemcpyDtoD)(devptr, devptr, size_t);
static int (*cuMemcpyHtoDAsync)(devptr, const void*, size_t, handle);
static int (*cuMemcpyDtoHAsync)(void*, devptr, size_t, handle);
static int (*cuMemcpyDtoDAsync)(devptr, devptr, size_t, handle);
static int (*cuMemsetD8)(devptr, unsigned char, size_t);
static int (*cuMemsetD32)(devptr, unsigned, size_t);
static int (*cuStreamCreate)(handle*, unsigned);
static int (*cuStreamDestroy)(handle);
static int (*cuStreamSynchronize)(handle);
static int (*cuEventCreate)(handle*, unsigned);
static int (*cuEventRecord)(handle, handle);
static int (*cuEventSynchronize)(handle);
static int (*cuEventElapsedTime)(float*, handle, handle);
static int (*cuEventDestroy)(handle);
static int (*cuModuleLoadData)(handle*, const void*);
static int (*cuModuleUnload)(handle);
static int (*cuModuleGetFunction)(handle*, handle, const char*);
static int (*cuFuncSetAttribute)(handle, int, int);
static int (*cuLaunchKernel)(handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, handle,
                             void**, void**);
static int (*cuGetErrorName)(int, const char**);
static int (*cuStreamBeginCapture)(handle, int);
static int (*cuStreamEndCapture)(handle, handle*);
static int (*cuStreamIsCapturing)(handle, int*);
static int (*cuThreadExchangeStreamCaptureMode)(int*);
static int (*cuGraphDestroy)(handle);
static int (*cuGetErrorString)(int, const char**);

static int (*cublasCreate)(handle*);
static int (*cublasDestroy)(handle);
static int (*cublasSetStream)(handle, handle);
static int (*cublasSetMathMode)(handle, int);
static int (*cublasGetVersion)(handle, int*);
static int (*cublasGemmEx)(handle, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                           const void*, void*, int, int, int, int);
static int (*cublasGemmStridedBatchedEx)(handle, int, int, int, int, int, const void*, const void*, int, int, long long,
                                         const void*, int, int, long long, const void*, void*, int, int, long long, int,
                                         int, int);

static int (*nvrtcVersion)(int*, int*);
static const char* (*nvrtcGetErrorString)(int);
static int (*nvrtcCreateProgram)(handle*, const char*, const char*, int, const char* const*, const char* const*);
static int (*nvrtcCompileProgram)(handle, int, const char* const*);
static int (*nvrtcGetProgramLogSize)(handle, size_t*);
static int (*nvrtcGetProgramLog)(handle, char*);
static int (*nvrtcGetPTXSize)(handle, size_t*);
static int (*nvrtcGetPTX)(handle, char*);
static int (*nvrtcGetCUBINSize)(handle, size_t*);
static int (*nvrtcGetCUBIN)(handle, char*);
static int (*nvrtcDestroyProgram)(handle*);
static int (*nvrtcGetNumSupportedArchs)(int*);
static int (*nvrtcGetSupportedArchs)(int*);

static void load(const char* dir) {
	const char* names[3] = {"libcuda.so.1", "libcublas.so.13", "libnvrtc.so.13"};
	for (int i = 0; i < 3; i++) {
		std::string p = std::string(dir) + "/" + names[i];
		libs[i] = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
		if (!libs[i]) {
			printf("dlopen %s: %s\n", p.c_str(), dlerror());
			exit(2);
		}
	}
#define S(var, name, lib) var = sym<decltype(var)>(name, lib)
	S(cuInit, "cuInit", 0);
	S(cuDriverGetVersion, "cuDriverGetVersion", 0);
	S(cuDeviceGetCount, "cuDeviceGetCount", 0);
	S(cuDeviceGet, "cuDeviceGet", 0);
	S(cuDeviceGetName, "cuDeviceGetName", 0);
	S(cuDeviceGetAttribute, "cuDeviceGetAttribute", 0);
	S(cuDeviceTotalMem, "cuDeviceTotalMem_v2", 0);
	S(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0);
	S(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 0);
	S(cuCtxSetCurrent, "cuCtxSetCurrent", 0);
	S(cuCtxSynchronize, "cuCtxSynchronize", 0);
	S(cuMemAlloc, "cuMemAlloc_v2", 0);
	S(cuMemFree, "cuMemFree_v2", 0);
	S(cuMemGetInfo, "cuMemGetInfo_v2", 0);
	S(cuMemcpyHtoD, "cuMemcpyHtoD_v2", 0);
	S(cuMemcpyDtoH, "cuMemcpyDtoH_v2", 0);
	S(cuMemcpyDtoD, "cuMemcpyDtoD_v2", 0);
	S(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 0);
	S(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 0);
	S(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", 0);
	S(cuMemsetD8, "cuMemsetD8_v2", 0);
	S(cuMemsetD32, "cuMemsetD32_v2", 0);
	S(cuStreamCreate, "cuStreamCreate", 0);
	S(cuStreamDestroy, "cuStreamDestroy_v2", 0);
	S(cuStreamSynchronize, "cuStreamSynchronize", 0);
	S(cuEventCreate, "cuEventCreate", 0);
	S(cuEventRecord, "cuEventRecord", 0);
	S(cuEventSynchronize, "cuEventSynchronize", 0);
	S(cuEventElapsedTime, "cuEventElapsedTime", 0);
	S(cuEventDestroy, "cuEventDestroy_v2", 0);
	S(cuModuleLoadData, "cuModuleLoadData", 0);
	S(cuModuleUnload, "cuModuleUnload", 0);
	S(cuModuleGetFunction, "cuModuleGetFunction", 0);
	S(cuFuncSetAttribute, "cuFuncSetAttribute", 0);
	S(cuLaunchKernel, "cuLaunchKernel", 0);
	S(cuGetErrorName, "cuGetErrorName", 0);
	S(cuStreamBeginCapture, "cuStreamBeginCapture_v2", 0);
	S(cuStreamEndCapture, "cuStreamEndCapture", 0);
	S(cuStreamIsCapturing, "cuStreamIsCapturing", 0);
	S(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 0);
	S(cuGraphDestroy, "cuGraphDestroy", 0);
	S(cuGetErrorString, "cuGetErrorString", 0);
	S(cublasCreate, "cublasCreate_v2", 1);
	S(cublasDestroy, "cublasDestroy_v2", 1);
	S(cublasSetStream, "cublasSetStream_v2", 1);
	S(cublasSetMathMode, "cublasSetMathMode", 1);
	S(cublasGetVersion, "cublasGetVersion_v2", 1);
	S(cublasGemmEx, "cublasGemmEx", 1);
	S(cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx", 1);
	S(nvrtcVersion, "nvrtcVersion", 2);
	S(nvrtcGetErrorString, "nvrtcGetErrorString", 2);
	S(nvrtcCreateProgram, "nvrtcCreateProgram", 2);
	S(nvrtcCompileProgram, "nvrtcCompileProgram", 2);
	S(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", 2);
	S(nvrtcGetProgramLog, "nvrtcGetProgramLog", 2);
	S(nvrtcGetPTXSize, "nvrtcGetPTXSize", 2);
	S(nvrtcGetPTX, "nvrtcGetPTX", 2);
	S(nvrtcGetCUBINSize, "nvrtcGetCUBINSize", 2);
	S(nvrtcGetCUBIN, "nvrtcGetCUBIN", 2);
	S(nvrtcDestroyProgram, "nvrtcDestroyProgram", 2);
	S(nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs", 2);
	S(nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs", 2);
#undef S
}

// ---- helpers ----
static handle g_ctx, g_module;

static void setup() {
	OK(cuInit(0));
	OK(cuDevicePrimaryCtxRetain(&g_ctx, 0));
	OK(cuCtxSetCurrent(g_ctx));
	OK(cuModuleLoadData(&g_module, "image"));
}

static handle func(const char* name) {
	handle f = nullptr;
	int rc = cuModuleGetFunction(&f, g_module, name);
	if (rc) {
		printf("cuModuleGetFunction(%s) = %d\n", name, rc);
		exit(1);
	}
	return f;
}

template <typename T> static devptr upload(const std::vector<T>& v) {
	devptr p = 0;
	OK(cuMemAlloc(&p, v.size() * sizeof(T)));
	OK(cuMemcpyHtoD(p, v.data(), v.size() * sizeof(T)));
	return p;
}
template <typename T> static std::vector<T> download(devptr p, size_t n) {
	std::vector<T> v(n);
	OK(cuMemcpyDtoH(v.data(), p, n * sizeof(T)));
	return v;
}
template <typename T> static devptr alloc(size_t n) {
	devptr p = 0;
	OK(cuMemAlloc(&p, n * sizeof(T)));
	return p;
}

// launch packs arguments into a void** array exactly as the backend does.
struct Args {
	std::vector<void*> ptrs;
	std::vector<std::vector<char>> vals;
	template <typename T> Args& add(T v) {
		std::vector<char> b(sizeof(T));
		memcpy(b.data(), &v, sizeof(T));
		vals.push_back(b);
		return *this;
	}
	void** get() {
		ptrs.clear();
		for (auto& v : vals) ptrs.push_back(v.data());
		return ptrs.data();
	}
};

static int launch(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  Args& a) {
	return cuLaunchKernel(func(name), gx, gy, gz, bx, by, bz, 0, nullptr, a.vals.empty() ? nullptr : a.get(), nullptr);
}

static unsigned f2u(float f) {
	unsigned u;
	memcpy(&u, &f, 4);
	return u;
}
static float u2f(unsigned u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static float round_bits(float f, int drop) {
	unsigned u = f2u(f);
	if ((u & 0x7f800000u) == 0x7f800000u) return f;
	u = (u + ((1u << (drop - 1)) - 1) + ((u >> drop) & 1u)) & ~((1u << drop) - 1);
	return u2f(u);
}
// fma_build: the library was built with GDROTRAIN_EMU_FMA=1 (the Go test
// passes the variable on), so its GEMM steps are fused.
static const bool fma_build = getenv("GDROTRAIN_EMU_FMA") && strcmp(getenv("GDROTRAIN_EMU_FMA"), "1") == 0;
// This file is compiled with -ffp-contract=off: a*b+c rounds twice here.
static float mad(float a, float b, float c) { return fma_build ? fmaf(a, b, c) : a * b + c; }

static unsigned short bf16(float f) { return (unsigned short)(f2u(round_bits(f, 16)) >> 16); }
static float from_bf16(unsigned short h) { return u2f((unsigned)h << 16); }

static uint64_t rng_state = 88172645463325252ull;
static float rnd() {  // uniform in [-1, 1)
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (float)((rng_state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

// ---- tests ----

static void test_load(const char*) {
	EXPECT(libs[0] == libs[1] && libs[1] == libs[2], "the three libraries are not one loaded object");
	int v = 0;
	OK(cuDriverGetVersion(&v));
	EXPECT(v == 13000, "driver version %d", v);
	OK(cuInit(0));
	OK(cuInit(0));
	int n = 0;
	OK(cuDeviceGetCount(&n));
	EXPECT(n == 1, "device count %d", n);
	int dev = -1;
	OK(cuDeviceGet(&dev, 0));
	EXPECT(dev == 0, "device %d", dev);
	EXPECT_RC(101, cuDeviceGet(&dev, 1));
	char name[64];
	OK(cuDeviceGetName(name, sizeof name, 0));
	EXPECT(strcmp(name, "gdrotrain CPU emulator") == 0, "name %s", name);
	char shortname[5];
	OK(cuDeviceGetName(shortname, sizeof shortname, 0));
	EXPECT(strcmp(shortname, "gdro") == 0, "truncated name %s", shortname);
	std::map<int, int> attrs = {{75, 9}, {76, 0}, {16, 132}, {1, 1024}, {8, 49152}, {97, 232448}, {10, 32}, {4242, 0}};
	for (auto& a : attrs) {
		int got = -1;
		OK(cuDeviceGetAttribute(&got, a.first, 0));
		EXPECT(got == a.second, "attribute %d = %d, want %d", a.first, got, a.second);
	}
	size_t total = 0;
	OK(cuDeviceTotalMem(&total, 0));
	EXPECT(total == (8ull << 30), "total memory %zu", total);
	std::map<int, std::string> names = {{0, "CUDA_SUCCESS"},
	                                    {1, "CUDA_ERROR_INVALID_VALUE"},
	                                    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
	                                    {3, "CUDA_ERROR_NOT_INITIALIZED"},
	                                    {100, "CUDA_ERROR_NO_DEVICE"},
	                                    {101, "CUDA_ERROR_INVALID_DEVICE"},
	                                    {200, "CUDA_ERROR_INVALID_IMAGE"},
	                                    {201, "CUDA_ERROR_INVALID_CONTEXT"},
	                                    {500, "CUDA_ERROR_NOT_FOUND"},
	                                    {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
	                                    {719, "CUDA_ERROR_LAUNCH_FAILED"}};
	for (auto& e : names) {
		const char* s = nullptr;
		OK(cuGetErrorName(e.first, &s));
		EXPECT(s && e.second == s, "name of %d: %s", e.first, s ? s : "(null)");
		s = nullptr;
		OK(cuGetErrorString(e.first, &s));
		EXPECT(s && *s, "no description for %d", e.first);
	}
	const char* s = "untouched";
	EXPECT_RC(1, cuGetErrorName(12345, &s));
	EXPECT_RC(1, cuGetErrorString(12345, &s));
	EXPECT(strcmp(s, "untouched") == 0, "pointer changed");
	OK(cuGetErrorString(2, &s));
	EXPECT(strcmp(s, "out of memory") == 0, "description of 2: %s", s);
	// The symbols are the same whichever handle they are looked up in.
	EXPECT(dlsym(libs[1], "cuInit") == (void*)cuInit, "cuInit differs between handles");
}

static void test_before_init(const char*) {
	devptr p;
	int n;
	EXPECT_RC(3, cuMemAlloc(&p, 16));
	EXPECT_RC(3, cuDeviceGetCount(&n));
	handle ctx;
	EXPECT_RC(3, cuDevicePrimaryCtxRetain(&ctx, 0));
	int v = 0;
	OK(cuDriverGetVersion(&v));
	EXPECT_RC(1, cuInit(1));
}

static void test_no_device(const char*) {
	EXPECT_RC(100, cuInit(0));
	int n = -1;
	EXPECT_RC(3, cuDeviceGetCount(&n));
	const char* s = nullptr;
	OK(cuGetErrorName(100, &s));
	EXPECT(s && strcmp(s, "CUDA_ERROR_NO_DEVICE") == 0, "name %s", s);
	handle h;
	EXPECT_RC(1, cublasCreate(&h));
}

static void test_context(const char*) {
	OK(cuInit(0));
	devptr p;
	EXPECT_RC(201, cuMemAlloc(&p, 16));
	handle ctx;
	OK(cuDevicePrimaryCtxRetain(&ctx, 0));
	EXPECT_RC(201, cuMemAlloc(&p, 16));
	EXPECT_RC(201, cuCtxSetCurrent((handle)&p));
	OK(cuCtxSetCurrent(ctx));
	OK(cuMemAlloc(&p, 16));
	OK(cuCtxSynchronize());
	// Another thread has no current context until it sets one.
	std::thread([&] {
		devptr q;
		EXPECT_RC(201, cuMemAlloc(&q, 16));
		OK(cuCtxSetCurrent(ctx));
		OK(cuMemAlloc(&q, 16));
		OK(cuMemFree(q));
	}).join();
	// A second reference keeps the context; the last release destroys it
	// and everything in it.
	handle ctx2;
	OK(cuDevicePrimaryCtxRetain(&ctx2, 0));
	EXPECT(ctx2 == ctx, "primary context changed");
	OK(cuDevicePrimaryCtxRelease(0));
	OK(cuCtxSynchronize());
	OK(cuDevicePrimaryCtxRelease(0));
	EXPECT_RC(709, cuMemAlloc(&p, 16));
	EXPECT_RC(201, cuDevicePrimaryCtxRelease(0));
	OK(cuDevicePrimaryCtxRetain(&ctx, 0));
	EXPECT_RC(1, cuMemFree(p));  // freed with the context
	size_t fr, tot;
	OK(cuMemGetInfo(&fr, &tot));
	EXPECT(fr == tot, "memory still in use after the context went: %zu of %zu", tot - fr, tot);
}

static void test_memory(const char*) {
	setup();
	size_t fr = 0, tot = 0;
	OK(cuMemGetInfo(&fr, &tot));
	EXPECT(tot == 1048576 && fr == tot, "free %zu total %zu", fr, tot);
	devptr a, b, c, d;
	OK(cuMemAlloc(&a, 600000));
	EXPECT(a % 256 == 0, "alignment of %llx", a);
	OK(cuMemGetInfo(&fr, &tot));
	EXPECT(fr == 1048576 - 600000, "free %zu", fr);
	EXPECT_RC(2, cuMemAlloc(&b, 500000));
	OK(cuMemAlloc(&b, 400000));
	EXPECT_RC(2, cuMemAlloc(&c, 48577));
	OK(cuMemAlloc(&c, 48576));
	OK(cuMemGetInfo(&fr, &tot));
	EXPECT(fr == 0, "free %zu", fr);
	OK(cuMemFree(c));
	EXPECT_RC(1, cuMemFree(c));      // double free
	EXPECT_RC(1, cuMemFree(b + 4));  // not an allocation's start
	EXPECT_RC(1, cuMemFree(0));
	EXPECT_RC(1, cuMemAlloc(&d, 0));
	OK(cuMemGetInfo(&fr, &tot));
	EXPECT(fr == 48576, "free %zu", fr);

	// Fresh memory reads as NaN.
	std::vector<float> f = download<float>(b, 100000);
	bool allnan = true;
	for (float x : f) allnan = allnan && isnan(x);
	EXPECT(allnan, "fresh allocation is not all NaN");

	// Copies and memsets must stay inside one allocation.
	std::vector<unsigned char> host(600001, 7);
	OK(cuMemcpyHtoD(b, host.data(), 400000));
	EXPECT_RC(1, cuMemcpyHtoD(b, host.data(), 400001));
	EXPECT_RC(1, cuMemcpyHtoD(b + 399999, host.data(), 2));
	EXPECT_RC(1, cuMemcpyHtoD(b - 1, host.data(), 1));
	EXPECT_RC(1, cuMemcpyDtoH(host.data(), a, 600001));
	OK(cuMemcpyDtoH(host.data(), a + 599999, 1));
	EXPECT_RC(1, cuMemcpyDtoD(a, b, 400001));
	OK(cuMemcpyDtoD(a + 100, b, 400000));
	EXPECT_RC(1, cuMemcpyDtoD(a + 200001, b, 400000));
	EXPECT_RC(1, cuMemcpyHtoD(c, host.data(), 4));  // freed
	OK(cuMemcpyHtoD(c, host.data(), 0));             // zero bytes: nothing to check
	EXPECT_RC(1, cuMemsetD32(b + 2, 0, 4));            // misaligned
	EXPECT_RC(1, cuMemsetD32(b, 0, 100001));
	OK(cuMemsetD32(b, 0x3f800000u, 100000));
	f = download<float>(b, 100000);
	bool allone = true;
	for (float x : f) allone = allone && x == 1.0f;
	EXPECT(allone, "memsetD32 of 1.0f");
	OK(cuMemsetD8(b + 1, 0xab, 3));
	std::vector<unsigned char> bytes = download<unsigned char>(b, 8);
	EXPECT(bytes[0] == 0 && bytes[1] == 0xab && bytes[3] == 0xab && bytes[4] == 0, "memsetD8 %x %x %x %x", bytes[0],
	       bytes[1], bytes[3], bytes[4]);
	EXPECT_RC(1, cuMemsetD8(b + 399999, 0, 2));

	// Streams: async copies run synchronously; unknown streams are rejected.
	handle s;
	OK(cuStreamCreate(&s, 0));
	OK(cuMemcpyHtoDAsync(b, host.data(), 16, s));
	OK(cuMemcpyDtoDAsync(a, b, 16, s));
	std::vector<unsigned char> back(16);
	OK(cuMemcpyDtoHAsync(back.data(), a, 16, s));
	OK(cuStreamSynchronize(s));
	EXPECT(memcmp(back.data(), host.data(), 16) == 0, "async round trip");
	OK(cuStreamDestroy(s));
	EXPECT_RC(400, cuStreamSynchronize(s));
	EXPECT_RC(400, cuMemcpyHtoDAsync(b, host.data(), 16, s));
	OK(cuMemFree(a));
	OK(cuMemFree(b));
	OK(cuMemGetInfo(&fr, &tot));
	EXPECT(fr == tot, "free %zu of %zu after freeing everything", fr, tot);
}

static void test_events(const char*) {
	setup();
	handle e0, e1, e2;
	OK(cuEventCreate(&e0, 0));
	OK(cuEventCreate(&e1, 0));
	OK(cuEventCreate(&e2, 2));  // CU_EVENT_DISABLE_TIMING
	float ms = -1;
	EXPECT_RC(400, cuEventElapsedTime(&ms, e0, e1));  // not recorded
	OK(cuEventRecord(e0, nullptr));
	std::this_thread::sleep_for(std::chrono::milliseconds(30));
	OK(cuEventRecord(e1, nullptr));
	OK(cuEventRecord(e2, nullptr));
	OK(cuEventSynchronize(e1));
	OK(cuEventElapsedTime(&ms, e0, e1));
	EXPECT(ms >= 25 && ms < 5000, "elapsed %f ms", ms);
	EXPECT_RC(400, cuEventElapsedTime(&ms, e0, e2));
	OK(cuEventDestroy(e0));
	EXPECT_RC(400, cuEventDestroy(e0));
	OK(cuEventDestroy(e1));
	OK(cuEventDestroy(e2));
}

static void test_vecadd(const char*) {
	setup();
	const int n = 1000;
	std::vector<float> a(n), b(n);
	for (int i = 0; i < n; i++) {
		a[i] = rnd();
		b[i] = rnd();
	}
	devptr da = upload(a), db = upload(b), dc = alloc<float>(n + 24);
	Args args;
	args.add(da).add(db).add(dc).add(n);
	OK(launch("vec_add", 8, 1, 1, 128, 1, 1, args));
	std::vector<float> c = download<float>(dc, n + 24);
	int bad = 0;
	for (int i = 0; i < n; i++) bad += c[i] != a[i] + b[i];
	EXPECT(bad == 0, "%d wrong sums", bad);
	EXPECT(isnan(c[n]) && isnan(c[n + 23]), "wrote past n");

	// The same through CU_LAUNCH_PARAM_BUFFER_POINTER: pointers, then int.
	OK(cuMemsetD32(dc, 0, n));
	struct {
		devptr a, b, c;
		int n;
	} packed = {da, db, dc, n};
	size_t size = sizeof packed;
	void* extra[] = {(void*)1, &packed, (void*)2, &size, (void*)0};
	OK(cuLaunchKernel(func("vec_add"), 8, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra));
	c = download<float>(dc, n);
	bad = 0;
	for (int i = 0; i < n; i++) bad += c[i] != a[i] + b[i];
	EXPECT(bad == 0, "%d wrong sums with packed parameters", bad);
	size = 8;
	EXPECT_RC(1, cuLaunchKernel(func("vec_add"), 8, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra));
}

static void test_scalars(const char*) {
	setup();
	const long long n = 1000;
	std::vector<float> x(n), y(n);
	for (int i = 0; i < n; i++) {
		x[i] = (float)i;
		y[i] = 1.0f;
	}
	devptr dx = upload(x), dy = upload(y);
	Args args;
	args.add(dy).add(dx).add(2.0f).add(n).add((unsigned long long)0xff0000000000000full).add(0.5).add((size_t)3).add(
	    (unsigned)0x6);
	OK(launch("axpy_grid_stride", 3, 1, 1, 64, 1, 1, args));
	std::vector<float> got = download<float>(dy, n);
	int bad = 0;
	for (int i = 0; i < n; i++) {
		float want = (float)((2.0f * x[i] + 1.0f) * 0.5) + 6.0f + 3.0f;
		if (got[i] != want) {
			if (bad < 3) fail("y[%d] = %g, want %g", i, got[i], want);
			bad++;
		}
	}
	EXPECT(bad == 0, "%d wrong", bad);
}

static void check_ids(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
	size_t nt = (size_t)bx * by * bz, total = nt * gx * gy * gz;
	devptr out = alloc<unsigned>(3 * total), visits = alloc<int>(total);
	OK(cuMemsetD32(visits, 0, total));
	Args args;
	args.add(out).add(visits);
	OK(launch("ids", gx, gy, gz, bx, by, bz, args));
	std::vector<unsigned> o = download<unsigned>(out, 3 * total);
	std::vector<int> v = download<int>(visits, total);
	int bad = 0;
	for (unsigned z = 0; z < gz; z++)
		for (unsigned y = 0; y < gy; y++)
			for (unsigned x = 0; x < gx; x++)
				for (unsigned tz = 0; tz < bz; tz++)
					for (unsigned ty = 0; ty < by; ty++)
						for (unsigned tx = 0; tx < bx; tx++) {
							size_t g = (x + gx * (y + gy * z)) * nt + tx + bx * (ty + by * tz);
							bool ok = v[g] == 1 && o[3 * g] == (x | y << 10 | z << 20) &&
							          o[3 * g + 1] == (tx | ty << 10 | tz << 20) &&
							          o[3 * g + 2] == (gx | gy << 10 | gz << 20);
							if (!ok && bad++ < 3)
								fail("grid %u,%u,%u block %u,%u,%u: thread %zu: visits %d ids %x %x %x", gx, gy, gz, bx,
								     by, bz, g, v[g], o[3 * g], o[3 * g + 1], o[3 * g + 2]);
						}
	OK(cuMemFree(out));
	OK(cuMemFree(visits));
}

static void test_grid(const char*) {
	setup();
	check_ids(3, 2, 2, 4, 3, 2);
	check_ids(5, 7, 1, 32, 2, 1);
	check_ids(1, 1, 3, 1, 1, 64);
	check_ids(300, 1, 1, 1, 1, 1);
	check_ids(2, 1, 1, 1024, 1, 1);
	check_ids(1, 600, 1, 7, 1, 1);
}

static void test_reduce(const char*) {
	setup();
	for (unsigned block : {1024u, 256u, 32u}) {
		const int n = 5000;
		unsigned grid = (n + block - 1) / block;
		std::vector<float> x(n);
		for (int i = 0; i < n; i++) x[i] = (float)(i % 17) - 8.0f;
		devptr dx = upload(x), dp = alloc<float>(grid);
		Args args;
		args.add(dx).add(dp).add(n);
		OK(launch("block_reduce", grid, 1, 1, block, 1, 1, args));
		std::vector<float> p = download<float>(dp, grid);
		for (unsigned b = 0; b < grid; b++) {
			double want = 0;
			for (unsigned i = b * block; i < (b + 1) * block && i < (unsigned)n; i++) want += x[i];
			EXPECT(p[b] == (float)want, "block %u of %u: %g, want %g", b, block, p[b], want);
		}
	}
}

static void test_softmax(const char*) {
	setup();
	const int rows = 6, cols = 1000;
	std::vector<float> x(rows * cols);
	for (auto& v : x) v = 8.0f * rnd();
	devptr dx = upload(x), dy = alloc<float>(rows * cols);
	for (unsigned block : {256u, 64u, 1024u}) {
		Args args;
		args.add(dx).add(dy).add(cols);
		OK(launch("row_softmax", rows, 1, 1, block, 1, 1, args));
		std::vector<float> y = download<float>(dy, rows * cols);
		for (int r = 0; r < rows; r++) {
			double m = -INFINITY, s = 0, sum = 0, maxerr = 0;
			for (int j = 0; j < cols; j++) m = fmax(m, x[r * cols + j]);
			for (int j = 0; j < cols; j++) s += exp(x[r * cols + j] - m);
			for (int j = 0; j < cols; j++) {
				double want = exp(x[r * cols + j] - m) / s;
				maxerr = fmax(maxerr, fabs(y[r * cols + j] - want) / want);
				sum += y[r * cols + j];
			}
			EXPECT(maxerr < 1e-5 && fabs(sum - 1) < 1e-4, "block %u row %d: max rel err %g, sum %g", block, r, maxerr, sum);
		}
	}
}

// kPoison stands for the emulator's poison in shfl_ref's answers: a lane
// reading a lane that does not exist gets 0xffffffff or 0x7f7f7f7f (the
// block's poison byte repeated).
static const long long kPoison = 1ll << 40;
static bool poison_ok(int got) { return (unsigned)got == 0xffffffffu || (unsigned)got == 0x7f7f7f7fu; }

// shfl_ref models PTX shfl.sync for lane of a warp whose lanes hold vals:
// a source outside the segment gives the lane's own value, one past the
// block's last thread (a lane that does not exist) kPoison.
static long long shfl_ref(const std::vector<int>& vals, unsigned base, unsigned nthreads, int lane, int mode, int b,
                          int width) {
	int segmask = (32 - width) & 31, cval = mode == 1 ? 0 : 31;
	int maxLane = (lane & segmask) | (cval & ~segmask), minLane = lane & segmask;
	int j;
	bool ok;
	if (mode == 0) {
		j = minLane | (b & ~segmask);
		ok = j <= maxLane;
	} else if (mode == 1) {
		j = lane - b;
		ok = j >= maxLane;
	} else if (mode == 2) {
		j = lane + b;
		ok = j <= maxLane;
	} else {
		j = lane ^ b;
		ok = j <= maxLane;
	}
	if (!ok) j = lane;
	if (base + j >= nthreads) return kPoison;
	return vals[base + j];
}

static void test_shuffle(const char*) {
	setup();
	int poisoned = 0;
	for (unsigned block : {64u, 48u, 32u}) {
		const unsigned grid = 2, n = grid * block;
		devptr out = alloc<int>(9 * n);
		Args args;
		args.add(out);
		OK(launch("shuffles", grid, 1, 1, block, 1, 1, args));
		std::vector<int> o = download<int>(out, 9 * n);
		std::vector<int> vals(n);
		for (unsigned t = 0; t < n; t++) vals[t] = (int)t * 10;
		std::vector<int> lanev(n), halves(n);
		for (unsigned i = 0; i < n; i++) {
			lanev[i] = (int)(i % block) & 31;
			float h = (float)lanev[i] + 0.5f;
			memcpy(&halves[i], &h, 4);
		}
		int bad = 0;
		for (unsigned t = 0; t < n; t++) {
			unsigned blk = t / block, tid = t % block, base = blk * block + (tid & ~31u);
			unsigned nthreads = blk * block + block;
			int lane = tid & 31;
			long long want[9] = {
			    shfl_ref(vals, base, nthreads, lane, 3, 1, 32), shfl_ref(vals, base, nthreads, lane, 3, 16, 8),
			    shfl_ref(vals, base, nthreads, lane, 2, 5, 32), shfl_ref(vals, base, nthreads, lane, 2, 5, 16),
			    shfl_ref(vals, base, nthreads, lane, 1, 3, 8),  shfl_ref(vals, base, nthreads, lane, 0, 7, 16),
			    0,
			    shfl_ref(lanev, base, nthreads, lane, 2, 1, 32), shfl_ref(halves, base, nthreads, lane, 3, 31, 32)};
			unsigned lanes = nthreads - base >= 32 ? 32 : nthreads - base;
			unsigned ballot = 0;
			for (unsigned l = 0; l < lanes; l++)
				if (l % 3 == 0) ballot |= 1u << l;
			want[6] = (int)ballot;
			for (int k = 0; k < 9; k++) {
				int got = o[9 * t + k];
				bool ok = want[k] == kPoison ? poison_ok(got) : got == want[k];
				poisoned += want[k] == kPoison;
				if (!ok && bad++ < 5)
					fail("block %u thread %u: shuffle %d = %d (%#x), want %lld", block, t, k, got, got, want[k]);
			}
		}
		EXPECT(bad == 0, "%d wrong shuffles (block %u)", bad, block);
		OK(cuMemFree(out));
	}
	EXPECT(poisoned > 0, "no shuffle read a lane that does not exist");
	// Check the model itself against values worked out by hand.
	std::vector<int> v(32);
	for (int i = 0; i < 32; i++) v[i] = i;
	EXPECT(shfl_ref(v, 0, 32, 3, 2, 5, 16) == 8 && shfl_ref(v, 0, 32, 12, 2, 5, 16) == 12, "down model");
	EXPECT(shfl_ref(v, 0, 32, 3, 3, 16, 8) == 3 && shfl_ref(v, 0, 32, 19, 3, 16, 8) == 3, "xor model");
	EXPECT(shfl_ref(v, 0, 32, 9, 1, 3, 8) == 9 && shfl_ref(v, 0, 32, 12, 1, 3, 8) == 9, "up model");
	EXPECT(shfl_ref(v, 0, 32, 20, 0, 7, 16) == 23, "idx model");
	EXPECT(shfl_ref(v, 0, 16, 3, 3, 16, 32) == kPoison, "a lane that does not exist");
}

static void test_warp_reduce(const char*) {
	setup();
	const unsigned block = 256, grid = 2, n = block * grid;
	std::vector<float> x(n);
	for (unsigned i = 0; i < n; i++) x[i] = (float)((i * 37) % 101) - 50.0f;
	devptr dx = upload(x), dxor = alloc<float>(n), ddown = alloc<float>(n / 32);
	Args args;
	args.add(dx).add(dxor).add(ddown);
	OK(launch("warp_reduce", grid, 1, 1, block, 1, 1, args));
	std::vector<float> a = download<float>(dxor, n), b = download<float>(ddown, n / 32);
	for (unsigned w = 0; w < n / 32; w++) {
		float want = 0;
		for (unsigned l = 0; l < 32; l++) want += x[w * 32 + l];
		EXPECT(b[w] == want, "warp %u: down sum %g, want %g", w, b[w], want);
		for (unsigned l = 0; l < 32; l++) EXPECT(a[w * 32 + l] == want, "warp %u lane %u: xor sum %g", w, l, a[w * 32 + l]);
	}
}

static void test_atomics(const char*) {
	setup();
	const int n = 50000;
	devptr f = alloc<float>(1), i = alloc<int>(1), u = alloc<unsigned>(1), m = alloc<int>(1);
	OK(cuMemsetD32(f, 0, 1));
	OK(cuMemsetD32(i, 0, 1));
	OK(cuMemsetD32(u, 0, 1));
	OK(cuMemsetD32(m, 0x80000000u, 1));
	Args args;
	args.add(f).add(i).add(u).add(m).add(n);
	OK(launch("atomics", (n + 255) / 256, 1, 1, 256, 1, 1, args));
	float fs = download<float>(f, 1)[0];
	int is = download<int>(i, 1)[0], ms = download<int>(m, 1)[0];
	unsigned us = download<unsigned>(u, 1)[0];
	int wantmax = 0;
	for (long long k = 0; k < n; k++) wantmax = std::max(wantmax, (int)((k * 7919) % 100003));
	EXPECT(fs == (float)n, "float sum %g", fs);
	EXPECT(is == (long long)n * (n - 1) / 2, "int sum %d", is);
	EXPECT(us == 2u * n, "unsigned sum %u", us);
	EXPECT(ms == wantmax, "max %d, want %d", ms, wantmax);
}

static void test_early_exit(const char*) {
	setup();
	const int n = 100;
	devptr y = alloc<float>(256);
	Args args;
	args.add(y).add(n);
	OK(launch("early_exit", 3, 1, 1, 256, 1, 1, args));
	std::vector<float> v = download<float>(y, 256);
	for (int i = 0; i < n; i++) EXPECT(v[i] == (float)((i + 1) % n), "y[%d] = %g", i, v[i]);
	EXPECT(isnan(v[n]), "y[n] written");
}

static void test_missing_sync(const char*) {
	setup();
	const unsigned n = 64, blocks = 4;
	devptr out = alloc<int>(n * blocks);
	Args args;
	args.add(out);
	OK(launch("missing_sync", blocks, 1, 1, n, 1, 1, args));
	std::vector<int> o = download<int>(out, n * blocks);
	for (unsigned b = 0; b < blocks; b++) {
		int wrong = 0;
		for (unsigned t = 0; t < n; t++) wrong += o[b * n + t] != (int)(b * 1000 + (t + 1) % n);
		EXPECT(wrong > 0, "block %u: a missing __syncthreads went unnoticed", b);
	}
}

static void test_misc_kernels(const char*) {
	setup();
	EXPECT_RC(0, cuLaunchKernel(func("no_params"), 2, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
	devptr out = alloc<int>(64);
	Args a1;
	a1.add(out);
	OK(launch("in_namespace", 1, 1, 1, 64, 1, 1, a1));
	std::vector<int> o = download<int>(out, 64);
	for (int i = 0; i < 64; i++) EXPECT(o[i] == i + 1, "in_namespace[%d] = %d", i, o[i]);

	const int n = 300;
	std::vector<float> x(n);
	for (int i = 0; i < n; i++) x[i] = 10.0f * rnd();
	devptr dx = upload(x), dy = alloc<float>(n);
	Args a2;
	a2.add(dx).add(dy).add(n);
	OK(launch("unary_tanh", 3, 1, 1, 128, 1, 1, a2));
	std::vector<float> y = download<float>(dy, n);
	for (int i = 0; i < n; i++) EXPECT(y[i] == tanhf(x[i]), "tanh(%g) = %g", x[i], y[i]);
	OK(launch("unary_misc", 3, 1, 1, 128, 1, 1, a2));
	y = download<float>(dy, n);
	for (int i = 0; i < n; i++) {
		float v = x[i];
		float want = 1.0f / sqrtf(fabsf(v) + 1.f) + v / 3.f + fmaxf(fminf(v, 2.f), -2.f) +
		             (float)std::max(3, std::min(7, (int)v));
		EXPECT(y[i] == want, "misc(%g) = %g, want %g", v, y[i], want);
	}

	std::vector<unsigned short> hb(n);
	for (int i = 0; i < n; i++) hb[i] = bf16(rnd() * 100.0f);
	devptr bx = upload(hb), by = alloc<unsigned short>(n);
	Args a3;
	a3.add(bx).add(by).add(n);
	OK(launch("scale_bf16", 2, 1, 1, 256, 1, 1, a3));
	std::vector<unsigned short> got = download<unsigned short>(by, n);
	for (int i = 0; i < n; i++) EXPECT(got[i] == bf16(2.0f * from_bf16(hb[i])), "bf16 %d", i);

	devptr sc = alloc<int>(96);
	Args a4;
	a4.add(sc);
	OK(launch("sync_count", 1, 1, 1, 96, 1, 1, a4));
	o = download<int>(sc, 96);
	for (int i = 0; i < 96; i++) EXPECT(o[i] == 3211, "sync_count[%d] = %d", i, o[i]);
}

// fma: a*b+c in a kernel is fused exactly when the library was built with
// GDROTRAIN_EMU_FMA=1; the _rn intrinsics never are; fmaf always is.
static void test_fma(const char*) {
	setup();
	const float a = 1.0f + ldexpf(1, -12), b = a, c = -1.0f;
	const float fused = ldexpf(1, -11) + ldexpf(1, -24), separate = ldexpf(1, -11);
	EXPECT(fmaf(a, b, c) == fused && a * b + c == separate, "driver arithmetic");
	devptr out = alloc<float>(5);
	Args args;
	args.add(out).add(a).add(b).add(c);
	OK(launch("mad_plain", 1, 1, 1, 1, 1, 1, args));
	OK(launch("mad_forms", 1, 1, 1, 1, 1, 1, args));
	std::vector<float> got = download<float>(out, 5);
	EXPECT(got[0] == (fma_build ? fused : separate), "a*b+c = %a (FMA build: %d)", got[0], fma_build);
	EXPECT(got[1] == separate, "__fadd_rn(__fmul_rn(a, b), c) = %a", got[1]);
	EXPECT(got[2] == separate, "c + __fmul_rn(a, b) = %a", got[2]);
	EXPECT(got[3] == fused, "__fmaf_rn = %a", got[3]);
	EXPECT(got[4] == fused, "fmaf = %a", got[4]);
}

static void test_launch_errors(const char*) {
	setup();
	handle f;
	for (const char* name : {"nope", "mangled", "declared_only", "templated", "_Z7mangledPi"})
		EXPECT_RC(500, cuModuleGetFunction(&f, g_module, name));
	handle m2;
	EXPECT_RC(1, cuModuleLoadData(&m2, nullptr));
	f = func("vec_add");
	devptr d = alloc<float>(16);
	int n = 16;
	void* params[] = {&d, &d, &d, &n};
	EXPECT_RC(1, cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, nullptr, params, nullptr));
	EXPECT_RC(1, cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, nullptr, params, nullptr));
	EXPECT_RC(1, cuLaunchKernel(f, 1, 1, 1, 1, 1, 65, 0, nullptr, params, nullptr));
	EXPECT_RC(1, cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr));
	EXPECT_RC(1, cuLaunchKernel(f, 1, 1, 1, 32, 0, 1, 0, nullptr, params, nullptr));
	EXPECT_RC(1, cuLaunchKernel(f, 1, 65536, 1, 32, 1, 1, 0, nullptr, params, nullptr));
	EXPECT_RC(1, cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
	EXPECT_RC(1, cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 65536, nullptr, params, nullptr));
	OK(cuFuncSetAttribute(f, 8, 65536));
	OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 65536, nullptr, params, nullptr));
	EXPECT_RC(1, cuFuncSetAttribute(f, 8, 300000));
	EXPECT_RC(400, cuLaunchKernel((handle)&n, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr));
	EXPECT_RC(400, cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, (handle)&n, params, nullptr));
	// A second module finds the same kernels; unloading one invalidates
	// only its functions.
	OK(cuModuleLoadData(&m2, "x"));
	handle f2;
	OK(cuModuleGetFunction(&f2, m2, "vec_add"));
	OK(cuModuleUnload(m2));
	EXPECT_RC(400, cuLaunchKernel(f2, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr));
	EXPECT_RC(400, cuModuleUnload(m2));
	EXPECT_RC(400, cuModuleGetFunction(&f2, m2, "vec_add"));
	OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr));
}

// ---- cuBLAS ----

enum { N = 0, T = 1, R32F = 0, R16BF = 14, C32F = 68, C16BF = 75, CTF32 = 77 };

struct Mat {  // column-major rows x cols, leading dimension ld, fp32 or bf16
	int rows, cols, ld, type;
	std::vector<float> v;  // ld * cols values as the device holds them
	Mat(int r, int c, int l, int t) : rows(r), cols(c), ld(l), type(t), v((size_t)l * (c > 0 ? c : 1)) {
		for (auto& x : v) x = type == R16BF ? from_bf16(bf16(rnd())) : rnd();
	}
	float at(int i, int j) const { return v[(size_t)i + (size_t)j * ld]; }
	size_t esize() const { return type == R16BF ? 2 : 4; }
	devptr upload() const {
		if (type == R32F) return ::upload(v);
		std::vector<unsigned short> h(v.size());
		for (size_t i = 0; i < v.size(); i++) h[i] = bf16(v[i]);
		return ::upload(h);
	}
	std::vector<float> download(devptr p) const {
		if (type == R32F) return ::download<float>(p, v.size());
		std::vector<unsigned short> h = ::download<unsigned short>(p, v.size());
		std::vector<float> r(h.size());
		for (size_t i = 0; i < h.size(); i++) r[i] = from_bf16(h[i]);
		return r;
	}
};

// fast16bf_tf32 mirrors GDROTRAIN_EMU_FAST16BF=tf32 in the tests that set it.
static bool fast16bf_tf32 = false;

// ref computes alpha*op(A)*op(B) + beta*C the way the emulator documents:
// inputs rounded per compute type, products summed in float in order with
// mad (fused in an FMA build), the epilogue mad(alpha, sum, beta*C).
// exact=true gives instead the unrounded inputs' product summed in double.
static std::vector<float> ref(int ta, int tb, int m, int n, int k, float alpha, const Mat& A, const Mat& B, float beta,
                              const Mat& C, int compute, bool exact = false) {
	std::vector<float> out = C.v;
	auto rnd_in = [&](float x) {
		if (exact) return x;
		if (compute == C16BF) return round_bits(x, fast16bf_tf32 ? 13 : 16);
		if (compute == CTF32) return round_bits(x, 13);
		return x;
	};
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float acc = 0;
			double dacc = 0;
			for (int p = 0; p < k; p++) {
				float a = ta == N ? A.at(i, p) : A.at(p, i);
				float b = tb == N ? B.at(p, j) : B.at(j, p);
				acc = mad(rnd_in(a), rnd_in(b), acc);
				dacc += (double)a * (double)b;
			}
			float f = beta != 0 ? mad(alpha, acc, beta * C.at(i, j)) : alpha * acc;
			if (exact) f = (float)((double)alpha * dacc + (double)beta * (double)C.at(i, j));
			out[(size_t)i + (size_t)j * C.ld] = C.type == R16BF ? from_bf16(bf16(f)) : f;
		}
	return out;
}

static void gemm_case(handle h, int ta, int tb, int m, int n, int k, int at, int ct, int compute, float beta,
                      const char* what) {
	int ra = ta == N ? m : k, ca = ta == N ? k : m, rb = tb == N ? k : n, cb = tb == N ? n : k;
	Mat A(ra, ca, ra + 3, at), B(rb, cb, rb + 2, at), C(m, n, m + 4, ct);
	devptr dA = A.upload(), dB = B.upload(), dC = C.upload();
	if (beta == 0) OK(cuMemsetD8(dC, 0xff, C.v.size() * C.esize()));  // NaN must not leak in
	float alpha = 1.5f;
	OK(cublasGemmEx(h, ta, tb, m, n, k, &alpha, (void*)dA, at, A.ld, (void*)dB, at, B.ld, &beta, (void*)dC, ct, C.ld,
	                compute, -1));
	std::vector<float> got = C.download(dC);
	std::vector<float> want = ref(ta, tb, m, n, k, alpha, A, B, beta, C, compute);
	std::vector<float> exact = ref(ta, tb, m, n, k, alpha, A, B, beta, C, compute, true);
	int bad = 0;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			size_t idx = (size_t)i + (size_t)j * C.ld;
			if (memcmp(&got[idx], &want[idx], 4) != 0 && bad++ < 3)
				fail("%s ta=%d tb=%d %dx%dx%d: C(%d,%d) = %.9g, want %.9g", what, ta, tb, m, n, k, i, j, got[idx],
				     want[idx]);
			// Reduced precision stays within its tolerance of the exact product.
			double tol = (compute == C16BF && !fast16bf_tf32) || ct == R16BF ? 2e-2
			             : compute == CTF32 || compute == C16BF      ? 4e-3
			                                                         : 1e-6;
			if (fabs(got[idx] - exact[idx]) > tol * (1 + fabs(exact[idx])) * sqrt((double)k) && bad++ < 3)
				fail("%s: C(%d,%d) = %g, exact %g", what, i, j, got[idx], exact[idx]);
		}
	// Rows between m and ldc are not touched.
	for (int j = 0; j < n; j++)
		for (int i = m; i < C.ld; i++) {
			size_t idx = (size_t)i + (size_t)j * C.ld;
			bool same = beta == 0 ? isnan(got[idx]) : got[idx] == C.v[idx];
			if (!same && bad++ < 3) fail("%s: padding C(%d,%d) changed", what, i, j);
		}
	EXPECT(bad == 0, "%s ta=%d tb=%d: %d wrong", what, ta, tb, bad);
	OK(cuMemFree(dA));
	OK(cuMemFree(dB));
	OK(cuMemFree(dC));
}

static void test_gemm(const char*) {
	setup();
	handle h;
	OK(cublasCreate(&h));
	int version = 0;
	OK(cublasGetVersion(h, &version));
	EXPECT(version == 130000, "version %d", version);
	OK(cublasSetStream(h, nullptr));
	OK(cublasSetMathMode(h, 0));
	for (int ta : {N, T})
		for (int tb : {N, T}) {
			gemm_case(h, ta, tb, 5, 7, 3, R32F, R32F, C32F, 0.5f, "fp32");
			gemm_case(h, ta, tb, 6, 4, 9, R32F, R32F, C32F, 0.0f, "fp32 beta=0");
			gemm_case(h, ta, tb, 7, 5, 33, R32F, R32F, C16BF, 0.25f, "fast-bf16");
			gemm_case(h, ta, tb, 3, 8, 17, R32F, R32F, CTF32, 0.0f, "fast-tf32");
			gemm_case(h, ta, tb, 9, 6, 20, R16BF, R16BF, C32F, 0.5f, "bf16 in/out");
			gemm_case(h, ta, tb, 4, 5, 6, R16BF, R32F, C32F, 0.0f, "bf16 in fp32 out");
		}
	gemm_case(h, T, N, 70, 90, 400, R32F, R32F, C32F, 1.0f, "large (threaded)");
	gemm_case(h, N, N, 1, 1, 1, R32F, R32F, C32F, 0.0f, "1x1x1");
	gemm_case(h, N, T, 4, 3, 0, R32F, R32F, C32F, 0.5f, "k=0");

	// The sum is a float: 1 + 2^-24 + 2^-24 stays 1 in order (a double sum
	// would give 1 + 2^-23).
	{
		Mat A(1, 3, 1, R32F), B(3, 1, 3, R32F), C(1, 1, 1, R32F);
		A.v = {1.0f, 1.0f, 1.0f};
		B.v = {1.0f, ldexpf(1, -24), ldexpf(1, -24)};
		devptr dA = A.upload(), dB = B.upload(), dC = C.upload();
		float alpha = 1, beta = 0;
		OK(cublasGemmEx(h, N, N, 1, 1, 3, &alpha, (void*)dA, R32F, 1, (void*)dB, R32F, 3, &beta, (void*)dC, R32F, 1,
		                C32F, -1));
		float got = C.download(dC)[0];
		EXPECT(got == 1.0f, "float accumulation: got 1 + %g", got - 1.0f);
	}

	// GDROTRAIN_EMU_FAST16BF=tf32 (read at each call) makes FAST_16BF round
	// to tf32; anything but bf16 or tf32 is refused.
	setenv("GDROTRAIN_EMU_FAST16BF", "tf32", 1);
	fast16bf_tf32 = true;
	for (int ta : {N, T})
		for (int tb : {N, T}) gemm_case(h, ta, tb, 7, 5, 33, R32F, R32F, C16BF, 0.25f, "fast-bf16 as tf32");
	{
		Mat A(4, 40, 4, R32F), B(40, 3, 40, R32F), C(4, 3, 4, R32F);
		devptr dA = A.upload(), dB = B.upload(), dC = C.upload();
		float alpha = 1, beta = 0;
		OK(cublasGemmEx(h, N, N, 4, 3, 40, &alpha, (void*)dA, R32F, 4, (void*)dB, R32F, 40, &beta, (void*)dC, R32F, 4,
		                C16BF, -1));
		std::vector<float> got = C.download(dC), want = ref(N, N, 4, 3, 40, 1, A, B, 0, C, CTF32);
		EXPECT(got == want, "FAST_16BF with GDROTRAIN_EMU_FAST16BF=tf32 is not FAST_TF32");
		setenv("GDROTRAIN_EMU_FAST16BF", "fp16", 1);
		EXPECT_RC(7, cublasGemmEx(h, N, N, 4, 3, 40, &alpha, (void*)dA, R32F, 4, (void*)dB, R32F, 40, &beta, (void*)dC,
		                          R32F, 4, C16BF, -1));
		setenv("GDROTRAIN_EMU_FAST16BF", "bf16", 1);
		fast16bf_tf32 = false;
		gemm_case(h, N, N, 7, 5, 33, R32F, R32F, C16BF, 0.25f, "fast-bf16 (explicit)");
		unsetenv("GDROTRAIN_EMU_FAST16BF");
	}

	// Math mode TF32 makes plain fp32 GEMMs round to tf32.
	OK(cublasSetMathMode(h, 3));
	{
		Mat A(4, 40, 4, R32F), B(40, 3, 40, R32F), C(4, 3, 4, R32F);
		devptr dA = A.upload(), dB = B.upload(), dC = C.upload();
		float alpha = 1, beta = 0;
		OK(cublasGemmEx(h, N, N, 4, 3, 40, &alpha, (void*)dA, R32F, 4, (void*)dB, R32F, 40, &beta, (void*)dC, R32F, 4,
		                C32F, -1));
		std::vector<float> got = C.download(dC), want = ref(N, N, 4, 3, 40, 1, A, B, 0, C, CTF32);
		EXPECT(got == want, "TF32 math mode");
	}
	OK(cublasSetMathMode(h, 0));

	// GDROTRAIN_EMU_GEMM_ORDER=shape: K split into slices by m·n (8 up to
	// 64 elements, 2 up to 16384 here), summed in order and added last to
	// first; so a row alone (m = 1) differs from the same row among 200.
	{
		const int m = 200, n = 8, k = 256;
		Mat A(k, m, k, R32F), B(k, n, k, R32F), C(m, n, m, R32F), C1(1, n, 1, R32F);
		devptr dA = A.upload(), dB = B.upload(), dC = C.upload(), dC1 = C1.upload();
		float alpha = 1, beta = 0;
		// sliced is element (i, j) of op(A)·B summed in s slices.
		auto sliced = [&](int i, int j, int s) {
			float acc = 0;
			for (int q = s - 1; q >= 0; q--) {
				float part = 0;
				for (int p = k * q / s; p < k * (q + 1) / s; p++) part = mad(A.at(p, i), B.at(p, j), part);
				acc = q == s - 1 ? part : part + acc;
			}
			return acc;
		};
		setenv("GDROTRAIN_EMU_GEMM_ORDER", "shape", 1);
		OK(cublasGemmEx(h, T, N, m, n, k, &alpha, (void*)dA, R32F, k, (void*)dB, R32F, k, &beta, (void*)dC, R32F, m,
		                C32F, -1));
		std::vector<float> full = C.download(dC);
		int differ = 0, bad = 0;
		for (int i = 0; i < 10; i++) {
			OK(cublasGemmEx(h, T, N, 1, n, k, &alpha, (void*)(dA + (devptr)i * k * 4), R32F, k, (void*)dB, R32F, k,
			                &beta, (void*)dC1, R32F, 1, C32F, -1));
			std::vector<float> row = C1.download(dC1);
			for (int j = 0; j < n; j++) {
				float f = full[(size_t)i + (size_t)j * m], w1 = sliced(i, j, 8), wf = sliced(i, j, 2);
				if ((memcmp(&row[j], &w1, 4) != 0 || memcmp(&f, &wf, 4) != 0) && bad++ < 3)
					fail("shape order C(%d,%d): alone %.9g (want %.9g), among %d %.9g (want %.9g)", i, j, row[j], w1, m,
					     f, wf);
				differ += memcmp(&row[j], &f, 4) != 0;
			}
		}
		EXPECT(bad == 0 && differ > 0, "shape order: %d wrong, %d of %d elements differ alone", bad, differ, 10 * n);
		setenv("GDROTRAIN_EMU_GEMM_ORDER", "in", 1);
		OK(cublasGemmEx(h, T, N, 1, n, k, &alpha, (void*)dA, R32F, k, (void*)dB, R32F, k, &beta, (void*)dC1, R32F, 1,
		                C32F, -1));
		std::vector<float> row = C1.download(dC1);
		for (int j = 0; j < n; j++) EXPECT(row[j] == sliced(0, j, 1), "order in: C(0,%d) = %.9g", j, row[j]);
		setenv("GDROTRAIN_EMU_GEMM_ORDER", "random", 1);
		EXPECT_RC(7, cublasGemmEx(h, T, N, 1, n, k, &alpha, (void*)dA, R32F, k, (void*)dB, R32F, k, &beta, (void*)dC1,
		                          R32F, 1, C32F, -1));
		unsetenv("GDROTRAIN_EMU_GEMM_ORDER");
		OK(cuMemFree(dA));
		OK(cuMemFree(dB));
		OK(cuMemFree(dC));
		OK(cuMemFree(dC1));
	}

	// Strided batches.
	{
		const int m = 5, n = 4, k = 6, batch = 3;
		const long long sA = m * k + 7, sB = k * n + 3, sC = m * n + 5;
		std::vector<Mat> As, Bs, Cs;
		std::vector<float> ha(sA * batch, NAN), hb(sB * batch, NAN), hc(sC * batch, 0);
		for (int b = 0; b < batch; b++) {
			As.emplace_back(m, k, m, R32F);
			Bs.emplace_back(n, k, n, R32F);  // op T
			Cs.emplace_back(m, n, m, R32F);
			std::copy(As[b].v.begin(), As[b].v.end(), ha.begin() + b * sA);
			std::copy(Bs[b].v.begin(), Bs[b].v.end(), hb.begin() + b * sB);
			std::copy(Cs[b].v.begin(), Cs[b].v.end(), hc.begin() + b * sC);
		}
		devptr dA = upload(ha), dB = upload(hb), dC = upload(hc);
		float alpha = 0.75f, beta = 2.0f;
		OK(cublasGemmStridedBatchedEx(h, N, T, m, n, k, &alpha, (void*)dA, R32F, m, sA, (void*)dB, R32F, n, sB, &beta,
		                              (void*)dC, R32F, m, sC, batch, C32F, -1));
		std::vector<float> got = download<float>(dC, sC * batch);
		for (int b = 0; b < batch; b++) {
			std::vector<float> want = ref(N, T, m, n, k, alpha, As[b], Bs[b], beta, Cs[b], C32F);
			EXPECT(std::equal(want.begin(), want.end(), got.begin() + b * sC), "batch %d", b);
		}
		EXPECT_RC(13, cublasGemmStridedBatchedEx(h, N, T, m, n, k, &alpha, (void*)dA, R32F, m, sA, (void*)dB, R32F, n, sB,
		                                         &beta, (void*)dC, R32F, m, sC, batch + 1, C32F, -1));
		EXPECT_RC(7, cublasGemmStridedBatchedEx(h, N, T, m, n, k, &alpha, (void*)dA, R32F, m, sA, (void*)dB, R32F, n, sB,
		                                        &beta, (void*)dC, R32F, m, sC, -1, C32F, -1));
		OK(cublasGemmStridedBatchedEx(h, N, T, m, n, k, &alpha, (void*)dA, R32F, m, sA, (void*)dB, R32F, n, sB, &beta,
		                              (void*)dC, R32F, m, sC, 0, C32F, -1));
	}

	// Argument errors.
	devptr dA = alloc<float>(64), dB = alloc<float>(64), dC = alloc<float>(64);
	float one = 1, zero = 0;
	auto g = [&](int ta, int tb, int m, int n, int k, devptr a, int at, int lda, devptr b, int ldb, devptr c, int ct,
	             int ldc, int compute) {
		return cublasGemmEx(h, ta, tb, m, n, k, &one, (void*)a, at, lda, (void*)b, at, ldb, &zero, (void*)c, ct, ldc,
		                    compute, -1);
	};
	OK(g(N, N, 4, 4, 4, dA, R32F, 4, dB, 4, dC, R32F, 4, C32F));
	EXPECT_RC(7, g(N, N, 4, 4, 4, dA, R32F, 3, dB, 4, dC, R32F, 4, C32F));  // lda < m
	EXPECT_RC(7, g(T, N, 4, 4, 5, dA, R32F, 4, dB, 5, dC, R32F, 4, C32F));  // lda < k for op T
	EXPECT_RC(7, g(N, T, 4, 5, 4, dA, R32F, 4, dB, 4, dC, R32F, 4, C32F));  // ldb < n for op T
	EXPECT_RC(7, g(N, N, 4, 4, 4, dA, R32F, 4, dB, 4, dC, R32F, 3, C32F));  // ldc < m
	EXPECT_RC(7, g(N, N, -1, 4, 4, dA, R32F, 4, dB, 4, dC, R32F, 4, C32F));
	EXPECT_RC(7, g(N, N, 4, 4, 4, dA, 2, 4, dB, 4, dC, R32F, 4, C32F));  // CUDA_R_16F
	EXPECT_RC(7, g(3, N, 4, 4, 4, dA, R32F, 4, dB, 4, dC, R32F, 4, C32F));
	EXPECT_RC(15, g(N, N, 4, 4, 4, dA, R32F, 4, dB, 4, dC, R32F, 4, 0));
	EXPECT_RC(15, g(N, N, 4, 4, 4, dA, R16BF, 4, dB, 4, dC, R32F, 4, C16BF));
	EXPECT_RC(13, g(N, N, 9, 8, 8, dA, R32F, 9, dB, 8, dC, R32F, 9, C32F));  // A spans 72 floats of 64
	EXPECT_RC(13, g(N, N, 4, 4, 4, dA + 4, R32F, 64, dB, 4, dC, R32F, 4, C32F));
	EXPECT_RC(13, g(N, N, 4, 4, 4, dA, R32F, 4, dB, 4, dC + 256, R32F, 4, C32F));
	OK(g(N, N, 0, 4, 4, 0, R32F, 4, 0, 4, 0, R32F, 4, C32F));  // nothing to do
	EXPECT_RC(7, cublasGemmEx(h, N, N, 4, 4, 4, nullptr, (void*)dA, R32F, 4, (void*)dB, R32F, 4, &zero, (void*)dC, R32F,
	                          4, C32F, -1));
	EXPECT_RC(1, cublasGemmEx(nullptr, N, N, 4, 4, 4, &one, (void*)dA, R32F, 4, (void*)dB, R32F, 4, &zero, (void*)dC,
	                          R32F, 4, C32F, -1));
	OK(cublasDestroy(h));
	EXPECT_RC(1, cublasDestroy(h));
	EXPECT_RC(1, g(N, N, 4, 4, 4, dA, R32F, 4, dB, 4, dC, R32F, 4, C32F));
}

// fault: GDROTRAIN_EMU_FAULT, set in the process after the device is open
// and read at each launch, skips the kernels it names (their output keeps
// what it held) and perturbs C(0,0) of every GEMM by 1 + |C(0,0)|.
static void test_fault(const char*) {
	setup();
	const int n = 300;
	std::vector<float> a(n), b(n);
	for (int i = 0; i < n; i++) {
		a[i] = rnd();
		b[i] = rnd();
	}
	devptr da = upload(a), db = upload(b), dc = alloc<float>(n);
	Args args;
	args.add(da).add(db).add(dc).add(n);
	auto sums_ok = [&] {
		std::vector<float> c = download<float>(dc, n);
		for (int i = 0; i < n; i++)
			if (c[i] != a[i] + b[i]) return false;
		return true;
	};
	OK(launch("vec_add", 3, 1, 1, 128, 1, 1, args));
	EXPECT(sums_ok(), "vec_add before the fault");

	OK(cuMemsetD32(dc, 0x40490fdb, n));  // pi
	setenv("GDROTRAIN_EMU_FAULT", "nope, vec_add,gemmx", 1);
	OK(launch("vec_add", 3, 1, 1, 128, 1, 1, args));
	std::vector<float> c = download<float>(dc, n);
	int kept = 0;
	for (int i = 0; i < n; i++) kept += f2u(c[i]) == 0x40490fdbu;
	EXPECT(kept == n, "faulted vec_add changed %d of %d outputs", n - kept, n);
	// The launch is still checked.
	EXPECT_RC(1, launch("vec_add", 3, 1, 1, 2048, 1, 1, args));
	// Other kernels run; names match whole.
	devptr sc = alloc<int>(96);
	Args a4;
	a4.add(sc);
	OK(launch("sync_count", 1, 1, 1, 96, 1, 1, a4));
	EXPECT(download<int>(sc, 96)[5] == 3211, "sync_count under an unrelated fault");
	setenv("GDROTRAIN_EMU_FAULT", "vec_ad,vec_add_,ec_add", 1);
	OK(launch("vec_add", 3, 1, 1, 128, 1, 1, args));
	EXPECT(sums_ok(), "vec_add faulted by a partial name");
	OK(cuMemsetD32(dc, 0, n));
	unsetenv("GDROTRAIN_EMU_FAULT");
	OK(launch("vec_add", 3, 1, 1, 128, 1, 1, args));
	EXPECT(sums_ok(), "vec_add after the fault is lifted");

	handle h;
	OK(cublasCreate(&h));
	for (int ct : {R32F, R16BF}) {
		int at = ct;
		Mat A(6, 9, 6, at), B(9, 5, 9, at), C(6, 5, 6, ct);
		devptr dA = A.upload(), dB = B.upload(), dC = C.upload();
		float alpha = 1, beta = 0.5f;
		std::vector<float> want = ref(N, N, 6, 5, 9, alpha, A, B, beta, C, C32F);
		setenv("GDROTRAIN_EMU_FAULT", "gemm", 1);
		OK(cublasGemmEx(h, N, N, 6, 5, 9, &alpha, (void*)dA, at, 6, (void*)dB, at, 9, &beta, (void*)dC, ct, 6, C32F, -1));
		std::vector<float> got = C.download(dC);
		float w0 = want[0] + 1.0f + fabsf(want[0]);
		if (ct == R16BF) w0 = from_bf16(bf16(w0));
		EXPECT(got[0] == w0 && fabsf(got[0] - want[0]) >= 1.0f, "faulted C(0,0) = %g, correct %g", got[0], want[0]);
		EXPECT(std::equal(got.begin() + 1, got.end(), want.begin() + 1), "faulted GEMM changed more than C(0,0)");
		unsetenv("GDROTRAIN_EMU_FAULT");
		dC = C.upload();
		OK(cublasGemmEx(h, N, N, 6, 5, 9, &alpha, (void*)dA, at, 6, (void*)dB, at, 9, &beta, (void*)dC, ct, 6, C32F, -1));
		EXPECT(C.download(dC) == want, "GEMM after the fault is lifted");
	}
	// Strided batches: every matrix of the batch.
	{
		const int m = 3, k = 4, batch = 3;
		std::vector<float> ha(m * k * batch, 0.5f), hb(k * batch, 0.25f);
		devptr dA = upload(ha), dB = upload(hb), dC = alloc<float>(m * batch);
		float alpha = 1, beta = 0;
		setenv("GDROTRAIN_EMU_FAULT", "gemm", 1);
		OK(cublasGemmStridedBatchedEx(h, N, N, m, 1, k, &alpha, (void*)dA, R32F, m, m * k, (void*)dB, R32F, k, k, &beta,
		                              (void*)dC, R32F, m, m, batch, C32F, -1));
		unsetenv("GDROTRAIN_EMU_FAULT");
		std::vector<float> got = download<float>(dC, m * batch);
		for (int b2 = 0; b2 < batch; b2++)
			for (int i = 0; i < m; i++) {
				float want = i == 0 ? 0.5f + 1.0f + 0.5f : 0.5f;
				EXPECT(got[b2 * m + i] == want, "batch %d C(%d) = %g, want %g", b2, i, got[b2 * m + i], want);
			}
	}
	OK(cublasDestroy(h));
}

// ---- NVRTC ----

static std::string prog_string(handle p, int (*size)(handle, size_t*), int (*get)(handle, char*)) {
	size_t n = 0;
	if (size(p, &n) != 0) return "<error>";
	std::string s(n, '?');
	if (get(p, &s[0]) != 0) return "<error>";
	return s;
}

static void test_nvrtc(const char*) {
	int major = 0, minor = -1;
	OK(nvrtcVersion(&major, &minor));
	EXPECT(major == 13 && minor == 0, "version %d.%d", major, minor);
	EXPECT(strcmp(nvrtcGetErrorString(6), "NVRTC_ERROR_COMPILATION") == 0, "%s", nvrtcGetErrorString(6));
	EXPECT(strcmp(nvrtcGetErrorString(0), "NVRTC_SUCCESS") == 0, "%s", nvrtcGetErrorString(0));

	const char* src = "extern \"C\" __global__ void k(float* x) { x[0] = 1; }\n";
	handle p = nullptr;
	OK(nvrtcCreateProgram(&p, src, "k.cu", 0, nullptr, nullptr));
	const char* opts[] = {"--gpu-architecture=sm_90", "-default-device"};
	OK(nvrtcCompileProgram(p, 2, opts));
	std::string log = prog_string(p, nvrtcGetProgramLogSize, nvrtcGetProgramLog);
	EXPECT(log == std::string(1, '\0'), "log %s", log.c_str());
	std::string ptx = prog_string(p, nvrtcGetPTXSize, nvrtcGetPTX);
	EXPECT(ptx == "//gdrotrain-emu-image compute_90\n" + std::string(src) + '\0', "ptx %s", ptx.c_str());
	std::string cubin = prog_string(p, nvrtcGetCUBINSize, nvrtcGetCUBIN);
	EXPECT(cubin == "//gdrotrain-emu-image sm_90\n" + std::string(src), "cubin %s", cubin.c_str());
	OK(nvrtcDestroyProgram(&p));
	EXPECT(p == nullptr, "program not cleared");

	const char* bad = "// kernels\n#define X 1\n  #  error unsupported thing\nextern \"C\" __global__ void k() {}\n";
	OK(nvrtcCreateProgram(&p, bad, "bad.cu", 0, nullptr, nullptr));
	EXPECT_RC(6, nvrtcCompileProgram(p, 0, nullptr));
	log = prog_string(p, nvrtcGetProgramLogSize, nvrtcGetProgramLog);
	EXPECT(log.find("bad.cu(3)") != std::string::npos && log.find("#error directive: unsupported thing") != std::string::npos,
	       "log: %s", log.c_str());
	size_t n;
	EXPECT(nvrtcGetPTXSize(p, &n) != 0, "PTX of a failed compilation");
	OK(nvrtcDestroyProgram(&p));

	// Other compile errors come from g++ checking the source with emu.h,
	// honouring -D options and the program's headers.
	const char* undef = "extern \"C\" __global__ void f(float* x) {\n\tx[0] = undefined_name + WIDTH + HDR;\n}\n";
	const char* hdr_text = "#define HDR 2\n";
	const char* hdr_name = "hdr.cuh";
	std::string with_include = std::string("#include \"hdr.cuh\"\n") + undef;
	OK(nvrtcCreateProgram(&p, with_include.c_str(), "broken.cu", 1, &hdr_text, &hdr_name));
	EXPECT_RC(6, nvrtcCompileProgram(p, 0, nullptr));
	log = prog_string(p, nvrtcGetProgramLogSize, nvrtcGetProgramLog);
	EXPECT(log.find("broken.cu:3") != std::string::npos && log.find("undefined_name") != std::string::npos,
	       "log: %s", log.c_str());
	OK(nvrtcDestroyProgram(&p));
	std::string fixed = std::string("#include \"hdr.cuh\"\n") +
	                    "extern \"C\" __global__ void f(float* x) { x[0] = WIDTH + HDR + __shfl_xor_sync(0xffffffffu, x[1], 1); }\n";
	OK(nvrtcCreateProgram(&p, fixed.c_str(), "fixed.cu", 1, &hdr_text, &hdr_name));
	EXPECT_RC(6, nvrtcCompileProgram(p, 0, nullptr));  // WIDTH undefined
	const char* defs[] = {"-DWIDTH=4", "--gpu-architecture=compute_90"};
	OK(nvrtcCompileProgram(p, 2, defs));
	OK(nvrtcDestroyProgram(&p));
	setenv("GDROTRAIN_EMU_NVRTC_CHECK", "0", 1);
	OK(nvrtcCreateProgram(&p, undef, "broken.cu", 0, nullptr, nullptr));
	OK(nvrtcCompileProgram(p, 0, nullptr));
	OK(nvrtcDestroyProgram(&p));
}

// compile_image compiles src for arch under the NVRTC the environment
// models and returns its PTX (ptx) or CUBIN, "" for an empty one, or
// "<rc N: log>" when compilation fails.
static std::string compile_image(const char* src, const char* arch, bool ptx) {
	handle p = nullptr;
	OK(nvrtcCreateProgram(&p, src, "k.cu", 0, nullptr, nullptr));
	std::string opt = std::string("--gpu-architecture=") + arch;
	const char* opts[] = {opt.c_str()};
	int rc = nvrtcCompileProgram(p, 1, opts);
	std::string out;
	if (rc != 0) {
		out = "<rc " + std::to_string(rc) + ": " + prog_string(p, nvrtcGetProgramLogSize, nvrtcGetProgramLog) + ">";
	} else if (ptx) {
		out = prog_string(p, nvrtcGetPTXSize, nvrtcGetPTX);
	} else {
		size_t n = 1;
		OK(nvrtcGetCUBINSize(p, &n));
		out = n == 0 ? "" : prog_string(p, nvrtcGetCUBINSize, nvrtcGetCUBIN);
	}
	OK(nvrtcDestroyProgram(&p));
	return out;
}

// test_arch: GDROTRAIN_EMU_NVRTC_VERSION picks the NVRTC modelled (its
// version, architecture list and the --gpu-architecture values it takes),
// GDROTRAIN_EMU_CC the device's compute capability, and cuModuleLoadData
// loads an image only on a device that can run it: a CUBIN within its
// major version, PTX on any newer device, an sm_90a one on 9.0 only.
static void test_arch(const char*) {
	const char* src = "extern \"C\" __global__ void k(float* x) { x[0] = 1; }\n";
	struct Model {
		const char* env;
		int major, minor;
		std::vector<int> archs;
	};
	for (const Model& m : {Model{"12.5", 12, 5, {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90}},
	                       Model{"13.0", 13, 0, {75, 80, 86, 87, 89, 90, 100, 103, 120}}}) {
		setenv("GDROTRAIN_EMU_NVRTC_VERSION", m.env, 1);
		int a = 0, b = 0, n = 0;
		OK(nvrtcVersion(&a, &b));
		EXPECT(a == m.major && b == m.minor, "NVRTC %s reports %d.%d", m.env, a, b);
		OK(nvrtcGetNumSupportedArchs(&n));
		std::vector<int> got(n);
		OK(nvrtcGetSupportedArchs(got.data()));
		EXPECT(got == m.archs, "NVRTC %s lists %d architectures", m.env, n);
	}
	setenv("GDROTRAIN_EMU_NVRTC_VERSION", "12.5", 1);
	struct Case {
		const char* arch;
		bool ptx;
		std::string want;  // a prefix of the image, "" for an empty one
	};
	for (const Case& c : {Case{"sm_90a", false, "//gdrotrain-emu-image sm_90a\n"},
	                      Case{"sm_90a", true, "//gdrotrain-emu-image compute_90a\n"},
	                      Case{"compute_90", true, "//gdrotrain-emu-image compute_90\n"},
	                      Case{"compute_90", false, ""},
	                      Case{"sm_100", false, "<rc 5: nvrtc: error: invalid value for --gpu-architecture (-arch)"},
	                      Case{"compute_120", true, "<rc 5: "}, Case{"sm_80a", false, "<rc 5: "},
	                      Case{"sm_10", false, "<rc 5: "}, Case{"sm_35", false, "<rc 5: "}}) {
		std::string img = compile_image(src, c.arch, c.ptx);
		EXPECT(c.want.empty() ? img.empty() : img.compare(0, c.want.size(), c.want) == 0,
		       "NVRTC 12.5, %s %s: %s", c.arch, c.ptx ? "PTX" : "CUBIN", img.c_str());
	}
	setenv("GDROTRAIN_EMU_NVRTC_VERSION", "13.0", 1);
	EXPECT(compile_image(src, "sm_100", false).compare(0, 27, "//gdrotrain-emu-image sm_10") == 0, "NVRTC 13.0 refused sm_100");
	setenv("GDROTRAIN_EMU_NVRTC_VERSION", "11.8", 1);
	EXPECT(compile_image(src, "sm_80", false).compare(0, 6, "<rc 5:") == 0, "an NVRTC not modelled compiled");
	unsetenv("GDROTRAIN_EMU_NVRTC_VERSION");

	setenv("GDROTRAIN_EMU_CC", "ten", 1);
	EXPECT_RC(1, cuInit(0));
	struct Load {
		const char* cc;
		const char* image;
		int want;
	};
	for (const Load& l : {Load{"9.0", "sm_90a", 0}, Load{"9.0", "sm_90", 0}, Load{"9.0", "compute_90a", 0},
	                      Load{"9.0", "compute_80", 0}, Load{"8.9", "sm_80", 0}, Load{"8.9", "sm_90", 209},
	                      Load{"10.0", "sm_90a", 209}, Load{"10.0", "sm_90", 209}, Load{"10.0", "compute_90a", 209},
	                      Load{"10.0", "compute_90", 0}, Load{"12.0", "compute_90", 0}, Load{"12.0", "sm_100", 209},
	                      Load{"12.0", "compute_120", 0}, Load{"10.0", "compute_120", 209}, Load{"9.0", "bogus", 200}}) {
		setenv("GDROTRAIN_EMU_CC", l.cc, 1);
		OK(cuInit(0));
		int major = -1, minor = -1;
		OK(cuDeviceGetAttribute(&major, 75, 0));
		OK(cuDeviceGetAttribute(&minor, 76, 0));
		EXPECT(std::to_string(major) + "." + std::to_string(minor) == l.cc, "GDROTRAIN_EMU_CC=%s reports %d.%d", l.cc,
		       major, minor);
		handle ctx = nullptr, mod = nullptr;
		OK(cuDevicePrimaryCtxRetain(&ctx, 0));
		OK(cuCtxSetCurrent(ctx));
		std::string image = std::string("//gdrotrain-emu-image ") + l.image + "\n" + src;
		EXPECT_RC(l.want, cuModuleLoadData(&mod, image.c_str()));
	}
	unsetenv("GDROTRAIN_EMU_CC");
}

// ---- concurrency ----

// capture_modes: the rules of cuThreadExchangeStreamCaptureMode's
// documentation, by capture mode (global 0, thread-local 1, relaxed 2) and
// by the calling thread's interaction mode; and a capture that is not
// relaxed ends on its own thread only.
static void test_capture_modes(const char*) {
	setup();
	handle s, g;
	devptr p;
	int st;
	OK(cuStreamCreate(&s, 0));
	auto other = [&](std::function<void()> f) {
		std::thread t([&] {
			OK(cuCtxSetCurrent(g_ctx));
			f();
		});
		t.join();
	};
	// Global: another thread's allocation is refused and invalidates it...
	OK(cuStreamBeginCapture(s, 0));
	other([&] { EXPECT_RC(900, cuMemAlloc(&p, 64)); });
	EXPECT_RC(901, cuStreamEndCapture(s, &g));
	EXPECT(g == nullptr, "an invalidated capture gave a graph");
	// ... unless that thread's interaction mode is thread-local or relaxed.
	for (int m : {1, 2}) {
		OK(cuStreamBeginCapture(s, 0));
		other([&] {
			int mode = m;
			OK(cuThreadExchangeStreamCaptureMode(&mode));
			EXPECT(mode == 0, "a thread's first interaction mode is %d, want 0 (global)", mode);
			OK(cuMemAlloc(&p, 64));
			OK(cuMemFree(p));
		});
		OK(cuStreamEndCapture(s, &g));
		OK(cuGraphDestroy(g));
	}
	// Thread-local: other threads are free, the capturing one is not.
	OK(cuStreamBeginCapture(s, 1));
	other([&] {
		OK(cuMemAlloc(&p, 64));
		OK(cuMemFree(p));
	});
	OK(cuStreamIsCapturing(s, &st));
	EXPECT(st == 1, "status %d, want 1 (active)", st);
	EXPECT_RC(900, cuMemAlloc(&p, 64));
	EXPECT_RC(901, cuStreamEndCapture(s, &g));
	// The wrong thread's end is refused; the capture stays, invalidated,
	// until its own thread ends it.
	OK(cuStreamBeginCapture(s, 1));
	other([&] { EXPECT_RC(908, cuStreamEndCapture(s, &g)); });
	OK(cuStreamIsCapturing(s, &st));
	EXPECT(st == 2, "status %d after the wrong thread's end, want 2 (invalidated)", st);
	EXPECT_RC(901, cuStreamEndCapture(s, &g));
	OK(cuStreamIsCapturing(s, &st));
	EXPECT(st == 0, "status %d after the end, want 0", st);
	// Relaxed: nothing is forbidden but what conflicts with the capture
	// itself (synchronising its stream), and any thread may end it.
	OK(cuStreamBeginCapture(s, 2));
	OK(cuMemAlloc(&p, 64));
	OK(cuMemFree(p));
	other([&] { OK(cuStreamEndCapture(s, &g)); });
	OK(cuGraphDestroy(g));
	OK(cuStreamBeginCapture(s, 2));
	EXPECT_RC(900, cuStreamSynchronize(s));
	EXPECT_RC(901, cuStreamEndCapture(s, &g));
	int bad = 3;
	EXPECT_RC(1, cuThreadExchangeStreamCaptureMode(&bad));
	OK(cuStreamDestroy(s));
}

static void test_threads(const char*) {
	setup();
	handle h;
	OK(cublasCreate(&h));
	std::vector<std::thread> th;
	for (int t = 0; t < 4; t++)
		th.emplace_back([&, t] {
			OK(cuCtxSetCurrent(g_ctx));
			const int n = 2000 + t;
			std::vector<float> a(n), b(n);
			for (int i = 0; i < n; i++) {
				a[i] = (float)(i * (t + 1));
				b[i] = (float)t;
			}
			devptr da = upload(a), db = upload(b), dc = alloc<float>(n);
			for (int rep = 0; rep < 10; rep++) {
				Args args;
				args.add(da).add(db).add(dc).add(n);
				OK(launch("vec_add", (n + 127) / 128, 1, 1, 128, 1, 1, args));
				std::vector<float> c = download<float>(dc, n);
				int bad = 0;
				for (int i = 0; i < n; i++) bad += c[i] != a[i] + b[i];
				EXPECT(bad == 0, "thread %d rep %d: %d wrong", t, rep, bad);
				float one = 1, zero = 0;
				OK(cublasGemmEx(h, N, T, 10, 10, 1, &one, (void*)da, R32F, 10, (void*)db, R32F, 10, &zero, (void*)dc,
				                R32F, 10, C32F, -1));
			}
			OK(cuMemFree(da));
			OK(cuMemFree(db));
			OK(cuMemFree(dc));
		});
	for (auto& t : th) t.join();
	OK(cublasDestroy(h));
}

// perf prints the time of a few typical launches (not a pass/fail test).
static void test_perf(const char*) {
	setup();
	const int rows = 512, cols = 1024;
	std::vector<float> x(rows * cols);
	for (auto& v : x) v = rnd();
	devptr dx = upload(x), dy = alloc<float>(rows * cols);
	auto time = [&](const char* what, std::function<void()> fn) {
		auto t0 = std::chrono::steady_clock::now();
		fn();
		double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
		printf("%-48s %8.2f ms\n", what, ms);
	};
	for (unsigned block : {256u, 1024u}) {
		char what[100];
		snprintf(what, sizeof what, "row_softmax %dx%d, %u threads/block", rows, cols, block);
		time(what, [&] {
			Args args;
			args.add(dx).add(dy).add(cols);
			OK(launch("row_softmax", rows, 1, 1, block, 1, 1, args));
		});
	}
	time("vec_add 1M, 256 threads/block", [&] {
		int n = rows * cols;
		Args args;
		args.add(dx).add(dx).add(dy).add(n);
		OK(launch("vec_add", (n + 255) / 256, 1, 1, 256, 1, 1, args));
	});
	{
		std::vector<unsigned> tiles(8192);
		for (auto& v : tiles) v = (unsigned)bf16(rnd()) | (unsigned)bf16(rnd()) << 16;
		devptr dt = upload(tiles), dout = alloc<float>(32 * 256);
		time("wgmma_loop: 32 blocks of 256, 16 iterations", [&] {
			Args args;
			args.add(dt).add(dout).add(16);
			OK(launch("wgmma_loop", 32, 1, 1, 256, 1, 1, args));
		});
	}
	time("100 launches of vec_add 1K", [&] {
		int n = 1024;
		for (int i = 0; i < 100; i++) {
			Args args;
			args.add(dx).add(dx).add(dy).add(n);
			OK(launch("vec_add", 4, 1, 1, 256, 1, 1, args));
		}
	});
}

// ---- the adversary: planted bugs the emulator must catch ----

static bool is_poison(unsigned bits) { return bits == 0xffffffffu || bits == 0x7f7f7f7fu; }

// hazard_shuffle: a cross-warp hazard with only a shuffle between the write
// and the read shows under the default seed; the schedule replays with the
// same seed and scope and changes with another seed.
static void test_hazard_shuffle(const char*) {
	setup();
	const unsigned blocks = 64;
	devptr out = alloc<int>(64 * blocks);
	Args a;
	a.add(out);
	OK(launch("hazard_fixed", blocks, 1, 1, 64, 1, 1, a));
	std::vector<int> o = download<int>(out, 64 * blocks);
	int bad = 0;
	for (unsigned b = 0; b < blocks; b++)
		for (unsigned t = 0; t < 64; t++) bad += o[b * 64 + t] != (int)(b * 100 + 63 - t);
	EXPECT(bad == 0, "hazard_fixed: %d wrong values", bad);
	Args nothing;  // vec_add of no elements
	nothing.add((devptr)0).add((devptr)0).add((devptr)0).add(0);
	auto run = [&](const char* seed) {
		// A launch in another scope, so that the next one starts the
		// numbering of "hazard" again.
		setenv("GDROTRAIN_EMU_SEED", seed, 1);
		setenv("GDROTRAIN_EMU_SEED_SCOPE", "other", 1);
		OK(launch("vec_add", 1, 1, 1, 1, 1, 1, nothing));
		setenv("GDROTRAIN_EMU_SEED_SCOPE", "hazard", 1);
		OK(launch("hazard_shuffle", blocks, 1, 1, 64, 1, 1, a));
		return download<int>(out, 64 * blocks);
	};
	std::vector<int> r1 = run("1"), r2 = run("1"), r3 = run("2");
	int wrong = 0;
	for (unsigned b = 0; b < blocks; b++) {
		bool w = false;
		for (unsigned t = 0; t < 64; t++) w |= r1[b * 64 + t] != (int)(b * 100 + 63 - t);
		wrong += w;
	}
	printf("hazard_shuffle: %d of %u blocks read another warp's element before it was written\n", wrong, blocks);
	EXPECT(wrong > 0, "a hazard with only a shuffle between the write and the read went unnoticed");
	EXPECT(r1 == r2, "the same seed and scope gave another schedule");
	EXPECT(r1 != r3, "seeds 1 and 2 gave the same results in all %u blocks", blocks);
}

// shfl_exited: shuffles reading exited lanes and lanes outside the mask get
// poison; a source outside the segment keeps the caller's value.
static void test_shfl_exited(const char*) {
	setup();
	devptr out = alloc<int>(48);
	OK(cuMemsetD32(out, 0x11111111u, 48));
	Args a;
	a.add(out);
	OK(launch("shfl_exited", 1, 1, 1, 32, 1, 1, a));
	std::vector<int> o = download<int>(out, 48);
	for (int l = 0; l < 16; l++) {
		if (l < 8)
			EXPECT(o[l] == (l + 8) * 10, "lane %d: down 8 = %d, want %d", l, o[l], (l + 8) * 10);
		else
			EXPECT(is_poison((unsigned)o[l]), "lane %d read exited lane %d: %#x, want poison", l, l + 8, o[l]);
		EXPECT(is_poison((unsigned)o[16 + l]), "lane %d read lane 20, outside the mask: %#x, want poison", l, o[16 + l]);
		int want = l < 8 ? (l + 8) * 10 : l * 10;
		EXPECT(o[32 + l] == want, "lane %d: down 8 in a segment of 16 = %d, want %d", l, o[32 + l], want);
	}
}

// The warp operations CUDA leaves undefined: each aborts (the Go test
// checks the message).
static void abort_case(const char* name) {
	setup();
	devptr out = alloc<int>(64);
	Args a;
	a.add(out);
	launch(name, 1, 1, 1, 64, 1, 1, a);
	fail("%s returned", name);
}

// shared_uninit: shared memory is poison at every block's start, in a
// kernel's own variables and in those of the functions it calls. One
// worker runs the blocks one after another, so each even block starts
// with what the odd block before it left.
static void test_shared_uninit(const char*) {
	setup();
	setenv("GDROTRAIN_EMU_WORKERS", "1", 1);
	const unsigned blocks = 8;
	devptr out = alloc<float>(64 * blocks), out2 = alloc<float>(64 * blocks);
	Args a;
	a.add(out).add(out2);
	OK(launch("shared_uninit", blocks, 1, 1, 64, 1, 1, a));
	std::vector<float> o = download<float>(out, 64 * blocks), o2 = download<float>(out2, 64 * blocks);
	int bad = 0;
	for (unsigned b = 0; b < blocks; b++)
		for (unsigned t = 0; t < 64; t++) {
			unsigned limit = b & 1 ? 64 : 32;
			bool ok = t < limit ? o[b * 64 + t] == (float)(b * 100 + t) : is_poison(f2u(o[b * 64 + t]));
			bool ok2 = (t & 31) < 16 ? o2[b * 64 + t] == (float)(t & 31) : is_poison(f2u(o2[b * 64 + t]));
			if ((!ok || !ok2) && bad++ < 5)
				fail("block %u thread %u: sh %g (%#x), helper %g (%#x)", b, t, o[b * 64 + t], f2u(o[b * 64 + t]),
				     o2[b * 64 + t], f2u(o2[b * 64 + t]));
		}
	EXPECT(bad == 0, "%d threads read shared memory that was not poison", bad);
}

// misaligned: a float4 load from an address that is not 16-byte aligned
// fails the launch with CUDA_ERROR_MISALIGNED_ADDRESS, which sticks.
static void test_misaligned(const char*) {
	setup();
	handle f = func("misaligned_load");
	std::vector<float> x(64);
	for (int i = 0; i < 64; i++) x[i] = (float)i;
	devptr dx = upload(x), dy = alloc<float>(1);
	Args ok4;
	ok4.add(dx).add(dy).add(4);
	OK(launch("misaligned_load", 1, 1, 1, 32, 1, 1, ok4));
	EXPECT(download<float>(dy, 1)[0] == 4 + 5 + 6 + 7, "aligned float4");
	Args bad;
	bad.add(dx).add(dy).add(1);
	EXPECT_RC(716, launch("misaligned_load", 1, 1, 1, 32, 1, 1, bad));
	EXPECT_RC(716, cuCtxSynchronize());
	devptr p;
	EXPECT_RC(716, cuMemAlloc(&p, 64));
	handle g;
	EXPECT_RC(716, cuModuleGetFunction(&g, g_module, "vec_add"));
	EXPECT_RC(716, cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, ok4.get(), nullptr));
	const char* name = nullptr;
	OK(cuGetErrorName(716, &name));
	EXPECT(name && strcmp(name, "CUDA_ERROR_MISALIGNED_ADDRESS") == 0, "name %s", name);
}

// Out of bounds: each case in a process of its own, since the error sticks.
static void oob(const char* kernel, size_t bytes, long long i) {
	setup();
	devptr p, out = alloc<float>(1);
	OK(cuMemAlloc(&p, bytes));
	EXPECT(p % 256 == 0, "cuMemAlloc returned %#llx, not 256-byte aligned", p);
	Args in_bounds;
	in_bounds.add(p).add((long long)(bytes / 4 - 1));
	if (strcmp(kernel, "read_at") == 0) in_bounds.add(out);
	OK(launch(kernel, 4, 1, 1, 32, 1, 1, in_bounds));
	Args a;
	a.add(p).add(i);
	if (strcmp(kernel, "read_at") == 0) a.add(out);
	EXPECT_RC(700, launch(kernel, 4, 1, 1, 32, 1, 1, a));
	EXPECT_RC(700, cuCtxSynchronize());
	EXPECT_RC(700, cuMemFree(p));
}
static void test_oob_end(const char*) { oob("write_at", 1024, 256); }
static void test_oob_slack(const char*) { oob("write_at", 1000, 250); }
static void test_oob_before(const char*) { oob("write_at", 1024, -1); }
static void test_oob_read(const char*) { oob("read_at", 4096, 1024); }

// host_fault: a fault outside kernel code still ends the process, once the
// emulator's workers (and its fault handler) exist.
static void test_host_fault(const char*) {
	setup();
	devptr p = alloc<float>(64);
	Args a;
	a.add(p).add(0ll);
	OK(launch("write_at", 2, 1, 1, 32, 1, 1, a));
	printf("faulting in host code\n");
	fflush(stdout);
	*(volatile int*)(uintptr_t)16 = 1;
	fail("the host fault was survived");
}

// spin_flag: a thread spinning on an atomic lets the thread it waits for
// run (atomics are preemption points), under every schedule.
static void test_spin_flag(const char*) {
	setup();
	devptr flag = alloc<int>(1), out = alloc<int>(1);
	for (int rep = 0; rep < 20; rep++) {
		OK(cuMemsetD32(flag, 0, 1));
		Args a;
		a.add(flag).add(out);
		OK(launch("spin_flag", 1, 1, 1, 64, 1, 1, a));
	}
}

static void test_deadlock(const char*) {
	setup();
	devptr d = alloc<float>(64);
	Args args;
	args.add(d);
	launch("deadlock", 1, 1, 1, 64, 1, 1, args);
	fail("a deadlocked kernel returned");
}

// ---- wgmma (emu_wgmma_bf16 and its fences) ----

// wg_addr is the byte offset of element (mn, k) of a k16 operand from the
// operand's start address in the canonical layouts of the PTX ISA (T = 8
// bf16 elements; rows of R = 128, 64 or 32 bytes for swizzle modes 1, 2,
// 3), before swizzling.
static unsigned wg_addr(int mn, int k, bool mn_major, unsigned lbo, unsigned sbo, int swz = 0) {
	if (!swz) {
		if (mn_major) return (mn % 8) * 2 + (mn / 8) * sbo + (k % 8) * 16 + (k / 8) * lbo;
		return (mn % 8) * 16 + (mn / 8) * sbo + (k % 8) * 2 + (k / 8) * lbo;
	}
	const unsigned R = 256u >> swz, W = R / 16;
	if (mn_major) return (mn % 8) * 2 + (mn / 8) % W * 16 + (mn / 8) / W * lbo + (k % 8) * R + (k / 8) * sbo;
	return (mn % 8) * R + (mn / 8) * sbo + (k / 8) * 16 + (k % 8) * 2;
}
// wg_swizzle maps an address (from a 1024-aligned base) to where swizzle
// mode swz stores it: 16-byte chunk j of 128-byte line l at chunk j ^ (l %
// (R/16)).
static unsigned wg_swizzle(unsigned a, int swz) {
	if (!swz) return a;
	const unsigned W = (256u >> swz) / 16;
	return a ^ ((a >> 7) & (W - 1)) << 4;
}

// A k16 operand's layout in a test's shared-memory image: strides,
// swizzle, and each k-step's start.
struct WgLayout {
	unsigned lbo = 0, sbo = 0;
	int swz = 0;
	std::vector<unsigned> start;
};

// wg_layout picks strides (padded in some variants) for a rows × 16·ks
// operand. Swizzled K-major operands step through their 128-, 64- or
// 32-byte rows 32 bytes at a time, as kernels advance the descriptor's
// start address, then to the next block of rows.
static WgLayout wg_layout(int rows, int ks, bool mn_major, int swz, int variant) {
	WgLayout L;
	L.swz = swz;
	if (!swz) {
		const unsigned nb = rows / 8;
		if (!mn_major) L.lbo = variant ? 128 * nb + 48 : 128, L.sbo = variant ? 128 : 256 + 32;
		else L.lbo = variant ? 128 : 128 * nb + 16, L.sbo = variant ? 256 + 16 : 128;
		unsigned end = 0;
		for (int mn = 0; mn < rows; mn++)
			for (int k = 0; k < 16; k++) end = std::max(end, wg_addr(mn, k, mn_major, L.lbo, L.sbo) + 2);
		const unsigned step = (end + 15) / 16 * 16 + 16 * (unsigned)(variant % 4);
		for (int s = 0; s < ks; s++) L.start.push_back(s * step);
		return L;
	}
	const unsigned R = 256u >> swz, W = R / 16;
	// Padding in whole 128-byte lines (the swizzle permutes the chunks of a
	// line, so anything else would overlap the next block's).
	if (!mn_major) {
		L.lbo = 16;  // unused ("assumed 1")
		L.sbo = 8 * R + (variant && rows <= 128 ? 128 : 0);
		const unsigned per = R / 32;
		for (int s = 0; s < ks; s++) L.start.push_back(s % per * 32 + s / per * (rows / 8) * L.sbo);
	} else {
		const bool pad = variant && rows <= 128;
		L.lbo = 8 * R + (pad ? 128 : 0);
		const unsigned groups = (rows / 8 + W - 1) / W;
		L.sbo = groups * L.lbo + (variant ? 128 : 0);
		for (int s = 0; s < ks; s++) L.start.push_back(s * 2 * L.sbo);
	}
	return L;
}

// wg_image lays out the k16 steps of a rows × 16·ks operand (get(mn, k))
// over random bytes; no two elements may share a byte.
static std::vector<unsigned char> wg_image(int rows, int ks, bool mn_major, const WgLayout& L,
                                           const std::function<unsigned short(int, int)>& get) {
	unsigned end = 0;
	for (int s = 0; s < ks; s++)
		for (int mn = 0; mn < rows; mn++)
			for (int k = 0; k < 16; k++)
				end = std::max(end, wg_swizzle(L.start[s] + wg_addr(mn, k, mn_major, L.lbo, L.sbo, L.swz), L.swz) + 2);
	std::vector<unsigned char> img(end), used(end);
	for (auto& b : img) b = (unsigned char)(rnd() * 128 + 128);
	for (int s = 0; s < ks; s++)
		for (int mn = 0; mn < rows; mn++)
			for (int k = 0; k < 16; k++) {
				const unsigned a = wg_swizzle(L.start[s] + wg_addr(mn, k, mn_major, L.lbo, L.sbo, L.swz), L.swz);
				if (used[a]) fail("wg_image: elements overlap at %u", a);
				used[a] = 1;
				unsigned short v = get(mn, 16 * s + k);
				memcpy(&img[a], &v, 2);
			}
	return img;
}

// wgmma: random 64 × K by K × N products for n 8 to 256, A from registers
// and from shared memory, K- and MN-major operands with padded strides,
// every swizzle mode, scale_d 0 and 1, chained k-steps in one commit group
// or a group each; bit for bit what adding the k products one at a time in
// float gives (the model of mma.sync), and near the float64 product.
static void test_wgmma(const char*) {
	setup();
	int cases = 0;
	for (int n : {8, 64, 128, 256})
		for (int variant = 0; variant < 3; variant++)  // RS, SS K-major A, SS MN-major A
			for (int tb = 0; tb < 2; tb++)
				for (int scale0 = 0; scale0 < 2; scale0++)
					for (int mode = 0; mode < 2; mode++) {
						const int rs = variant == 0, ta = variant == 2, ks = 1 + (cases % 3);
						const unsigned nwg = cases % 5 == 0 ? 2 : 1;
						const int K = 16 * ks;
						std::vector<unsigned short> A(64 * K), B(K * n);
						for (auto& v : A) v = bf16(rnd());
						for (auto& v : B) v = bf16(rnd() * (cases % 2 ? 1.0f : 1000.0f));
						std::vector<float> D(64 * n);
						for (auto& v : D) v = rnd() * 4;
						const int aswz = (cases / 3) % 4, bswz = cases % 4;
						const WgLayout la = wg_layout(64, ks, ta, aswz, cases % 2),
						               lb = wg_layout(n, ks, tb, bswz, (cases / 2) % 2);
						std::vector<unsigned char> ia =
						    rs ? std::vector<unsigned char>(16)
						       : wg_image(64, ks, ta, la, [&](int m, int k) { return A[m * K + k]; });
						std::vector<unsigned char> ib = wg_image(n, ks, tb, lb, [&](int nn, int k) { return B[k * n + nn]; });
						if (ia.size() > 12288 || ib.size() > 36864) {
							fail("case %d: images of %zu and %zu bytes do not fit", cases, ia.size(), ib.size());
							return;
						}
						std::vector<int> cfg = {n, ks, rs, ta, tb, scale0, (int)la.lbo, (int)la.sbo, aswz,
						                        (int)lb.lbo, (int)lb.sbo, bswz, (int)ia.size(), (int)ib.size(), K, mode};
						for (int s = 0; s < 4; s++) cfg.push_back(s < ks && !rs ? (int)la.start[s] : 0);
						for (int s = 0; s < 4; s++) cfg.push_back(s < ks ? (int)lb.start[s] : 0);
						devptr dcfg = upload(cfg), dia = upload(ia), dib = upload(ib), dA = upload(A), dD = upload(D),
						       dout = alloc<float>(nwg * 64 * n);
						Args args;
						args.add(dcfg).add(dia).add(dib).add(dA).add(dD).add(dout);
						int rc = launch("wgmma_gemm", 1, 1, 1, 128 * nwg, 1, 1, args);
						if (rc) {
							fail("case %d (n %d rs %d ta %d tb %d scale %d mode %d ks %d swizzle %d %d): launch %d", cases,
							     n, rs, ta, tb, scale0, mode, ks, aswz, bswz, rc);
							return;
						}
						std::vector<float> out = download<float>(dout, nwg * 64 * n);
						int bad = 0;
						for (unsigned wg = 0; wg < nwg; wg++)
							for (int i = 0; i < 64; i++)
								for (int j = 0; j < n; j++) {
									float acc = scale0 ? D[i * n + j] : 0.0f;
									double ref = scale0 ? D[i * n + j] : 0.0;
									for (int k = 0; k < K; k++) {
										const float p = from_bf16(A[i * K + k]) * from_bf16(B[k * n + j]);
										acc = acc + p;
										ref += (double)from_bf16(A[i * K + k]) * from_bf16(B[k * n + j]);
									}
									const float got = out[wg * 64 * n + i * n + j];
									if ((f2u(got) != f2u(acc) || fabs(got - ref) > 1e-5 * (1 + fabs(ref)) * K) &&
									    bad++ < 3)
										fail("case %d (n %d rs %d ta %d tb %d scale %d mode %d ks %d swizzle %d %d) "
										     "warpgroup %u D[%d][%d] = %.9g, want %.9g (float64 %.9g)",
										     cases, n, rs, ta, tb, scale0, mode, ks, aswz, bswz, wg, i, j, got, acc, ref);
								}
						for (devptr p : {dcfg, dia, dib, dA, dD, dout}) OK(cuMemFree(p));
						cases++;
					}
	printf("%d wgmma products\n", cases);
}

// wgmma_mma: a wgmma with n = 8 (A from registers, and from shared memory)
// gives what mma.sync gives on the same data, bit for bit.
static void test_wgmma_mma(const char*) {
	setup();
	for (int rep = 0; rep < 4; rep++) {
		std::vector<unsigned short> A(64 * 16), B(16 * 8);
		std::vector<float> C(64 * 8);
		// Magnitudes far apart, so that the order of the additions shows.
		for (size_t i = 0; i < A.size(); i++) A[i] = bf16(rnd() * (i % 3 == 0 ? 4096.0f : 1.0f));
		for (size_t i = 0; i < B.size(); i++) B[i] = bf16(rnd() * (i % 5 == 0 ? 1.0f / 512 : 1.0f));
		for (auto& v : C) v = rnd() * 100;
		devptr dA = upload(A), dB = upload(B), dC = upload(C), om = alloc<float>(512), orr = alloc<float>(512),
		       os = alloc<float>(512);
		Args args;
		args.add(dA).add(dB).add(dC).add(om).add(orr).add(os);
		OK(launch("wgmma_vs_mma", 1, 1, 1, 128, 1, 1, args));
		std::vector<float> m = download<float>(om, 512), r = download<float>(orr, 512), s = download<float>(os, 512);
		int bad = 0;
		for (int i = 0; i < 512; i++)
			if ((f2u(m[i]) != f2u(r[i]) || f2u(m[i]) != f2u(s[i])) && bad++ < 5)
				fail("rep %d D[%d][%d]: mma %.9g, wgmma RS %.9g, SS %.9g", rep, i / 8, i % 8, m[i], r[i], s[i]);
	}
}

// check_rows_times_b checks a 64 × 64 product D = A·B of the wgmma test
// kernels whose A row i is all bf16((i+1)/64) and B (16 × 64) is Bf, bit
// for bit against float accumulation in k order.
static void check_rows_times_b(const std::vector<float>& o, const std::vector<float>& Bf) {
	for (int i = 0; i < 64; i++)
		for (int j = 0; j < 64; j++) {
			float acc = 0;
			const float a = from_bf16(bf16((float)(i + 1) / 64));
			for (int k = 0; k < 16; k++) acc = acc + a * Bf[k * 64 + j];
			if (f2u(o[i * 64 + j]) != f2u(acc)) {
				fail("D[%d][%d] = %g, want %g", i, j, o[i * 64 + j], acc);
				return;
			}
		}
}

// wgmma_bug_*: the planted bugs of the kernel wgmma_bug (by mode); each
// fails the launch with a report the Go test checks, except acc_read,
// whose early read of the accumulators gives NaN.
static void test_wgmma_bug(const char* name) {
	static const std::map<std::string, std::pair<int, int>> modes = {
	    {"wgmma_ok", {0, 0}},         {"wgmma_acc_read", {1, 0}},      {"wgmma_acc_write", {2, 719}},
	    {"wgmma_a_changed", {3, 719}}, {"wgmma_smem_inflight", {4, 719}}, {"wgmma_no_fence", {5, 719}},
	    {"wgmma_no_proxy_fence", {6, 719}}, {"wgmma_desc_mismatch", {7, 719}}, {"wgmma_base_offset", {8, 719}},
	    {"wgmma_past_end", {9, 700}},  {"wgmma_outside", {10, 700}},    {"wgmma_uncommitted", {11, 719}},
	    {"wgmma_pending_exit", {12, 719}}, {"wgmma_cvta_global", {13, 700}}, {"wgmma_lane_missing", {14, 719}},
	    {"wgmma_warp_missing", {15, 719}}, {"wgmma_swizzle_misaligned", {16, 719}},
	    {"wgmma_wait1", {17, 0}}, {"wgmma_acc_after_fence", {18, 719}}, {"wgmma_a_after_fence", {19, 719}},
	    {"wgmma_not_sm90a", {0, 719}},  // wgmma_ok's kernel from a module of PTX for compute_90
	};
	setup();
	const auto m = modes.at(name);
	std::vector<unsigned short> B(1024);
	std::vector<float> Bf(16 * 64);
	// K-major B: (n, k) at (n%8)·16 + (n/8)·256 + (k%8)·2 + (k/8)·128 bytes.
	for (int k = 0; k < 16; k++)
		for (int nn = 0; nn < 64; nn++) {
			B[wg_addr(nn, k, false, 128, 256) / 2] = bf16(rnd());
			Bf[k * 64 + nn] = from_bf16(B[wg_addr(nn, k, false, 128, 256) / 2]);
		}
	devptr dB = upload(B), out = alloc<float>(64 * 64 + 384);
	Args args;
	args.add(m.first).add(dB).add(out);
	if (strcmp(name, "wgmma_not_sm90a") == 0) {
		handle mod = nullptr, f = nullptr;
		OK(cuModuleLoadData(&mod, "//gdrotrain-emu-image compute_90\nextern \"C\" __global__ void wgmma_bug();\n"));
		OK(cuModuleGetFunction(&f, mod, "wgmma_bug"));
		EXPECT_RC(719, cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, nullptr, args.get(), nullptr));
		return;
	}
	EXPECT_RC(m.second, launch("wgmma_bug", 1, 1, 1, 128, 1, 1, args));
	if (m.second) return;
	std::vector<float> o = download<float>(out, 64 * 64 + 384);
	if (m.first == 1) {
		int nans = 0;
		for (int t = 0; t < 128; t++) nans += isnan(o[64 * 64 + t]);
		EXPECT(nans == 128, "%d of 128 threads read NaN from their accumulators before the wait", nans);
		if (nans == 128) printf("accumulators read before wgmma.wait_group: NaN in all 128 threads\n");
	}
	if (m.first == 17) {
		int early = 0, done = 0, first = 0;
		for (int t = 0; t < 128; t++) {
			early += isnan(o[64 * 64 + t]);
			first += !isnan(o[64 * 64 + 128 + t]);
			done += !isnan(o[64 * 64 + 256 + t]);
		}
		EXPECT(early == 128 && first == 128 && done == 128,
		       "after wait_group 1: %d of 128 threads read NaN from the MMA of the newest group (want all), %d "
		       "a number from the older one (want all); after wait_group 0, %d a number (want all)",
		       early, first, done);
	}
	check_rows_times_b(o, Bf);
}

// ---- cp.async (emu_cp_async16, commit and wait) ----

// cpasync_*: cpasync_tiles copies an nrows × 32 matrix (ncols columns
// valid) tile by tile through two shared buffers with cp.async; masked
// rows (src_bytes 0) and columns (a partial src_bytes) come out zero.
// "cpasync" runs it on several shapes and grids, compared exactly with the
// input, and so does "cpasync_empty_group" (wait_group 1 behind an empty
// newest group still retires the older ones); the other names plant a bug (a mode of the kernel), each failing
// the launch with the report the Go test checks, except read_early (the
// destination read before the wait is poison) and no_sync (a missing
// __syncthreads gives wrong numbers).
static void test_cpasync(const char* name) {
	static const std::map<std::string, std::pair<int, int>> modes = {
	    {"cpasync", {0, 0}},
	    {"cpasync_read_early", {1, 0}},
	    {"cpasync_dst_write", {2, 719}},
	    {"cpasync_src_write", {3, 719}},
	    {"cpasync_exit_pending", {4, 719}},
	    {"cpasync_misaligned_dst", {5, 716}},
	    {"cpasync_misaligned_src", {6, 716}},
	    {"cpasync_dst_global", {7, 700}},
	    {"cpasync_src_size", {8, 719}},
	    {"cpasync_src_oob", {10, 700}},
	    {"cpasync_uncommitted", {11, 719}},
	    {"cpasync_no_sync", {12, 0}},
	    {"cpasync_overlap", {13, 719}},
	    {"cpasync_empty_group", {14, 0}},
	};
	setup();
	const auto m = modes.at(name);
	struct Shape {
		int nrows, ncols, ntiles, grid;
	};
	std::vector<Shape> shapes = {{300, 30, 6, 2}, {256, 32, 4, 1}, {200, 17, 5, 4}, {64, 3, 2, 1}};
	if (m.first == 14) shapes = {{300, 30, 6, 2}, {128, 32, 2, 2}};  // several tiles a block, and one
	else if (m.first != 0) shapes = {{128, 32, 2, 1}};
	for (const Shape& sh : shapes) {
		// The allocation ends at the last valid element: a partial copy
		// that read its whole 16 bytes would read past it.
		std::vector<float> in((size_t)(sh.nrows - 1) * 32 + sh.ncols);
		for (auto& x : in) x = rnd();
		devptr din = upload(in), dout = alloc<float>((size_t)sh.ntiles * 64 * 32),
		       early = alloc<unsigned>((size_t)sh.grid * 128);
		Args args;
		args.add(m.first).add(din).add(sh.nrows).add(sh.ncols).add(sh.ntiles).add(dout).add(early);
		EXPECT_RC(m.second, launch("cpasync_tiles", sh.grid, 1, 1, 128, 1, 1, args));
		if (m.second) return;
		std::vector<float> o = download<float>(dout, (size_t)sh.ntiles * 64 * 32);
		int wrong = 0, poison = 0;
		for (int r = 0; r < sh.ntiles * 64; r++)
			for (int c = 0; c < 32; c++) {
				const float want = r < sh.nrows && c < sh.ncols ? in[r * 32 + c] : 0.0f, got = o[r * 32 + c];
				if (f2u(got) != f2u(want)) {
					wrong++;
					poison += f2u(got) == 0x7fa57fa5u;
					if (m.first != 12 && wrong <= 3)
						fail("nrows %d ncols %d: out[%d][%d] = %#x, want %#x", sh.nrows, sh.ncols, r, c, f2u(got),
						     f2u(want));
				}
			}
		if (m.first == 1) {
			std::vector<unsigned> e = download<unsigned>(early, 128);
			int n = 0;
			for (unsigned x : e) n += x == 0x7fa57fa5u;
			EXPECT(n == 128, "%d of 128 threads read poison from their destination before the wait", n);
			if (n == 128) printf("destination read before cp.async.wait_group: poison in all 128 threads\n");
		}
		if (m.first == 12) {
			EXPECT(poison > 0, "without the __syncthreads after the wait no thread read cp.async poison");
			if (poison > 0) printf("missing __syncthreads: %d elements read as cp.async poison\n", poison);
		}
	}
}

// cpasync_spin: a thread spinning on a flag that a thread at a cp.async
// wait raises after it (the wait must not hold that thread forever).
static void test_cpasync_spin(const char*) {
	setup();
	std::vector<float> in = {1.5f, -2.25f, 3.0f, 0.125f};
	devptr din = upload(in), out = alloc<float>(4);
	Args args;
	args.add(din).add(out);
	OK(launch("cpasync_spin", 2, 1, 1, 64, 1, 1, args));
	std::vector<float> o = download<float>(out, 4);
	for (int i = 0; i < 4; i++) EXPECT(o[i] == in[i], "out[%d] = %g, want %g", i, o[i], in[i]);
}

// cpasync_wgmma_ok / cpasync_no_proxy_fence: a wgmma reads B that cp.async
// brought into shared memory, with and without fence.proxy.async after the
// wait (the landing is a generic-proxy write).
static void test_cpasync_wgmma(const char* name) {
	const int mode = strcmp(name, "cpasync_no_proxy_fence") == 0;
	setup();
	std::vector<unsigned short> B(1024);
	std::vector<float> Bf(16 * 64);
	for (int k = 0; k < 16; k++)
		for (int nn = 0; nn < 64; nn++) {
			B[wg_addr(nn, k, false, 128, 256) / 2] = bf16(rnd());
			Bf[k * 64 + nn] = from_bf16(B[wg_addr(nn, k, false, 128, 256) / 2]);
		}
	devptr dB = upload(B), out = alloc<float>(64 * 64);
	Args args;
	args.add(mode).add(dB).add(out);
	EXPECT_RC(mode ? 719 : 0, launch("cpasync_wgmma", 1, 1, 1, 128, 1, 1, args));
	if (mode) return;
	std::vector<float> o = download<float>(out, 64 * 64);
	check_rows_times_b(o, Bf);
}

int main(int argc, char** argv) {
	if (argc != 3) {
		printf("usage: driver LIBDIR TEST\n");
		return 2;
	}
	std::map<std::string, std::function<void(const char*)>> tests = {
	    {"load", test_load},
	    {"before_init", test_before_init},
	    {"no_device", test_no_device},
	    {"context", test_context},
	    {"memory", test_memory},
	    {"events", test_events},
	    {"vecadd", test_vecadd},
	    {"scalars", test_scalars},
	    {"grid", test_grid},
	    {"reduce", test_reduce},
	    {"softmax", test_softmax},
	    {"shuffle", test_shuffle},
	    {"warp_reduce", test_warp_reduce},
	    {"atomics", test_atomics},
	    {"early_exit", test_early_exit},
	    {"misc_kernels", test_misc_kernels},
	    {"missing_sync", test_missing_sync},
	    {"launch_errors", test_launch_errors},
	    {"gemm", test_gemm},
	    {"fma", test_fma},
	    {"fault", test_fault},
	    {"nvrtc", test_nvrtc},
	    {"arch", test_arch},
	    {"threads", test_threads},
	    {"capture_modes", test_capture_modes},
	    {"deadlock", test_deadlock},
	    {"hazard_shuffle", test_hazard_shuffle},
	    {"shfl_exited", test_shfl_exited},
	    {"shfl_unreached", abort_case},
	    {"shfl_mismatch", abort_case},
	    {"shfl_not_in_mask", abort_case},
	    {"shared_uninit", test_shared_uninit},
	    {"misaligned", test_misaligned},
	    {"oob_end", test_oob_end},
	    {"oob_slack", test_oob_slack},
	    {"oob_before", test_oob_before},
	    {"oob_read", test_oob_read},
	    {"host_fault", test_host_fault},
	    {"spin_flag", test_spin_flag},
	    {"perf", test_perf},
	    {"wgmma", test_wgmma},
	    {"wgmma_mma", test_wgmma_mma},
	    {"wgmma_ok", test_wgmma_bug},
	    {"wgmma_acc_read", test_wgmma_bug},
	    {"wgmma_acc_write", test_wgmma_bug},
	    {"wgmma_a_changed", test_wgmma_bug},
	    {"wgmma_smem_inflight", test_wgmma_bug},
	    {"wgmma_no_fence", test_wgmma_bug},
	    {"wgmma_no_proxy_fence", test_wgmma_bug},
	    {"wgmma_desc_mismatch", test_wgmma_bug},
	    {"wgmma_base_offset", test_wgmma_bug},
	    {"wgmma_past_end", test_wgmma_bug},
	    {"wgmma_outside", test_wgmma_bug},
	    {"wgmma_uncommitted", test_wgmma_bug},
	    {"wgmma_pending_exit", test_wgmma_bug},
	    {"wgmma_cvta_global", test_wgmma_bug},
	    {"wgmma_lane_missing", test_wgmma_bug},
	    {"wgmma_warp_missing", test_wgmma_bug},
	    {"wgmma_swizzle_misaligned", test_wgmma_bug},
	    {"wgmma_wait1", test_wgmma_bug},
	    {"wgmma_acc_after_fence", test_wgmma_bug},
	    {"wgmma_a_after_fence", test_wgmma_bug},
	    {"wgmma_not_sm90a", test_wgmma_bug},
	    {"cpasync", test_cpasync},
	    {"cpasync_read_early", test_cpasync},
	    {"cpasync_dst_write", test_cpasync},
	    {"cpasync_src_write", test_cpasync},
	    {"cpasync_exit_pending", test_cpasync},
	    {"cpasync_misaligned_dst", test_cpasync},
	    {"cpasync_misaligned_src", test_cpasync},
	    {"cpasync_dst_global", test_cpasync},
	    {"cpasync_src_size", test_cpasync},
	    {"cpasync_src_oob", test_cpasync},
	    {"cpasync_uncommitted", test_cpasync},
	    {"cpasync_no_sync", test_cpasync},
	    {"cpasync_overlap", test_cpasync},
	    {"cpasync_empty_group", test_cpasync},
	    {"cpasync_spin", test_cpasync_spin},
	    {"cpasync_wgmma_ok", test_cpasync_wgmma},
	    {"cpasync_no_proxy_fence", test_cpasync_wgmma},
	};
	if (strcmp(argv[2], "list") == 0) {
		for (auto& t : tests) printf("%s\n", t.first.c_str());
		return 0;
	}
	auto it = tests.find(argv[2]);
	if (it == tests.end()) {
		printf("unknown test %s\n", argv[2]);
		return 2;
	}
	load(argv[1]);
	it->second(argv[2]);
	if (failures) return 1;
	printf("PASS\n");
	return 0;
}
