// emu.h: included before every kernel source when the CPU emulator is built.
// It maps the CUDA C++ subset our kernels use onto g++ (see the package doc
// of internal/testinfra/cudaemu). It aims to provide what NVRTC provides built in and
// little more, so that a kernel that compiles here also compiles there.
#pragma once

#include <math.h>
#include "emu_abi.h"

// <math.h> defines macros that NVRTC does not have built in; drop them so
// that kernels relying on them fail here too.
#undef INFINITY
#undef NAN
#undef HUGE_VAL
#undef HUGE_VALF
#undef HUGE_VALL
#undef MAXFLOAT
#undef M_E
#undef M_LOG2E
#undef M_LOG10E
#undef M_LN2
#undef M_LN10
#undef M_PI
#undef M_PI_2
#undef M_PI_4
#undef M_1_PI
#undef M_2_PI
#undef M_2_SQRTPI
#undef M_SQRT2
#undef M_SQRT1_2

#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define __CUDA_ARCH__ 900
#define GDROTRAIN_CUDA_EMULATOR 1

// ---- declaration specifiers ----
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
// A block's threads all run on one host thread and blocks on different host
// threads run in parallel, so a block's shared memory is a thread_local. The
// build finds each kernel's in its object code (shared.go), and the runtime
// poisons them at every block's start.
#define __shared__ static thread_local
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_assume_aligned_emu(p, n) (p)

#pragma GCC visibility push(hidden)

extern "C" int printf(const char*, ...);

static const int warpSize = 32;

// ---- vector types ----
#define EMU_VEC2(T, N, A)                                                       \
	struct __attribute__((aligned(A))) N##2 { T x, y; };                        \
	static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define EMU_VEC3(T, N)                                                          \
	struct N##3 { T x, y, z; };                                                 \
	static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define EMU_VEC4(T, N, A)                                                       \
	struct __attribute__((aligned(A))) N##4 { T x, y, z, w; };                  \
	static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
EMU_VEC2(float, float, 8)
EMU_VEC3(float, float)
EMU_VEC4(float, float, 16)
EMU_VEC2(int, int, 8)
EMU_VEC3(int, int)
EMU_VEC4(int, int, 16)
EMU_VEC2(unsigned, uint, 8)
EMU_VEC4(unsigned, uint, 16)
EMU_VEC2(double, double, 16)
EMU_VEC2(short, short, 4)
EMU_VEC4(short, short, 8)
EMU_VEC2(unsigned short, ushort, 4)
EMU_VEC4(unsigned short, ushort, 8)
EMU_VEC2(long long, longlong, 16)
EMU_VEC2(unsigned long long, ulonglong, 16)
#undef EMU_VEC2
#undef EMU_VEC3
#undef EMU_VEC4
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

