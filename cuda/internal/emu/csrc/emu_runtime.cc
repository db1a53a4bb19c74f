// emu_runtime.cc: kernel execution for the CPU emulator.
//
// Blocks are spread over a few host threads (workers: one per CPU, at most
// 8, or GDROTRAIN_EMU_WORKERS), which run different blocks in parallel as
// the multiprocessors of a GPU do: atomics and races between blocks are
// real. __shared__ variables are thread_local statics, so every worker has
// its own copy for the block it runs. On a worker, the threads of a block
// are fibers (user-level contexts with stacks of their own) that run until
// they reach a barrier, a warp operation or the end:
//
//   - a warp operation (shuffle, ballot, __syncwarp) completes when every
//     live lane of its mask has reached one; the worker then computes each
//     lane's result from the values all of them posted, as the hardware
//     does, and lets them go on;
//   - __syncthreads completes when every live thread of the block waits at
//     it; threads that have returned no longer count, as on the GPU, so
//     "if (i >= n) return;" before a __syncthreads the rest reach is fine;
//   - when nothing can go on (threads waiting at different barriers), the
//     worker reports the deadlock and aborts the process instead of hanging.
//
// Between two synchronisation points the threads of a block run one after
// another, forwards in even blocks and backwards in odd ones, so a missing
// __syncthreads (one thread reading shared memory another has not written
// yet) gives wrong results every time rather than now and then.
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "emu_internal.h"

#if !defined(__x86_64__) || defined(EMU_FIBER_UCONTEXT)
#define EMU_UCONTEXT 1
#include <ucontext.h>
#endif

#pragma GCC visibility push(hidden)
__thread uint3 threadIdx;
__thread uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;
#pragma GCC visibility pop

// ---- context switching ----
#ifndef EMU_UCONTEXT
// emu_ctx_switch saves the callee-saved registers on the current stack,
// stores the stack pointer in *save and resumes the context whose stack
// pointer is next. A new context starts in emu_ctx_start, which calls
// rbx(r12).
extern "C" void emu_ctx_switch(void** save, void* next);
extern "C" void emu_ctx_start(void);
asm(R"(
	.pushsection .text
	.p2align 4
	.globl emu_ctx_switch
	.hidden emu_ctx_switch
	.type emu_ctx_switch, @function
emu_ctx_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size emu_ctx_switch, .-emu_ctx_switch

	.p2align 4
	.globl emu_ctx_start
	.hidden emu_ctx_start
	.type emu_ctx_start, @function
emu_ctx_start:
	movq %r12, %rdi
	andq $-16, %rsp
	callq *%rbx
	ud2
	.size emu_ctx_start, .-emu_ctx_start
	.popsection
)");
#endif