// ---- synchronisation and warp operations ----
static inline void __syncthreads() { emu_syncthreads(); }
static inline int __syncthreads_count(int p) { return emu_syncthreads_count(p); }
static inline int __syncthreads_and(int p) { return emu_syncthreads_count(!p) == 0; }
static inline int __syncthreads_or(int p) { return emu_syncthreads_count(p) != 0; }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { emu_syncwarp(mask); }
// Fences and atomics are preemption points: other threads of the block may
// run between a thread's accesses around them (see emu_runtime.cc).
static inline void __threadfence() { emu_preempt(1); __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { emu_preempt(1); __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { emu_preempt(1); __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#define EMU_PREEMPT_ATOMIC emu_preempt(4)

template <typename T> static inline unsigned long long emu_to_bits(T v) {
	static_assert(sizeof(T) == 4 || sizeof(T) == 8, "shuffle of a 4- or 8-byte type");
	if constexpr (sizeof(T) == 4) {
		return __builtin_bit_cast(unsigned, v);
	} else {
		return __builtin_bit_cast(unsigned long long, v);
	}
}
template <typename T> static inline T emu_from_bits(unsigned long long u) {
	if constexpr (sizeof(T) == 4) {
		return __builtin_bit_cast(T, (unsigned)u);
	} else {
		return __builtin_bit_cast(T, u);
	}
}
#define EMU_SHFL(T)                                                                              \
	static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {                  \
		return emu_from_bits<T>(emu_shfl(emu_to_bits(v), 0, src, width, mask));                       \
	}                                                                                            \
	static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {        \
		return emu_from_bits<T>(emu_shfl(emu_to_bits(v), 1, (int)delta, width, mask));                \
	}                                                                                            \
	static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {      \
		return emu_from_bits<T>(emu_shfl(emu_to_bits(v), 2, (int)delta, width, mask));                \
	}                                                                                            \
	static inline T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32) {         \
		return emu_from_bits<T>(emu_shfl(emu_to_bits(v), 3, laneMask, width, mask));                   \
	}
EMU_SHFL(int)
EMU_SHFL(unsigned)
EMU_SHFL(long)
EMU_SHFL(unsigned long)
EMU_SHFL(long long)
EMU_SHFL(unsigned long long)
EMU_SHFL(float)
EMU_SHFL(double)
#undef EMU_SHFL
static inline unsigned __ballot_sync(unsigned mask, int pred) { return emu_ballot(pred, mask); }
static inline int __any_sync(unsigned mask, int pred) { return emu_ballot(pred, mask) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return emu_ballot(!pred, mask) == 0; }
static inline unsigned __activemask() { return emu_activemask(); }
// NVRTC has __cvta_generic_to_shared built in (the wgmma functions are
// emu_wgmma_* of emu_abi.h, and cp.async's emu_cp_async16,
// emu_cp_async_commit and emu_cp_async_wait: kernels call them where they
// use inline PTX).
static inline size_t __cvta_generic_to_shared(const void* p) { return emu_cvta_shared(p); }

// ---- atomics (real atomics: the threads of a block run in parallel) ----
#define EMU_ATOMIC_INT(T)                                                                     \
	static inline T atomicAdd(T* p, T v) { EMU_PREEMPT_ATOMIC; return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); } \
	static inline T atomicSub(T* p, T v) { EMU_PREEMPT_ATOMIC; return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); } \
	static inline T atomicExch(T* p, T v) { EMU_PREEMPT_ATOMIC; return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); } \
	static inline T atomicAnd(T* p, T v) { EMU_PREEMPT_ATOMIC; return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); } \
	static inline T atomicOr(T* p, T v) { EMU_PREEMPT_ATOMIC; return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }   \
	static inline T atomicXor(T* p, T v) { EMU_PREEMPT_ATOMIC; return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); } \
	static inline T atomicCAS(T* p, T cmp, T v) {                                             \
		EMU_PREEMPT_ATOMIC;                                                                   \
		__atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);  \
		return cmp;                                                                           \
	}                                                                                         \
	static inline T atomicMax(T* p, T v) {                                                    \
		EMU_PREEMPT_ATOMIC;                                                                   \
		T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                        \
		while (old < v &&                                                                     \
		       !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) \
			;                                                                                 \
		return old;                                                                           \
	}                                                                                         \
	static inline T atomicMin(T* p, T v) {                                                    \
		EMU_PREEMPT_ATOMIC;                                                                   \
		T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                        \
		while (old > v &&                                                                     \
		       !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) \
			;                                                                                 \
		return old;                                                                           \
	}