namespace emu {
namespace {

constexpr unsigned kMaxThreads = 1024;
constexpr unsigned kMaxWarps = kMaxThreads / 32;

long futex(int* addr, int op, int val, const struct timespec* ts) {
	return syscall(SYS_futex, addr, op, val, ts, nullptr, 0);
}
void futex_wake_all(int* addr) { futex(addr, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr); }
inline int load_acq(int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

const char* g_kernel_name = "";  // for messages

[[noreturn]] void die(const char* what) {
	fprintf(stderr, "gdrotrain CUDA emulator: kernel %s: %s; aborting\n", g_kernel_name, what);
	fflush(stderr);
	abort();
}

// wait_change blocks until *word != old.
void wait_change(int* word, int old) {
	for (int i = 0; i < 100; i++) {
		if (load_acq(word) != old) return;
#if defined(__x86_64__)
		__builtin_ia32_pause();
#endif
	}
	while (load_acq(word) == old) futex(word, FUTEX_WAIT_PRIVATE, old, nullptr);
}

enum { F_RUN, F_WARP, F_BLOCK, F_DONE };
enum { OP_SHFL, OP_BALLOT, OP_SYNC, OP_MMA };

// What a lane posts for emu_mma_bf16_16816.
struct MmaFrags {
	float* c;
	const unsigned* a;
	const unsigned* b;
};

struct Worker;

struct Fiber {
	void* sp = nullptr;  // saved stack pointer while suspended
	char* stack = nullptr;
	size_t stack_size = 0;
	size_t colour = 0;  // bytes left unused at the top, so stacks do not all share cache sets
#ifdef EMU_UCONTEXT
	ucontext_t uc;
#endif
	Worker* w = nullptr;
	uint3 tid;
	unsigned lin = 0;
	int state = F_DONE;
	// What a waiting fiber posted, and what it gets back.
	int op = 0, mode = 0, b = 0, width = 32, pred = 0;
	unsigned mask = 0;
	unsigned long long val = 0, result = 0;
};

struct Worker {
	pthread_t th;
	unsigned idx = 0;
	int go = 0;  // futex word: incremented for each launch the worker joins
	void* sched_sp = nullptr;
#ifdef EMU_UCONTEXT
	ucontext_t sched_uc;
#endif
	Fiber* fibers = nullptr;  // kMaxThreads of them
};

size_t g_stack_size = 0;
__thread Fiber* t_fiber = nullptr;

struct Launch {
	const emu_kernel_desc* k;
	void** params;
	const char* packed;
	unsigned grid[3], block[3], nthreads, nworkers;
	unsigned long long nblocks, next_block;
	int remaining;
	int done;  // futex word
} g_launch;

std::vector<Worker*> g_workers;

// ---- fibers ----

void fiber_main(void* arg) {
	Fiber* f = static_cast<Fiber*>(arg);
	const Launch& L = g_launch;
	if (L.params)
		L.k->call(L.params);
	else
		L.k->call_packed(L.packed);
	f->state = F_DONE;
#ifdef EMU_UCONTEXT
	swapcontext(&f->uc, &f->w->sched_uc);
#else
	emu_ctx_switch(&f->sp, f->w->sched_sp);
#endif
	__builtin_unreachable();
}

#ifdef EMU_UCONTEXT
void fiber_trampoline(unsigned lo, unsigned hi) { fiber_main((void*)(((uintptr_t)hi << 32) | lo)); }
#endif

bool ensure_stack(Fiber* f, unsigned i) {
	if (f->stack) return true;
	f->colour = (size_t)(i * 7 % 64) * 64 + (size_t)(i % 4) * 4096;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t size = (g_stack_size + page - 1) / page * page;
	void* p = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) return false;
	mprotect(p, page, PROT_NONE);  // guard page: an overflow faults
	f->stack = (char*)p + page;
	f->stack_size = size;
	return true;
}

void fiber_reset(Fiber* f) {
	f->state = F_RUN;
#ifdef EMU_UCONTEXT
	getcontext(&f->uc);
	f->uc.uc_stack.ss_sp = f->stack;
	f->uc.uc_stack.ss_size = f->stack_size - f->colour;
	f->uc.uc_link = nullptr;
	uintptr_t a = (uintptr_t)f;
	makecontext(&f->uc, (void (*)())fiber_trampoline, 2, (unsigned)(a & 0xffffffffu), (unsigned)(a >> 32));
#else
	void** sp = (void**)(((uintptr_t)f->stack + f->stack_size - f->colour) & ~(uintptr_t)15);
	*--sp = nullptr;               // alignment
	*--sp = (void*)emu_ctx_start;  // return address
	*--sp = nullptr;               // rbp
	*--sp = (void*)fiber_main;     // rbx: the function
	*--sp = (void*)f;              // r12: its argument
	*--sp = nullptr;               // r13
	*--sp = nullptr;               // r14
	*--sp = nullptr;               // r15
	f->sp = sp;
#endif
}

inline void resume(Worker* w, Fiber* f) {
	t_fiber = f;
	threadIdx = f->tid;
#ifdef EMU_UCONTEXT
	swapcontext(&w->sched_uc, &f->uc);
#else
	emu_ctx_switch(&w->sched_sp, f->sp);
#endif
}

inline void suspend(Fiber* f) {
#ifdef EMU_UCONTEXT
	swapcontext(&f->uc, &f->w->sched_uc);
#else
	emu_ctx_switch(&f->sp, f->w->sched_sp);
#endif
}

// shfl_src is the lane a shuffle reads (PTX shfl.sync with c = ((32 -
// width) << 8) | (up ? 0 : 31)), or -1 for the caller's own value.
int shfl_src(int lane, int mode, int b, int width) {
	const int bval = b & 31, segmask = (32 - width) & 31, cval = mode == 1 ? 0 : 31;
	const int maxLane = (lane & segmask) | (cval & ~segmask), minLane = lane & segmask;
	int j;
	bool ok;
	switch (mode) {
	case 0: j = minLane | (bval & ~segmask); ok = j <= maxLane; break;
	case 1: j = lane - bval; ok = j >= maxLane; break;
	case 2: j = lane + bval; ok = j <= maxLane; break;
	default: j = lane ^ bval; ok = j <= maxLane; break;
	}
	return ok ? j : -1;
}

[[noreturn]] void deadlock(Worker* w) {
	std::string msg = "deadlock in block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
	                  std::to_string(blockIdx.z) + "): threads wait at different barriers:";
	int shown = 0;
	for (unsigned i = 0; i < g_launch.nthreads && shown < 8; i++) {
		Fiber* f = &w->fibers[i];
		if (f->state == F_DONE) continue;
		msg += " thread (" + std::to_string(f->tid.x) + "," + std::to_string(f->tid.y) + "," +
		       std::to_string(f->tid.z) + ") at " + (f->state == F_BLOCK ? "__syncthreads" : "a warp operation");
		if (f->state == F_WARP) {
			char m[24];
			snprintf(m, sizeof m, " (mask %08x)", f->mask);
			msg += m;
		}
		msg += ";";
		shown++;
	}
	msg += " CUDA requires every live thread of the block at __syncthreads, and every live lane of the mask at a "
	       "warp operation";
	die(msg.c_str());
}

static float bf16_at(unsigned reg, int hi) { return __builtin_bit_cast(float, (hi ? reg >> 16 : reg & 0xffffu) << 16); }

// mma_warp computes the m16n8k16 bf16 product of a full warp from the
// fragments its 32 lanes posted. With g = lane / 4 and t = lane % 4 (the
// PTX ISA's groupID and threadID_in_group), lane holds A (16 × 16, row
// major) rows g and g+8 at columns 2t, 2t+1 (registers 0 and 1) and 2t+8,
// 2t+9 (registers 2 and 3), the lower index in the lower half; B (16 × 8)
// column g at rows 2t, 2t+1 (register 0) and 2t+8, 2t+9 (register 1); and C
// rows g (c0, c1) and g+8 (c2, c3) at columns 2t, 2t+1. Products of bf16
// are exact in float; each output adds them to C one k at a time, in
// float (the hardware's order is unspecified).
static void mma_warp(Fiber* wf) {
	float A[16][16], B[16][8];
	for (int l = 0; l < 32; l++) {
		const MmaFrags* m = (const MmaFrags*)(uintptr_t)wf[l].val;
		int g = l >> 2, t = l & 3;
		for (int h = 0; h < 2; h++) {
			A[g][2 * t + h] = bf16_at(m->a[0], h);
			A[g + 8][2 * t + h] = bf16_at(m->a[1], h);
			A[g][2 * t + 8 + h] = bf16_at(m->a[2], h);
			A[g + 8][2 * t + 8 + h] = bf16_at(m->a[3], h);
			B[2 * t + h][g] = bf16_at(m->b[0], h);
			B[2 * t + 8 + h][g] = bf16_at(m->b[1], h);
		}
	}
	for (int l = 0; l < 32; l++) {
		const MmaFrags* m = (const MmaFrags*)(uintptr_t)wf[l].val;
		int g = l >> 2, t = l & 3;
		for (int i = 0; i < 4; i++) {
			int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
			float acc = m->c[i];
			for (int k = 0; k < 16; k++) {
				volatile float p = A[row][k] * B[k][col];  // exact; no contraction with the add
				acc = acc + p;
			}
			m->c[i] = acc;
		}
	}
}

// complete_warp finishes the warp operations of a warp whose lanes have
// all arrived, and returns the lanes it let go (0 if none).
unsigned complete_warp(Fiber* wf, unsigned lanes, unsigned waiting, unsigned live_mask) {
	unsigned group = 0;
	for (unsigned l = 0; l < lanes; l++) {
		if (!(waiting >> l & 1)) continue;
		unsigned need = (wf[l].mask & live_mask) | (1u << l);
		if ((need & ~waiting) == 0) group |= 1u << l;
	}
	bool mma = false;
	for (unsigned l = 0; l < lanes; l++) {
		if (!(group >> l & 1)) continue;
		Fiber* f = &wf[l];
		if (f->op == OP_MMA) {
			if (group != 0xffffffffu || lanes != 32) {
				die("mma.sync needs all 32 lanes of the warp, each calling it");
			}
			mma = true;
		} else if (f->op == OP_SHFL) {
			int j = shfl_src((int)l, f->mode, f->b, f->width);
			f->result = (j >= 0 && (unsigned)j < lanes && (group >> j & 1)) ? wf[j].val : f->val;
		} else if (f->op == OP_BALLOT) {
			unsigned r = 0, from = group & f->mask;
			for (unsigned m = 0; m < lanes; m++)
				if ((from >> m & 1) && wf[m].pred) r |= 1u << m;
			f->result = r;
		}
	}
	if (mma) {
		for (unsigned l = 0; l < lanes; l++) {
			if (wf[l].op != OP_MMA) die("mma.sync: lanes of the warp are at different warp operations");
		}
		mma_warp(wf);
	}
	return group;
}

// run_block runs one block on worker w: rounds in which every runnable
// thread runs to its next synchronisation point, then the operations all
// their threads have reached complete.
void run_block(Worker* w, bool backwards) {
	Fiber* fs = w->fibers;
	const unsigned n = g_launch.nthreads;
	const unsigned nwarps = (n + 31) / 32;
	unsigned live_mask[kMaxWarps], waiting[kMaxWarps];
	unsigned short runq[kMaxThreads];
	unsigned nrun = 0, live = n, at_block = 0;
	unsigned pending = 0;  // warps with lanes waiting, or whose lanes exited
	int count = 0;         // __syncthreads_count so far
	for (unsigned j = 0; j < n; j++) {
		unsigned i = backwards ? n - 1 - j : j;
		fiber_reset(&fs[i]);
		runq[nrun++] = (unsigned short)i;
	}
	for (unsigned k = 0; k < nwarps; k++) {
		live_mask[k] = n - 32 * k >= 32 ? 0xffffffffu : (1u << (n - 32 * k)) - 1;
		waiting[k] = 0;
	}
	for (;;) {
		for (unsigned r = 0; r < nrun; r++) {
			unsigned i = runq[r];
			Fiber* f = &fs[i];
			resume(w, f);
			unsigned k = i / 32, bit = 1u << (i % 32);
			switch (f->state) {
			case F_DONE:
				live--;
				live_mask[k] &= ~bit;
				pending |= 1u << k;
				break;
			case F_WARP:
				waiting[k] |= bit;
				pending |= 1u << k;
				break;
			case F_BLOCK:
				at_block++;
				count += f->pred;
				break;
			}
		}
		nrun = 0;
		if (live == 0) return;

		// Complete the warp operations whose lanes have all arrived.
		for (unsigned j = 0; j < nwarps; j++) {
			unsigned k = backwards ? nwarps - 1 - j : j;
			if (!(pending >> k & 1)) continue;
			pending &= ~(1u << k);
			if (!waiting[k]) continue;
			unsigned lanes = n - 32 * k >= 32 ? 32 : n - 32 * k;
			unsigned group = complete_warp(fs + 32 * k, lanes, waiting[k], live_mask[k]);
			waiting[k] &= ~group;
			for (unsigned m = 0; m < lanes; m++) {
				unsigned l = backwards ? lanes - 1 - m : m;
				if (group >> l & 1) {
					fs[32 * k + l].state = F_RUN;
					runq[nrun++] = (unsigned short)(32 * k + l);
				}
			}
		}
		if (nrun) continue;

		// __syncthreads completes when every live thread waits at it.
		if (at_block != live) deadlock(w);
		for (unsigned j = 0; j < n; j++) {
			unsigned i = backwards ? n - 1 - j : j;
			if (fs[i].state == F_BLOCK) {
				fs[i].result = (unsigned)count;
				fs[i].state = F_RUN;
				runq[nrun++] = (unsigned short)i;
			}
		}
		at_block = 0;
		count = 0;
	}
}

void run_worker(Worker* w) {
	Launch& L = g_launch;
	for (unsigned t = 0; t < L.nthreads; t++) {
		Fiber* f = &w->fibers[t];
		f->w = w;
		f->lin = t;
		f->tid = uint3{t % L.block[0], (t / L.block[0]) % L.block[1], t / (L.block[0] * L.block[1])};
	}
	const unsigned long long gxy = (unsigned long long)L.grid[0] * L.grid[1];
	for (;;) {
		unsigned long long b = __atomic_fetch_add(&L.next_block, 1, __ATOMIC_RELAXED);
		if (b >= L.nblocks) return;
		blockIdx = uint3{(unsigned)(b % L.grid[0]), (unsigned)(b / L.grid[0] % L.grid[1]), (unsigned)(b / gxy)};
		run_block(w, b & 1);
	}
}

void* worker_main(void* arg) {
	Worker* w = static_cast<Worker*>(arg);
	int seen = 0;
	for (;;) {
		wait_change(&w->go, seen);
		seen = load_acq(&w->go);
		run_worker(w);
		if (__atomic_sub_fetch(&g_launch.remaining, 1, __ATOMIC_ACQ_REL) == 0) {
			__atomic_store_n(&g_launch.done, 1, __ATOMIC_RELEASE);
			futex_wake_all(&g_launch.done);
		}
	}
	return nullptr;
}

bool ensure_workers(unsigned n) {
	if (g_workers.size() >= n) return true;
	// Workers block every signal: they never run Go code, and signals meant
	// for the process are better delivered to the threads that do.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 1u << 20);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	bool ok = true;
	while (g_workers.size() < n) {
		Worker* w = new Worker();
		w->idx = (unsigned)g_workers.size();
		w->fibers = new Fiber[kMaxThreads];
		if (pthread_create(&w->th, &attr, worker_main, w) != 0) {
			delete[] w->fibers;
			delete w;
			ok = false;
			break;
		}
		g_workers.push_back(w);
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	return ok;
}

std::unordered_map<std::string, const emu_kernel_desc*>& registry() {
	static auto* m = new std::unordered_map<std::string, const emu_kernel_desc*>();
	return *m;
}

}  // namespace

std::mutex& api_mutex() {
	static std::mutex* m = new std::mutex();
	return *m;
}

unsigned long long env_u64(const char* name, unsigned long long dflt) {
	const char* s = getenv(name);
	if (!s || !*s) return dflt;
	char* end = nullptr;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || !end || *end || s[0] == '-') {
		fprintf(stderr, "gdrotrain CUDA emulator: ignoring %s=%s (not a non-negative integer)\n", name, s);
		return dflt;
	}
	return v;
}

bool count_only() {
	const char* s = getenv("GDROTRAIN_EMU_COUNT_ONLY");
	return s && s[0] == '1';
}

bool fault_listed(const char* name) {
	const char* s = getenv("GDROTRAIN_EMU_FAULT");
	if (!s) return false;
	const size_t n = strlen(name);
	while (*s) {
		while (*s == ',' || *s == ' ') s++;
		const char* e = s;
		while (*e && *e != ',' && *e != ' ') e++;
		if ((size_t)(e - s) == n && n > 0 && strncmp(s, name, n) == 0) {
			static auto* told = new std::unordered_map<std::string, bool>();
			if (!(*told)[name]) {
				(*told)[name] = true;
				fprintf(stderr, "gdrotrain CUDA emulator: GDROTRAIN_EMU_FAULT: %s %s\n",
				        strcmp(name, "gemm") == 0 ? "perturbing every cuBLAS GEMM" : "not running kernel", name);
			}
			return true;
		}
		s = e;
	}
	return false;
}

const emu_kernel_desc* find_kernel(const char* name) {
	auto& r = registry();
	auto it = r.find(name);
	return it == r.end() ? nullptr : it->second;
}

int launch(const emu_kernel_desc* k, const unsigned grid[3], const unsigned block[3], void** params,
           const char* packed) {
	const unsigned n = block[0] * block[1] * block[2];
	const unsigned long long nblocks = (unsigned long long)grid[0] * grid[1] * grid[2];
	static const unsigned ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long long want = env_u64("GDROTRAIN_EMU_WORKERS", ncpu < 8 ? ncpu : 8);
	if (want > 256) want = 256;
	unsigned nw = (unsigned)(want < 1 ? 1 : want > nblocks ? nblocks : want);
	if (!ensure_workers(nw)) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	if (!g_stack_size) {
		unsigned long long kb = env_u64("GDROTRAIN_EMU_STACK_KB", 256);
		g_stack_size = (size_t)(kb < 32 ? 32 : kb > (1u << 20) ? (1u << 20) : kb) << 10;
	}
	for (unsigned w = 0; w < nw; w++)
		for (unsigned i = 0; i < n; i++)
			if (!ensure_stack(&g_workers[w]->fibers[i], i)) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	g_kernel_name = k->name;

	Launch& L = g_launch;
	L.k = k;
	L.params = params;
	L.packed = packed;
	for (int d = 0; d < 3; d++) {
		L.grid[d] = grid[d];
		L.block[d] = block[d];
	}
	L.nthreads = n;
	L.nworkers = nw;
	L.nblocks = nblocks;
	L.next_block = 0;
	L.remaining = (int)nw;
	L.done = 0;
	blockDim = dim3(block[0], block[1], block[2]);
	gridDim = dim3(grid[0], grid[1], grid[2]);
	for (unsigned i = 0; i < nw; i++) {
		Worker* w = g_workers[i];
		__atomic_add_fetch(&w->go, 1, __ATOMIC_RELEASE);
		futex(&w->go, FUTEX_WAKE_PRIVATE, 1, nullptr);
	}
	while (load_acq(&L.done) == 0) futex(&L.done, FUTEX_WAIT_PRIVATE, 0, nullptr);
	g_kernel_name = "";
	return CUDA_SUCCESS;
}

#if GDROTRAIN_EMU_FMA
namespace {
// Built with GDROTRAIN_EMU_FMA=1: code past this point may use FMA
// instructions, which would be SIGILL on a CPU without them.
__attribute__((constructor)) void check_fma() {
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("fma")) {
		fprintf(stderr, "gdrotrain CUDA emulator: built with GDROTRAIN_EMU_FMA=1, but this CPU has no FMA; "
		                "rebuild it without\n");
		abort();
	}
}
}  // namespace
#endif

}  // namespace emu

using namespace emu;

extern "C" {

void emu_register_kernel(const emu_kernel_desc* k) { registry().emplace(k->name, k); }

void emu_syncthreads(void) {
	Fiber* f = t_fiber;
	f->pred = 0;
	f->state = F_BLOCK;
	suspend(f);
}

int emu_syncthreads_count(int pred) {
	Fiber* f = t_fiber;
	f->pred = pred != 0;
	f->state = F_BLOCK;
	suspend(f);
	return (int)f->result;
}

void emu_syncwarp(unsigned mask) {
	Fiber* f = t_fiber;
	f->op = OP_SYNC;
	f->mask = mask;
	f->state = F_WARP;
	suspend(f);
}

unsigned long long emu_shfl(unsigned long long v, int mode, int b, int width, unsigned mask) {
	Fiber* f = t_fiber;
	f->op = OP_SHFL;
	f->val = v;
	f->mode = mode;
	f->b = b;
	f->width = width;
	f->mask = mask;
	f->state = F_WARP;
	suspend(f);
	return f->result;
}

void emu_mma_bf16_16816(float* c, const unsigned* a, const unsigned* b) {
	Fiber* f = t_fiber;
	MmaFrags m{c, a, b};
	f->op = OP_MMA;
	f->val = (unsigned long long)(uintptr_t)&m;
	f->mask = 0xffffffffu;
	f->state = F_WARP;
	suspend(f);
}

unsigned emu_ballot(int pred, unsigned mask) {
	Fiber* f = t_fiber;
	f->op = OP_BALLOT;
	f->pred = pred != 0;
	f->mask = mask;
	f->state = F_WARP;
	suspend(f);
	return (unsigned)f->result;
}

unsigned emu_activemask(void) {
	Fiber* f = t_fiber;
	unsigned base = f->lin & ~31u, n = g_launch.nthreads - base;
	unsigned m = n >= 32 ? 0xffffffffu : (1u << n) - 1;
	Fiber* wf = &f->w->fibers[base];
	for (unsigned l = 0; l < 32 && l < n; l++)
		if (wf[l].state == F_DONE && &wf[l] != f) m &= ~(1u << l);
	return m;
}

}  // extern "C"