EMU_ATOMIC_INT(int)
EMU_ATOMIC_INT(unsigned)
EMU_ATOMIC_INT(unsigned long long)
#undef EMU_ATOMIC_INT
static inline long long atomicMax(long long* p, long long v) {
	EMU_PREEMPT_ATOMIC;
	long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
	while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	return old;
}
static inline long long atomicMin(long long* p, long long v) {
	EMU_PREEMPT_ATOMIC;
	long long old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
	while (old > v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	return old;
}
static inline unsigned atomicInc(unsigned* p, unsigned lim) {
	EMU_PREEMPT_ATOMIC;
	unsigned old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
	while (!__atomic_compare_exchange_n(p, &old, old >= lim ? 0u : old + 1, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	return old;
}
static inline unsigned atomicDec(unsigned* p, unsigned lim) {
	EMU_PREEMPT_ATOMIC;
	unsigned old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
	while (!__atomic_compare_exchange_n(p, &old, (old == 0 || old > lim) ? lim : old - 1, true, __ATOMIC_SEQ_CST,
	                                    __ATOMIC_SEQ_CST))
		;
	return old;
}
static inline float atomicAdd(float* p, float v) {
	EMU_PREEMPT_ATOMIC;
	unsigned* u = (unsigned*)p;
	unsigned old = __atomic_load_n(u, __ATOMIC_SEQ_CST);
	for (;;) {
		float f = __builtin_bit_cast(float, old);
		if (__atomic_compare_exchange_n(u, &old, __builtin_bit_cast(unsigned, f + v), true, __ATOMIC_SEQ_CST,
		                                __ATOMIC_SEQ_CST))
			return f;
	}
}
static inline double atomicAdd(double* p, double v) {
	EMU_PREEMPT_ATOMIC;
	unsigned long long* u = (unsigned long long*)p;
	unsigned long long old = __atomic_load_n(u, __ATOMIC_SEQ_CST);
	for (;;) {
		double f = __builtin_bit_cast(double, old);
		if (__atomic_compare_exchange_n(u, &old, __builtin_bit_cast(unsigned long long, f + v), true, __ATOMIC_SEQ_CST,
		                                __ATOMIC_SEQ_CST))
			return f;
	}
}
static inline float atomicExch(float* p, float v) {
	EMU_PREEMPT_ATOMIC;
	return __builtin_bit_cast(float, __atomic_exchange_n((unsigned*)p, __builtin_bit_cast(unsigned, v), __ATOMIC_SEQ_CST));
}

// ---- bit casts and conversions ----
static constexpr inline unsigned __float_as_uint(float f) { return __builtin_bit_cast(unsigned, f); }
static constexpr inline float __uint_as_float(unsigned u) { return __builtin_bit_cast(float, u); }
static constexpr inline int __float_as_int(float f) { return __builtin_bit_cast(int, f); }
static constexpr inline float __int_as_float(int i) { return __builtin_bit_cast(float, i); }
static constexpr inline long long __double_as_longlong(double d) { return __builtin_bit_cast(long long, d); }
static constexpr inline double __longlong_as_double(long long i) { return __builtin_bit_cast(double, i); }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)truncf(x); }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline unsigned __float2uint_rz(float x) { return (unsigned)truncf(x); }
static inline long long __float2ll_rn(float x) { return (long long)nearbyintf(x); }
static inline long long __float2ll_rz(float x) { return (long long)truncf(x); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline float __double2float_rn(double x) { return (float)x; }

// ---- float intrinsics ----
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline float sinpif(float x) { return sinf(3.14159265358979323846f * x); }
static inline float cospif(float x) { return cosf(3.14159265358979323846f * x); }
static inline void sincospif(float x, float* s, float* c) { sincosf(3.14159265358979323846f * x, s, c); }
// glibc declares __expf and friends itself, so these go through macros.
#define __expf emu_expf_
#define __exp10f emu_exp10f_
#define __logf emu_logf_
#define __log2f emu_log2f_
#define __log10f emu_log10f_
#define __powf emu_powf_
#define __sinf emu_sinf_
#define __cosf emu_cosf_
#define __tanf emu_tanf_
#define __sincosf emu_sincosf_
static inline float emu_expf_(float x) { return expf(x); }
static inline float emu_exp10f_(float x) { return exp10f(x); }
static inline float emu_logf_(float x) { return logf(x); }
static inline float emu_log2f_(float x) { return log2f(x); }
static inline float emu_log10f_(float x) { return log10f(x); }
static inline float emu_powf_(float x, float y) { return powf(x, y); }
static inline float emu_sinf_(float x) { return sinf(x); }
static inline float emu_cosf_(float x) { return cosf(x); }
static inline float emu_tanf_(float x) { return tanf(x); }
static inline void emu_sincosf_(float x, float* s, float* c) { sincosf(x, s, c); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
// __fadd_rn, __fsub_rn, __fmul_rn (and __dadd_rn, __dmul_rn) are never contracted into an FMA, even
// in a GDROTRAIN_EMU_FMA=1 build: the empty asm hides their operands (or
// product) from g++'s contraction, as the intrinsics do from nvcc's.
template <typename T>
static inline T emu_opaque_(T x) {
#if defined(__x86_64__)
	__asm__("" : "+x"(x));
#else
	__asm__("" : "+r"(x));
#endif
	return x;
}
static inline float __fadd_rn(float a, float b) { return emu_opaque_(a) + emu_opaque_(b); }
static inline float __fsub_rn(float a, float b) { return emu_opaque_(a) - emu_opaque_(b); }
static inline float __fmul_rn(float a, float b) { return emu_opaque_(a * b); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return emu_opaque_(a) + emu_opaque_(b); }
static inline double __dmul_rn(double a, double b) { return emu_opaque_(a * b); }
static inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }

// ---- integer intrinsics ----
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
	unsigned r = 0;
	for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
	return r;
}
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
	return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __mul24(int a, int b) { return a * b; }
static inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }

template <typename T> static inline T __ldg(const T* p) { return *p; }

// ---- min / max: the overload set of CUDA's math_functions.hpp ----
#define EMU_MINMAX(R, A, B)                                                   \
	static inline R min(A a, B b) { return (R)a < (R)b ? (R)a : (R)b; }    \
	static inline R max(A a, B b) { return (R)a > (R)b ? (R)a : (R)b; }
EMU_MINMAX(int, int, int)
EMU_MINMAX(unsigned, unsigned, unsigned)
EMU_MINMAX(unsigned, int, unsigned)
EMU_MINMAX(unsigned, unsigned, int)
EMU_MINMAX(long, long, long)
EMU_MINMAX(unsigned long, unsigned long, unsigned long)
EMU_MINMAX(unsigned long, long, unsigned long)
EMU_MINMAX(unsigned long, unsigned long, long)
EMU_MINMAX(long long, long long, long long)
EMU_MINMAX(unsigned long long, unsigned long long, unsigned long long)
EMU_MINMAX(unsigned long long, long long, unsigned long long)
EMU_MINMAX(unsigned long long, unsigned long long, long long)
#undef EMU_MINMAX
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(float a, double b) { return fmin(a, b); }
static inline double max(float a, double b) { return fmax(a, b); }
static inline double min(double a, float b) { return fmin(a, b); }
static inline double max(double a, float b) { return fmax(a, b); }

// ---- trampolines: unpack cuLaunchKernel arguments by the kernel's own
// parameter types (deduced from its function type) ----
template <unsigned... I> struct emu_seq {};
template <unsigned N, unsigned... I> struct emu_mkseq : emu_mkseq<N - 1, N - 1, I...> {};
template <unsigned... I> struct emu_mkseq<0, I...> { typedef emu_seq<I...> type; };

template <typename T> static inline T emu_load(const char* p) {
	T v;
	__builtin_memcpy((void*)&v, p, sizeof(T));
	return v;
}
template <typename... P> struct emu_kernel_traits {
	static constexpr unsigned n = sizeof...(P);
	// Offsets of the parameters in a packed buffer: each aligned to its type.
	struct layout {
		size_t off[sizeof...(P) + 1];
		constexpr layout() : off() {
			const size_t sz[] = {sizeof(P)..., 0}, al[] = {alignof(P)..., 1};
			size_t o = 0;
			for (unsigned i = 0; i < sizeof...(P); i++) {
				o = (o + al[i] - 1) / al[i] * al[i];
				off[i] = o;
				o += sz[i];
			}
			off[sizeof...(P)] = o;
		}
	};
};
// Arguments are copied out of the caller's memory, which CUDA does not
// require to be aligned for their types.
template <typename... P, unsigned... I>
static inline void emu_invoke_impl(void (*f)(P...), void** a, emu_seq<I...>) {
	(void)a;
	f(emu_load<P>((const char*)a[I])...);
}
template <typename... P> static inline void emu_invoke(void (*f)(P...), void** a) {
	emu_invoke_impl(f, a, typename emu_mkseq<sizeof...(P)>::type());
}
template <typename... P, unsigned... I>
static inline void emu_invoke_packed_impl(void (*f)(P...), const char* buf, emu_seq<I...>) {
	constexpr typename emu_kernel_traits<P...>::layout l;
	(void)buf;
	f(emu_load<P>(buf + l.off[I])...);
}
template <typename... P> static inline void emu_invoke_packed(void (*f)(P...), const char* buf) {
	emu_invoke_packed_impl(f, buf, typename emu_mkseq<sizeof...(P)>::type());
}
template <typename... P, unsigned... I>
static inline void emu_pack_impl(void (*)(P...), void** a, char* buf, emu_seq<I...>) {
	constexpr typename emu_kernel_traits<P...>::layout l;
	(void)a, (void)buf;
	int done[] = {0, (__builtin_memcpy(buf + l.off[I], a[I], sizeof(P)), 0)...};
	(void)done;
}
template <typename... P> static inline void emu_pack(void (*f)(P...), void** a, char* buf) {
	emu_pack_impl(f, a, buf, typename emu_mkseq<sizeof...(P)>::type());
}
template <typename T> struct emu_is_ptr { static constexpr bool value = false; };
template <typename T> struct emu_is_ptr<T*> { static constexpr bool value = true; };
template <typename T> static inline unsigned long long emu_ptr_of(const char* p) {
	if constexpr (emu_is_ptr<T>::value) {
		return (unsigned long long)(__UINTPTR_TYPE__)emu_load<T>(p);
	} else {
		return 0;
	}
}
template <typename... P, unsigned... I>
static inline void emu_ptrs_impl(void (*)(P...), void** a, const char* buf, unsigned long long* out, emu_seq<I...>) {
	constexpr typename emu_kernel_traits<P...>::layout l;
	(void)a, (void)buf, (void)out;
	int done[] = {0, (out[I] = emu_ptr_of<P>(a ? (const char*)a[I] : buf + l.off[I]), 0)...};
	(void)done;
}
template <typename... P> static inline void emu_ptrs(void (*f)(P...), void** a, const char* buf, unsigned long long* out) {
	emu_ptrs_impl(f, a, buf, out, typename emu_mkseq<sizeof...(P)>::type());
}
template <typename... P> static constexpr unsigned emu_nparams(void (*)(P...)) { return sizeof...(P); }
template <typename... P> static constexpr size_t emu_packed_size(void (*)(P...)) {
	constexpr typename emu_kernel_traits<P...>::layout l;
	return l.off[sizeof...(P)];
}

// One registry entry; the build generates one per extern "C" __global__.
#define EMU_KERNEL_DESC(NAME, FN)                                                                \
	{NAME, [](void** a) { emu_invoke(&FN, a); }, [](const char* b) { emu_invoke_packed(&FN, b); }, \
	 emu_nparams(&FN), emu_packed_size(&FN), [](void** a, char* b) { emu_pack(&FN, a, b); },       \
	 [](void** a, const char* b, unsigned long long* o) { emu_ptrs(&FN, a, b, o); }}

#pragma GCC visibility pop
