// emu_runtime.cc: kernel execution for the CPU emulator.
//
// Blocks are spread over a few host threads (workers: one per CPU, at most
// 8, or GDROTRAIN_EMU_WORKERS), which run different blocks in parallel as
// the multiprocessors of a GPU do: atomics and races between blocks are
// real. __shared__ variables are thread_local statics, so every worker has
// its own copy for the block it runs. On a worker, the threads of a block
// are fibers (user-level contexts with stacks of their own) that run until
// they reach a barrier, a warp operation, a preemption point or the end:
//
//   - a warp operation (shuffle, ballot, __syncwarp, mma) completes when
//     every live lane of its mask has reached one with that mask; the
//     worker then computes each lane's result from the values all of them
//     posted, as the hardware does, and lets them go on;
//   - __syncthreads completes when every live thread of the block waits at
//     it; threads that have returned no longer count, as on the GPU, so
//     "if (i >= n) return;" before a __syncthreads the rest reach is fine;
//   - when nothing can go on (threads waiting at different barriers), the
//     worker reports the deadlock and aborts the process instead of hanging.
//
// Where CUDA leaves something undefined the emulator takes the worst legal
// choice, so that a kernel relying on it fails here:
//
//   - Scheduling is adversarial and seeded. Each step runs one fiber to its
//     next synchronisation point, picked at random: a random lane of a
//     random warp, the worker keeping to the same warp with a probability
//     drawn per block (never, half the time, 15 in 16, always), so that
//     some warps run several segments ahead of others or finish a whole
//     barrier interval before another starts, and warps' operations
//     complete in any order. Atomics preempt the calling thread one time in
//     four and fences always. A missing __syncthreads or __syncwarp (a
//     thread reading shared memory another has not written yet) gives
//     wrong results under most seeds. The seed of a block mixes
//     GDROTRAIN_EMU_SEED (default 1), the launch's number since
//     GDROTRAIN_EMU_SEED_SCOPE last changed (tests set it to their name, so
//     a failure replays under -run) and the block's index; a fault report
//     names them.
//   - Shared memory is poisoned at every block's start (0xff or 0x7f
//     bytes, drawn per block: NaN, or a huge float that fmaxf does not
//     hide), using the table of each kernel's __shared__ variables the
//     build makes from its object code (emu_register_shared).
//   - A shuffle reading a lane that has exited, does not exist or is not in
//     the mask gets that poison; one whose source is outside its segment
//     of width lanes keeps its own value (defined by PTX). Lanes meeting
//     with the same mask at different operations, a mask leaving out its
//     caller, a width that is not a power of two and an mma without all 32
//     lanes abort the process, naming the kernel. __activemask is the
//     caller's lane alone (lanes run one at a time).
//   - A fault in a kernel (a guard page of device memory, an unmapped page
//     of a reservation, a null pointer: SIGSEGV or SIGBUS on a worker) or a
//     misaligned access (g++'s -fsanitize=alignment check, whose handler is
//     here) ends the launch with CUDA_ERROR_ILLEGAL_ADDRESS or
//     CUDA_ERROR_MISALIGNED_ADDRESS: the worker jumps out of the fiber,
//     the other blocks are not started, and the report names the kernel,
//     block, thread, address and seed. The driver then makes the error
//     sticky, as a GPU does. Faults elsewhere go to the handler that was
//     there before (the Go runtime's, in the backend).
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <memory>
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
constexpr unsigned kMaxWorkers = 256;
constexpr unsigned kWinBase = 1024;  // the shared window's first address (below: reserved, as on sm_90)

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

// ---- the scheduler's random numbers (splitmix64) ----
inline unsigned long long next_rand(unsigned long long* s) {
	unsigned long long z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
// below returns a number in [0, n).
inline unsigned below(unsigned long long* s, unsigned n) { return (unsigned)(((next_rand(s) >> 32) * n) >> 32); }
// pick returns a set bit of m (m != 0): the first at or after bit r,
// cyclically. For r random, every set bit can come out (those after a run
// of clear bits more often); it takes no branch, and the scheduler picks
// at every switch.
inline unsigned pick(unsigned m, unsigned r) {
	r &= 31;
	const unsigned rot = (m >> r) | (m << ((32 - r) & 31));
	return ((unsigned)__builtin_ctz(rot) + r) & 31;
}
unsigned long long mix(unsigned long long a, unsigned long long b) {
	unsigned long long s = a ^ (b * 0xd6e8feb86659fd93ull);
	return next_rand(&s);
}
unsigned long long hash_str(const char* p) {
	unsigned long long h = 14695981039346656037ull;
	for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return h;
}

enum { F_RUN, F_WARP, F_BLOCK, F_DONE, F_CPWAIT };
enum { OP_SHFL, OP_BALLOT, OP_SYNC, OP_MMA, OP_WG_FENCE, OP_WG_COMMIT, OP_WG_WAIT, OP_WG_MMA };
const char* const kOpName[] = {"a shuffle",       "a vote",           "__syncwarp",       "mma.sync",
                               "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group", "wgmma.mma_async"};

// What a lane posts for emu_mma_bf16_16816.
struct MmaFrags {
	float* c;
	const unsigned* a;
	const unsigned* b;
};

struct Worker;
struct WgBlock;
struct CpBlock;

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
	long tid = 0;  // the OS thread, for the fault handler
	int go = 0;    // futex word: incremented for each launch the worker joins
	void* sched_sp = nullptr;
#ifdef EMU_UCONTEXT
	ucontext_t sched_uc;
#endif
	Fiber* fibers = nullptr;  // kMaxThreads of them
	// This thread's threadIdx and t_fiber: resume sets them at every
	// switch, and a thread_local of a dlopen'ed library costs a call to
	// __tls_get_addr per access.
	uint3* tidx = nullptr;
	Fiber** tfib = nullptr;
	// The block being run: its random numbers and poison byte, and the
	// fiber running now (nullptr while the scheduler runs), which tells
	// the fault handler that a fault is the kernel's.
	unsigned long long rng = 0;
	unsigned long long block = 0;
	unsigned char poison = 0xff;
	Fiber* volatile cur = nullptr;
	sigjmp_buf jb;  // where a faulting fiber's block ends
	WgBlock* wg = nullptr;  // the block's wgmma state (emu_wgmma_*), made at first use
	CpBlock* cp = nullptr;  // the block's cp.async state (emu_cp_async*), made at first use
	int addr_kind = 0;      // what the address of the next fault is (Launch::fault_addr_kind)
};

size_t g_stack_size = 0;
__thread Fiber* t_fiber = nullptr;

struct Launch {
	const emu_kernel_desc* k;
	const emu_kernel_shared* shared;  // its __shared__ variables, or nullptr
	void** params;
	const char* packed;
	unsigned grid[3], block[3], nthreads, nworkers;
	unsigned long long nblocks, next_block;
	unsigned long long seed;  // the schedule's, before mixing in a block's index
	int remaining;
	int done;  // futex word
	// The first fault: its CUresult (0: none), where, and what.
	int fault;
	uintptr_t fault_addr;
	int fault_addr_kind;  // 0: a host address, 1: a shared-window address, 2: none
	unsigned long long fault_block;
	uint3 fault_thread;
	char fault_what[512];
	// The shared window (__cvta_generic_to_shared): each __shared__
	// variable's address in it, and the end of the last.
	std::vector<unsigned> win_off;
	unsigned win_end;
	bool sm90a;  // the module was compiled for sm_90a: wgmma exists
} g_launch;

std::vector<Worker*> g_workers;
// The workers again, in a fixed array the signal handler can read.
Worker* g_worker_tab[kMaxWorkers];
unsigned g_nworker_tab = 0;

// The schedule: GDROTRAIN_EMU_SEED, the scope and the launch's number in it.
struct Schedule {
	unsigned long long base = 1, launch = 0;
	std::string scope;
	bool started = false;
} g_sched;

// ---- faults ----

// record_fault keeps the launch's first fault (it may run in a signal
// handler: no allocation, no locks).
void record_fault(Worker* w, int rc, uintptr_t addr, const char* what) {
	Launch& L = g_launch;
	int none = 0;
	const int kind = w->addr_kind;
	w->addr_kind = 0;
	if (!__atomic_compare_exchange_n(&L.fault, &none, rc, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
	L.fault_addr = addr;
	L.fault_addr_kind = kind;
	L.fault_block = w->block;
	Fiber* f = w->cur;
	L.fault_thread = f ? f->tid : uint3{0, 0, 0};
	size_t i = 0;
	for (; what[i] && i + 1 < sizeof L.fault_what; i++) L.fault_what[i] = what[i];
	L.fault_what[i] = 0;
}

// fault_out ends the block of the running fiber after a fault: the
// scheduler's sigsetjmp in run_block returns again.
[[noreturn]] void fault_out(Worker* w, int rc, uintptr_t addr, const char* what) {
	record_fault(w, rc, addr, what);
	siglongjmp(w->jb, 1);
}

struct sigaction g_old_segv, g_old_bus;

Worker* worker_of(long tid) {
	unsigned n = __atomic_load_n(&g_nworker_tab, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < n; i++)
		if (g_worker_tab[i]->tid == tid) return g_worker_tab[i];
	return nullptr;
}

// forward hands a signal that is not a kernel's fault to the handler
// installed before ours, or to the default action (which ends the process
// when the faulting instruction runs again).
void forward(int sig, siginfo_t* si, void* uc) {
	const struct sigaction* old = sig == SIGBUS ? &g_old_bus : &g_old_segv;
	if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN) {  // ignoring a fault would loop on it
		struct sigaction dfl;
		memset(&dfl, 0, sizeof dfl);
		dfl.sa_handler = SIG_DFL;
		sigaction(sig, &dfl, nullptr);
		return;
	}
	if (old->sa_flags & SA_SIGINFO)
		old->sa_sigaction(sig, si, uc);
	else
		old->sa_handler(sig);
}

void on_fault(int sig, siginfo_t* si, void* uc) {
	Worker* w = worker_of(syscall(SYS_gettid));
	Fiber* f = w ? w->cur : nullptr;
	if (!f) {
		forward(sig, si, uc);
		return;
	}
	const uintptr_t a = (uintptr_t)si->si_addr, page = (uintptr_t)sysconf(_SC_PAGESIZE);
	if (a < (uintptr_t)f->stack && a + page >= (uintptr_t)f->stack)
		fault_out(w, CUDA_ERROR_LAUNCH_FAILED, a,
		          "the thread overflowed its emulator stack (GDROTRAIN_EMU_STACK_KB, default 256, sets its size)");
	fault_out(w, CUDA_ERROR_ILLEGAL_ADDRESS, a, sig == SIGBUS ? "bus error" : "illegal address");
}

void install_fault_handler() {
	static bool done = false;
	if (done) return;
	done = true;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;  // the Go runtime's handler, which we may call, needs the signal stack
	sigfillset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &g_old_segv);
	sigaction(SIGBUS, &sa, &g_old_bus);
}

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
	*w->tfib = f;
	*w->tidx = f->tid;
	w->cur = f;
#ifdef EMU_UCONTEXT
	swapcontext(&w->sched_uc, &f->uc);
#else
	emu_ctx_switch(&w->sched_sp, f->sp);
#endif
	w->cur = nullptr;
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

std::string where(const Fiber* f) {
	return "thread (" + std::to_string(f->tid.x) + "," + std::to_string(f->tid.y) + "," + std::to_string(f->tid.z) +
	       ") of block " + std::to_string(f->w->block);
}

[[noreturn]] void deadlock(Worker* w) {
	std::string msg = "deadlock in block " + std::to_string(w->block) + ": threads wait at different barriers:";
	int shown = 0;
	for (unsigned i = 0; i < g_launch.nthreads && shown < 8; i++) {
		Fiber* f = &w->fibers[i];
		if (f->state == F_DONE) continue;
		msg += " thread (" + std::to_string(f->tid.x) + "," + std::to_string(f->tid.y) + "," +
		       std::to_string(f->tid.z) + ") at " + (f->state == F_BLOCK ? "__syncthreads" : kOpName[f->op]);
		if (f->state == F_WARP) {
			char m[24];
			snprintf(m, sizeof m, " (mask %08x)", f->mask);
			msg += m;
		}
		msg += ";";
		shown++;
	}
	msg += " CUDA requires every live thread of the block at __syncthreads, and every live lane of the mask at the "
	       "same warp operation with the same mask";
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

void wg_warp(Fiber* wf, int op, unsigned group);

// complete_warp finishes the warp operations of a warp whose lanes are
// ready: for each mask, once every live lane of it waits with that mask,
// they complete together. It returns the lanes it let go (0 if none).
// poison is what a shuffle reading a lane outside the operation gets.
unsigned complete_warp(Fiber* wf, unsigned waiting, unsigned live_mask, unsigned long long poison) {
	unsigned done = 0;
	for (unsigned rest = waiting; rest;) {
		const unsigned l = (unsigned)__builtin_ctz(rest);
		const unsigned m = wf[l].mask, group = m & live_mask;
		rest &= ~group & ~(1u << l);
		if (group & ~waiting) continue;  // a live lane of the mask has not arrived
		bool same = true;
		for (unsigned g = group; g; g &= g - 1)
			if (wf[__builtin_ctz(g)].mask != m) same = false;
		if (!same) continue;  // one waits at another operation first (a deadlock if it never completes)
		const Fiber* f0 = &wf[l];
		for (unsigned g = group; g; g &= g - 1) {
			const Fiber* f = &wf[__builtin_ctz(g)];
			if (f->op != f0->op || (f->op == OP_SHFL && f->mode != f0->mode)) {
				static const char* const modes[] = {"idx", "up", "down", "xor"};
				char msg[256];
				snprintf(msg, sizeof msg,
				         "lanes %u and %u of a warp of block %llu meet with mask %08x at different warp operations "
				         "(%s%s%s and %s%s%s), which CUDA leaves undefined",
				         l, (unsigned)__builtin_ctz(g), f0->w->block, m, kOpName[f0->op], f0->op == OP_SHFL ? " " : "",
				         f0->op == OP_SHFL ? modes[f0->mode] : "", kOpName[f->op], f->op == OP_SHFL ? " " : "",
				         f->op == OP_SHFL ? modes[f->mode] : "");
				die(msg);
			}
		}
		if (f0->op == OP_MMA) {
			if (group != 0xffffffffu) die("mma.sync needs all 32 lanes of the warp, each calling it");
			mma_warp(wf);
		} else if (f0->op >= OP_WG_FENCE) {
			wg_warp(wf, f0->op, group);
		} else if (f0->op == OP_SHFL) {
			for (unsigned g = group; g; g &= g - 1) {
				Fiber* f = &wf[__builtin_ctz(g)];
				const int j = shfl_src(__builtin_ctz(g), f->mode, f->b, f->width);
				// Out of the segment: the caller's own value, as PTX
				// defines. A lane that exited, does not exist or is not
				// in the mask: undefined in CUDA, poison here.
				f->result = j < 0 ? f->val : (group >> j & 1) ? wf[j].val : poison;
			}
		} else if (f0->op == OP_BALLOT) {
			unsigned r = 0;
			for (unsigned g = group; g; g &= g - 1)
				if (wf[__builtin_ctz(g)].pred) r |= 1u << __builtin_ctz(g);
			for (unsigned g = group; g; g &= g - 1) wf[__builtin_ctz(g)].result = r;
		}
		done |= group;
	}
	return done;
}

// poison_shared fills the launch's __shared__ variables on this worker
// with the block's poison byte.
void poison_shared(const emu_kernel_shared* sh, unsigned char poison) {
	char* a = sh->anchor();
	for (unsigned v = 0; v < sh->nvars; v++) memset(a + sh->vars[v].offset, poison, sh->vars[v].size);
}

// ---- warpgroup MMA (wgmma.mma_async and its fences) ----
//
// A model of Hopper's asynchronous warpgroup MMA that fails the launch
// (CUDA_ERROR_LAUNCH_FAILED, or ILLEGAL_ADDRESS for an operand outside the
// shared window) wherever the PTX ISA leaves the behaviour undefined and a
// GPU would give wrong results some of the time:
//
//   - The four functions are warp operations needing all 32 lanes, which
//     must agree on the parameters; and the 4 warps of a warpgroup must
//     issue the same sequence of them (fences, commits, waits with the
//     same n, MMAs with the same shape, descriptors, scale_d and
//     transposes): each warpgroup keeps a log that the first warp to get
//     somewhere appends to and the others are compared with.
//   - An issued MMA completes at the wgmma_wait that retires its commit
//     group, never before. At issue its accumulators are saved and filled
//     with a signalling NaN (kWgPoison): reading them early gives NaN, and
//     arithmetic on them changes the bits, which completion checks (a
//     write into an in-flight accumulator). The A registers (RS) are saved
//     and must be unchanged at completion; the bytes of the shared-memory
//     operands are saved (16-byte chunks of the footprint) and must be
//     unchanged at completion and at the other warps' issues. The result is
//     computed at completion from the saved data.
//   - A warp must have called wgmma_fence since the kernel's start and
//     since the last wait that completed an MMA of it, before it issues
//     one (MMAs of the same shape accumulating into the same registers,
//     without a wait between, need no fence: they chain). And the fence
//     must come after the ordinary code that writes an MMA's registers:
//     each lane's stack (where its register arrays live here) is kept at
//     the fence, and accumulators (unless chained) or A registers that
//     differ from it at the issue were written in between.
//   - fence.proxy.async: a shadow of the block's shared window, refreshed
//     by every emu_fence_proxy_async, is what the async proxy sees; an
//     operand whose bytes differ from it at issue was written by ordinary
//     stores after the last fence.proxy.async.
//   - Shared-memory operands: descriptors are decoded per the PTX ISA's
//     canonical layouts (K- and MN-major, no swizzle and the 128B, 64B and
//     32B swizzles, which XOR address bits 4-6, 4-5 or 4 with bits 7-9,
//     7-8 or 7 of the window address). The shared window (emu_cvta_shared)
//     puts every __shared__ variable at a 1024-aligned address, so a
//     swizzled operand must lie in a variable whose host copy is aligned
//     to the swizzle's repeating pattern (1024, 512 or 256 bytes: declared
//     __align__), as ptxas only aligns what is declared so. A base offset
//     (not modelled), reserved bits, addresses outside every __shared__
//     variable and footprints crossing a variable's end are errors.
//   - An uncommitted MMA at a wait and MMAs in flight when a thread exits
//     are errors.
//
// The arithmetic is mma_warp's for each k16 step: every output adds its 16
// products (exact in float) one k at a time in float, so a wgmma with n = 8
// equals an mma.sync on the same data bit for bit.

constexpr unsigned kWgPoison = 0x7fa0deadu;  // a signalling NaN: arithmetic on it sets bit 22

// What a lane posts for emu_wgmma_bf16.
struct WgPost {
	float* d;
	int n;
	const unsigned* a;
	unsigned long long adesc, bdesc;
	int scale_d, ta, tb;
};

// One MMA of a warpgroup, as its first warp issued it: its parameters and
// the 16-byte chunks of its shared-memory operands (A's, for SS, then B's),
// with their bytes then.
struct WgOp {
	int n = 0, scale_d = 0, ta = 0, tb = 0;
	bool rs = false;
	unsigned long long adesc = 0, bdesc = 0;
	unsigned nA = 0;  // chunks of A
	std::vector<char*> host;
	std::vector<unsigned> win;
	std::vector<unsigned char> snap;
};

struct WgEvent {
	int kind;  // OP_WG_*
	int warp;  // the warp (of the warpgroup) that did it first
	int wait_n;
	std::shared_ptr<WgOp> op;
};

// The log of a warpgroup's wgmma operations not yet done by all its warps.
struct WgLog {
	std::deque<WgEvent> log;
	unsigned long long base = 0, cur[4] = {0, 0, 0, 0};
};

// One warp's MMA in flight.
struct WgFlight {
	std::shared_ptr<WgOp> op;
	long long group = -1;  // -1: not committed
	unsigned long long seq = 0;
	float* d[32];
	const unsigned* a[32];
	unsigned aval[32][4];
	bool chained[32];        // the accumulator input is the previous MMA's result on the same registers
	std::vector<float> acc;  // the accumulator inputs, 32 × n/2
};

struct WgWarp {
	bool fenced = false;
	// Each lane's stack (its registers, here) at the last wgmma.fence: from
	// its stack pointer then (slo) to its top, or empty.
	uintptr_t slo[32] = {};
	std::vector<unsigned char> stack[32];
	long long groups = 0;  // commit_group calls so far
	unsigned long long issued = 0;
	std::deque<WgFlight> pending;  // in issue order
};

struct WgBlock {
	bool active = false;
	bool shadow_ok = false;            // shadow holds the window as of the last fence.proxy.async
	std::vector<unsigned char> shadow;  // indexed by window address
	std::vector<char*> vhost;           // each variable's address on this worker
	WgWarp warp[kMaxWarps];
	WgLog group[kMaxWarps / 4];
	void reset() {
		active = false;
		shadow_ok = false;
		for (auto& x : warp) x = WgWarp();
		for (auto& g : group) g = WgLog();
	}
};

std::string wg_who(Worker* w, Fiber* f) {
	const unsigned warp = (unsigned)(f - w->fibers) / 32;
	return "warp " + std::to_string(warp % 4) + " of warpgroup " + std::to_string(warp / 4) + " (" + where(f) + ")";
}

[[noreturn]] __attribute__((noinline, cold)) void wg_fail(Worker* w, Fiber* f, int rc, uintptr_t addr,
                                                          const std::string& what, int kind = 1) {
	w->cur = f;
	w->addr_kind = kind;
	fault_out(w, rc, addr, what.c_str());
}
[[noreturn]] __attribute__((noinline, cold)) void wg_fail(Worker* w, Fiber* f, const std::string& what) {
	wg_fail(w, f, CUDA_ERROR_LAUNCH_FAILED, 0, what, 2);
}

std::string hex(unsigned long long v) {
	char b[24];
	snprintf(b, sizeof b, "%#llx", v);
	return b;
}

// wg_state is the block's wgmma state on w, set up at the block's first use.
WgBlock& wg_state(Worker* w) {
	if (!w->wg) w->wg = new WgBlock();
	WgBlock& B = *w->wg;
	if (!B.active) {
		const Launch& L = g_launch;
		B.active = true;
		B.shadow_ok = false;
		B.vhost.clear();
		if (L.shared) {
			char* a = L.shared->anchor();
			for (unsigned v = 0; v < L.shared->nvars; v++) B.vhost.push_back(a + L.shared->vars[v].offset);
		}
		if (B.shadow.size() < L.win_end) B.shadow.resize(L.win_end);
	}
	return B;
}

// wg_shadow returns the shadow, which at the block's start is the poison
// the block's shared memory starts with.
unsigned char* wg_shadow(Worker* w, WgBlock& B) {
	if (!B.shadow_ok) {
		memset(B.shadow.data(), w->poison, g_launch.win_end);
		B.shadow_ok = true;
	}
	return B.shadow.data();
}

// wg_var is the __shared__ variable holding window address a, or -1.
int wg_var(unsigned a) {
	const Launch& L = g_launch;
	for (unsigned v = 0; v < L.win_off.size(); v++)
		if (a >= L.win_off[v] && a < L.win_off[v] + L.shared->vars[v].size) return (int)v;
	return -1;
}

// wg_operand decodes a descriptor and appends the footprint of a rows × 16
// bf16 operand to op, in 16-byte chunks of 8 elements (PTX ISA, canonical
// layouts, T = 8). Without swizzling: K-major, chunk (mn, kc) at start +
// (mn%8)·16 + (mn/8)·SBO + kc·LBO holds k = 8kc … 8kc+7 of row mn;
// MN-major, chunk (mc, k) at start + mc·SBO + (k%8)·16 + (k/8)·LBO holds mn
// = 8mc … 8mc+7 of column k. With rows of R bytes (swizzles): K-major,
// chunk (mn, kc) at start + (mn%8)·R + (mn/8)·SBO + 16kc (LBO unused);
// MN-major, chunk (mc, k) at start + (mc%(R/16))·16 + (mc/(R/16))·LBO +
// (k%8)·R + (k/8)·SBO; then swizzled.
void wg_operand(Worker* w, Fiber* f, WgBlock& B, const char* which, unsigned long long desc, int rows,
                bool mn_major, WgOp& op) {
	const unsigned long long used = 0x3fffull | 0x3fffull << 16 | 0x3fffull << 32 | 7ull << 49 | 3ull << 62;
	const std::string pre = wg_who(w, f) + ": wgmma.mma_async " + which + " descriptor " + hex(desc);
	if (desc & ~used) wg_fail(w, f, pre + " sets reserved bits " + hex(desc & ~used));
	const unsigned swz = (unsigned)(desc >> 62), base = (unsigned)(desc >> 49) & 7;
	if (base)
		wg_fail(w, f, pre + " has base offset " + std::to_string(base) +
		                  ", which the emulator does not model (swizzle patterns must start at their boundary)");
	const unsigned start = (unsigned)(desc & 0x3fff) << 4, lbo = (unsigned)(desc >> 16 & 0x3fff) << 4,
	               sbo = (unsigned)(desc >> 32 & 0x3fff) << 4;
	const int v = wg_var(start);
	if (v < 0)
		wg_fail(w, f, CUDA_ERROR_ILLEGAL_ADDRESS, start,
		        pre + ": start address " + hex(start) + " is outside every __shared__ variable of the kernel (window " +
		            hex(kWinBase) + " to " + hex(g_launch.win_end) + ")");
	const unsigned lo = g_launch.win_off[v], hi = lo + (unsigned)g_launch.shared->vars[v].size;
	char* const host = B.vhost[v];
	// Swizzling: rows of R bytes (128, 64, 32), whose 16-byte chunk j is
	// stored at chunk j ^ (row % (R/16)) of the repeating pattern of 8 rows,
	// which must start at a multiple of 8R (the window's variables are
	// 1024-aligned, so the host variable must be too: declared __align__).
	const unsigned R = swz ? 256u >> swz : 0, W = R / 16;
	if (swz && (uintptr_t)host % (8 * R))
		wg_fail(w, f, pre + " (" + std::to_string(R) + "B swizzle) points into a __shared__ variable not aligned to " +
		                  std::to_string(8 * R) + " bytes (at " + hex((uintptr_t)host) +
		                  " here): declare it __align__(" + std::to_string(8 * R) + ")");
	auto swizzle = [&](unsigned a) { return swz ? a ^ ((a >> 7) & (W - 1)) << 4 : a; };
	auto add = [&](unsigned a) {
		a = swizzle(a);
		if (a < lo || a + 16 > hi)
			wg_fail(w, f, CUDA_ERROR_ILLEGAL_ADDRESS, a,
			        pre + " (start " + hex(start) + ", LBO " + std::to_string(lbo) + ", SBO " + std::to_string(sbo) +
			            "): its footprint runs past the end of the " + std::to_string(hi - lo) +
			            "-byte __shared__ variable at window " + hex(lo) + " (16 bytes at " + hex(a) + ")");
		op.host.push_back(host + (a - lo));
		op.win.push_back(a);
	};
	if (!swz && !mn_major) {
		for (int mn = 0; mn < rows; mn++)
			for (unsigned kc = 0; kc < 2; kc++) add(start + (unsigned)(mn % 8) * 16 + (unsigned)(mn / 8) * sbo + kc * lbo);
	} else if (!swz) {
		for (int mc = 0; mc < rows / 8; mc++)
			for (unsigned k = 0; k < 16; k++) add(start + (unsigned)mc * sbo + (k % 8) * 16 + (k / 8) * lbo);
	} else if (!mn_major) {  // ((8,m),(T,2k)):((R/2,SBO),(1,T)) in elements; LBO unused
		for (int mn = 0; mn < rows; mn++)
			for (unsigned kc = 0; kc < 2; kc++) add(start + (unsigned)(mn % 8) * R + (unsigned)(mn / 8) * sbo + kc * 16);
	} else {  // ((T,W,m),(8,k)):((1,T,LBO),(R/2,SBO))
		for (int mc = 0; mc < rows / 8; mc++)
			for (unsigned k = 0; k < 16; k++)
				add(start + (unsigned)mc % W * 16 + (unsigned)mc / W * lbo + (k % 8) * R + (k / 8) * sbo);
	}
}

// wg_bf16 reads element (mn, k) of an operand whose chunks start at chunk
// c0 of bytes, laid out as wg_operand lists them.
inline float wg_bf16(const unsigned char* bytes, unsigned c0, int mn, int k, bool mn_major) {
	const unsigned c = mn_major ? c0 + (unsigned)(mn / 8) * 16 + (unsigned)k : c0 + (unsigned)mn * 2 + (unsigned)(k / 8);
	const unsigned e = mn_major ? (unsigned)(mn % 8) : (unsigned)(k % 8);
	unsigned short h;
	memcpy(&h, bytes + c * 16 + e * 2, 2);
	return __builtin_bit_cast(float, (unsigned)h << 16);
}

// wg_diff is the first chunk of op whose bytes now differ from ref (bytes
// in the order of op's chunks, or the window shadow if by_window), or -1.
long wg_diff(const WgOp& op, const unsigned char* ref, bool by_window) {
	for (size_t c = 0; c < op.host.size(); c++)
		if (memcmp(op.host[c], by_window ? ref + op.win[c] : ref + c * 16, 16) != 0) return (long)c;
	return -1;
}

bool wg_poisoned(const float* d, int cnt) {
	for (int i = 0; i < cnt; i++)
		if (__builtin_bit_cast(unsigned, d[i]) != kWgPoison) return false;
	return true;
}

// wg_log does warp q's next operation of warpgroup G: the first warp to
// get there logs it, the others must match it. It returns the entry.
WgEvent& wg_log(Worker* w, Fiber* f, WgLog& G, unsigned q, const WgEvent& e, bool* first) {
	const unsigned long long i = G.cur[q]++;
	*first = i == G.base + G.log.size();
	if (*first) {
		G.log.push_back(e);
		G.log.back().warp = (int)q;
		return G.log.back();
	}
	WgEvent& x = G.log[i - G.base];
	bool same = x.kind == e.kind && (e.kind != OP_WG_WAIT || x.wait_n == e.wait_n);
	if (same && e.kind == OP_WG_MMA) {
		const WgOp &a = *x.op, &b = *e.op;
		same = a.n == b.n && a.rs == b.rs && (a.rs || a.adesc == b.adesc) && a.bdesc == b.bdesc &&
		       a.scale_d == b.scale_d && (a.rs || a.ta == b.ta) && a.tb == b.tb;
	}
	if (!same) {
		auto desc = [](const WgEvent& v) {
			std::string s = kOpName[v.kind];
			if (v.kind == OP_WG_WAIT) s += " " + std::to_string(v.wait_n);
			if (v.kind == OP_WG_MMA) {
				const WgOp& o = *v.op;
				s += " n" + std::to_string(o.n) + (o.rs ? " A from registers" : " adesc " + hex(o.adesc)) + " bdesc " +
				     hex(o.bdesc) + " scale_d " + std::to_string(o.scale_d) + " tnsp " + std::to_string(o.ta) +
				     std::to_string(o.tb);
			}
			return s;
		};
		wg_fail(w, f, wg_who(w, f) + ": its wgmma operation #" + std::to_string(i) + " (" + desc(e) +
		                  ") differs from warp " + std::to_string(x.warp) + "'s (" + desc(x) +
		                  "): the 4 warps of a warpgroup must issue the same wgmma operations (.aligned)");
	}
	return x;
}

void wg_trim(WgLog& G) {
	while (!G.log.empty() && G.cur[0] > G.base && G.cur[1] > G.base && G.cur[2] > G.base && G.cur[3] > G.base) {
		G.log.pop_front();
		G.base++;
	}
}

// wg_complete completes the oldest MMA in flight of warp k (wf its lanes).
void wg_complete(Worker* w, Fiber* wf, WgWarp& W, unsigned k) {
	WgFlight& e = W.pending.front();
	const WgOp& op = *e.op;
	const int half = op.n / 2;
	const long c = wg_diff(op, op.snap.data(), false);
	if (c >= 0)
		wg_fail(w, wf, CUDA_ERROR_LAUNCH_FAILED, op.win[c],
		        wg_who(w, wf) + ": shared memory operand of an in-flight wgmma was written (" +
		            (c < (long)op.nA ? "A" : "B") + ", 16 bytes at window address " + hex(op.win[c]) +
		            ") between its issue and the wgmma.wait_group that retired it");
	for (unsigned l = 0; l < 32; l++) {
		if (op.rs && memcmp(e.a[l], e.aval[l], 16) != 0)
			wg_fail(w, wf + l, wg_who(w, wf + l) + ": the A registers of an in-flight wgmma (RS) changed between its issue "
			                                       "and the wgmma.wait_group that retired it");
		for (int i = 0; i < half; i++)
			if (__builtin_bit_cast(unsigned, e.d[l][i]) != kWgPoison) {
				char m[64];
				snprintf(m, sizeof m, "d[%d] = %#x", i, __builtin_bit_cast(unsigned, e.d[l][i]));
				wg_fail(w, wf + l, wg_who(w, wf + l) + ": the accumulator registers of an in-flight wgmma were written (" +
				                       m + ") before the wgmma.wait_group that retires it");
			}
	}
	// This warp's rows of A (16 × 16) and all of B (16 × n).
	const unsigned q = k % 4;
	float A[16][16], Bt[256][16];
	if (op.rs) {
		for (unsigned l = 0; l < 32; l++) {
			const unsigned g = l >> 2, t = l & 3;
			for (int h = 0; h < 2; h++) {
				A[g][2 * t + h] = bf16_at(e.aval[l][0], h);
				A[g + 8][2 * t + h] = bf16_at(e.aval[l][1], h);
				A[g][2 * t + 8 + h] = bf16_at(e.aval[l][2], h);
				A[g + 8][2 * t + 8 + h] = bf16_at(e.aval[l][3], h);
			}
		}
	} else {
		for (int r = 0; r < 16; r++)
			for (int kk = 0; kk < 16; kk++) A[r][kk] = wg_bf16(op.snap.data(), 0, 16 * (int)q + r, kk, op.ta);
	}
	for (int col = 0; col < op.n; col++)
		for (int kk = 0; kk < 16; kk++) Bt[col][kk] = wg_bf16(op.snap.data(), op.nA, col, kk, op.tb);
	float r[128];
	for (unsigned l = 0; l < 32; l++) {
		const int g = (int)(l >> 2), t = (int)(l & 3);
		for (int i = 0; i < half; i++) r[i] = op.scale_d ? e.acc[l * half + i] : 0.0f;
		// Each output adds its 16 products k by k, in float; the 4 outputs
		// of a group of 8 columns (rows g, g+8; columns 2t, 2t+1) as 4
		// chains side by side.
		for (int j = 0; j < half / 4; j++) {
			const float *a0 = A[g], *a1 = A[g + 8], *b0 = Bt[8 * j + 2 * t], *b1 = Bt[8 * j + 2 * t + 1];
			float c0 = r[4 * j], c1 = r[4 * j + 1], c2 = r[4 * j + 2], c3 = r[4 * j + 3];
			for (int kk = 0; kk < 16; kk++) {
				// Exact products, not contracted into the adds (as mma_warp,
				// whose volatile does the same).
				float p0 = a0[kk] * b0[kk], p1 = a0[kk] * b1[kk], p2 = a1[kk] * b0[kk], p3 = a1[kk] * b1[kk];
#if defined(__x86_64__)
				__asm__("" : "+x"(p0), "+x"(p1), "+x"(p2), "+x"(p3));
#else
				__asm__("" : "+r"(p0), "+r"(p1), "+r"(p2), "+r"(p3));
#endif
				c0 = c0 + p0;
				c1 = c1 + p1;
				c2 = c2 + p2;
				c3 = c3 + p3;
			}
			r[4 * j] = c0, r[4 * j + 1] = c1, r[4 * j + 2] = c2, r[4 * j + 3] = c3;
		}
		// The result goes to the next MMA in flight on the same registers,
		// or to the registers.
		WgFlight* next = nullptr;
		for (size_t j = 1; j < W.pending.size() && !next; j++)
			if (W.pending[j].chained[l] && W.pending[j].d[l] == e.d[l]) next = &W.pending[j];
		if (next)
			memcpy(next->acc.data() + l * half, r, sizeof(float) * half);
		else
			memcpy(e.d[l], r, sizeof(float) * half);
	}
	W.pending.pop_front();
}

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
	return (const char*)a < (const char*)b + bn && (const char*)b < (const char*)a + an;
}

// wg_stacks keeps a copy of each lane's stack at a wgmma.fence: the
// registers (arrays on the fiber's stack here) that ordinary code writes
// between the fence and an MMA that uses them differ from it.
void wg_stacks(Fiber* wf, WgWarp& W) {
#ifndef EMU_UCONTEXT
	for (unsigned l = 0; l < 32; l++) {
		const Fiber* f = wf + l;
		const uintptr_t lo = (uintptr_t)f->sp, hi = (uintptr_t)f->stack + f->stack_size - f->colour;
		if (lo < (uintptr_t)f->stack || lo >= hi) {
			W.slo[l] = 0;
			W.stack[l].clear();
			continue;
		}
		W.slo[l] = lo;
		W.stack[l].assign((const unsigned char*)lo, (const unsigned char*)hi);
	}
#else
	(void)wf, (void)W;
#endif
}

// wg_same_since_fence tells whether [p, p+n) is as it was at lane l's last
// wgmma.fence (true where it is not on the stack then kept).
bool wg_same_since_fence(const WgWarp& W, unsigned l, const void* p, size_t n) {
	const uintptr_t a = (uintptr_t)p, lo = W.slo[l];
	if (!lo || a < lo || a + n > lo + W.stack[l].size()) return true;
	return memcmp(p, W.stack[l].data() + (a - lo), n) == 0;
}

// wg_issue issues a warp's wgmma.mma_async.
void wg_issue(Worker* w, Fiber* wf, WgBlock& B, unsigned k) {
	const WgPost* p[32];
	for (unsigned l = 0; l < 32; l++) p[l] = (const WgPost*)(uintptr_t)wf[l].val;
	const WgPost& p0 = *p[0];
	for (unsigned l = 1; l < 32; l++) {
		const WgPost& x = *p[l];
		if (x.n != p0.n || (x.a == nullptr) != (p0.a == nullptr) || (!p0.a && x.adesc != p0.adesc) ||
		    x.bdesc != p0.bdesc || x.scale_d != p0.scale_d || (!p0.a && x.ta != p0.ta) || x.tb != p0.tb)
			wg_fail(w, wf + l, wg_who(w, wf + l) + ": lanes 0 and " + std::to_string(l) +
			                       " of the warp issue wgmma.mma_async with different shapes, descriptors, scale_d or "
			                       "transposes (.sync.aligned)");
	}
	const int n = p0.n;
	if (n < 8 || n > 256 || n % 8)
		wg_fail(w, wf, wg_who(w, wf) + ": wgmma.mma_async m64n" + std::to_string(n) + "k16: n must be a multiple of 8 "
		                                                                               "from 8 to 256");
	if (p0.scale_d != 0 && p0.scale_d != 1) wg_fail(w, wf, wg_who(w, wf) + ": scale_d must be 0 or 1");
	if ((p0.ta | p0.tb) & ~1) wg_fail(w, wf, wg_who(w, wf) + ": tnsp_a and tnsp_b must be 0 or 1");
	WgWarp& W = B.warp[k];
	auto op = std::make_shared<WgOp>();
	op->n = n;
	op->rs = p0.a != nullptr;
	op->adesc = op->rs ? 0 : p0.adesc;
	op->bdesc = p0.bdesc;
	op->scale_d = p0.scale_d;
	op->ta = op->rs ? 0 : p0.ta;
	op->tb = p0.tb;
	bool first;
	WgEvent& ev = wg_log(w, wf, B.group[k / 4], k % 4, WgEvent{OP_WG_MMA, 0, 0, op}, &first);
	if (first) {
		if (!op->rs) wg_operand(w, wf, B, "A", op->adesc, 64, op->ta, *op);
		op->nA = (unsigned)op->host.size();
		wg_operand(w, wf, B, "B", op->bdesc, n, op->tb, *op);
		op->snap.resize(op->host.size() * 16);
		for (size_t c = 0; c < op->host.size(); c++) memcpy(op->snap.data() + c * 16, op->host[c], 16);
	} else {
		op = ev.op;
		const long c = wg_diff(*op, op->snap.data(), false);
		if (c >= 0)
			wg_fail(w, wf, CUDA_ERROR_LAUNCH_FAILED, op->win[c],
			        wg_who(w, wf) + ": shared memory operand of an in-flight wgmma was written (16 bytes at window "
			                        "address " + hex(op->win[c]) + ") between warp " + std::to_string(ev.warp) +
			            "'s issue of it and this warp's");
	}
	wg_trim(B.group[k / 4]);
	const long c = wg_diff(*op, wg_shadow(w, B), true);
	if (c >= 0)
		wg_fail(w, wf, CUDA_ERROR_LAUNCH_FAILED, op->win[c],
		        wg_who(w, wf) + ": the shared memory a wgmma.mma_async reads (" + (c < (long)op->nA ? "A" : "B") +
		            ", 16 bytes at window address " + hex(op->win[c]) +
		            ") was written after the last fence.proxy.async: the async proxy may not see it");
	if (!W.fenced)
		wg_fail(w, wf, wg_who(w, wf) + ": wgmma.mma_async without a wgmma.fence since " +
		                   (W.issued ? "the last wgmma.wait_group that completed an MMA (its registers were accessible)"
		                             : "the kernel's start"));
	const int half = n / 2;
	W.pending.emplace_back();
	WgFlight& e = W.pending.back();
	e.op = op;
	e.seq = W.issued++;
	e.acc.assign((size_t)32 * half, 0.0f);
	for (unsigned l = 0; l < 32; l++) {
		float* d = p[l]->d;
		e.d[l] = d;
		e.a[l] = p[l]->a;
		if (op->rs) memcpy(e.aval[l], p[l]->a, 16);
		e.chained[l] = false;
		for (size_t j = W.pending.size() - 1; j-- > 0;) {
			const WgFlight& x = W.pending[j];
			const size_t xs = sizeof(float) * (x.op->n / 2);
			if (op->rs && overlaps(p[l]->a, 16, x.d[l], xs))
				wg_fail(w, wf + l, wg_who(w, wf + l) + ": the A registers of a wgmma.mma_async are the accumulators of "
				                                       "an in-flight one");
			if (x.op->rs && overlaps(d, sizeof(float) * half, x.a[l], 16))
				wg_fail(w, wf + l, wg_who(w, wf + l) + ": the accumulators of a wgmma.mma_async are the A registers of "
				                                       "an in-flight one");
			if (!e.chained[l] && overlaps(d, sizeof(float) * half, x.d[l], xs)) {
				if (x.d[l] != d || x.op->n != n)
					wg_fail(w, wf + l, wg_who(w, wf + l) + ": the accumulators of a wgmma.mma_async overlap those of an "
					                                       "in-flight one of another shape or at another place");
				e.chained[l] = true;
			}
		}
		if (op->rs && !wg_same_since_fence(W, l, p[l]->a, 16))
			wg_fail(w, wf + l, wg_who(w, wf + l) + ": the A registers of a wgmma.mma_async were written after the last "
			                                       "wgmma.fence (which must come between them and the MMA)");
		if (!e.chained[l] && !wg_same_since_fence(W, l, d, sizeof(float) * half))
			wg_fail(w, wf + l, wg_who(w, wf + l) + ": the accumulator registers of a wgmma.mma_async were written after "
			                                       "the last wgmma.fence (which must come between them and the MMA)");
		if (e.chained[l]) {
			if (!wg_poisoned(d, half))
				wg_fail(w, wf + l, wg_who(w, wf + l) + ": the accumulator registers of an in-flight wgmma were written "
				                                       "before the wgmma.wait_group that retires it");
		} else {
			if (op->scale_d) memcpy(e.acc.data() + l * half, d, sizeof(float) * half);
			const float poison = __builtin_bit_cast(float, kWgPoison);
			for (int i = 0; i < half; i++) d[i] = poison;
		}
	}
}

// wg_warp completes one of the wgmma warp operations of a warp (all of
// whose lanes wait at it, with group their mask).
void wg_warp(Fiber* wf, int op, unsigned group) {
	Worker* w = wf[0].w;
	const unsigned k = (unsigned)(wf - w->fibers) / 32;
	if (group != 0xffffffffu)
		wg_fail(w, wf + __builtin_ctz(group), wg_who(w, wf + __builtin_ctz(group)) + ": " + kOpName[op] +
		                                          " needs all 32 lanes of the warp, each calling it (.sync.aligned)");
	if (g_launch.nthreads % 128)
		wg_fail(w, wf, wg_who(w, wf) + ": " + kOpName[op] + " in a block of " + std::to_string(g_launch.nthreads) +
		                   " threads, not a multiple of 128 (whole warpgroups)");
	WgBlock& B = wg_state(w);
	WgWarp& W = B.warp[k];
	if (op == OP_WG_MMA) {
		wg_issue(w, wf, B, k);
		return;
	}
	int n = 0;
	if (op == OP_WG_WAIT) {
		n = wf[0].b;
		for (unsigned l = 1; l < 32; l++)
			if (wf[l].b != n)
				wg_fail(w, wf + l, wg_who(w, wf + l) + ": lanes 0 and " + std::to_string(l) +
				                       " wait with different counts (" + std::to_string(n) + ", " +
				                       std::to_string(wf[l].b) + ")");
		if (n < 0 || n > 7) wg_fail(w, wf, wg_who(w, wf) + ": wgmma.wait_group " + std::to_string(n) + ": N is 0 to 7");
	}
	bool first;
	wg_log(w, wf, B.group[k / 4], k % 4, WgEvent{op, 0, n, nullptr}, &first);
	wg_trim(B.group[k / 4]);
	if (op == OP_WG_FENCE) {
		W.fenced = true;
		wg_stacks(wf, W);
	} else if (op == OP_WG_COMMIT) {
		for (auto& e : W.pending)
			if (e.group < 0) e.group = W.groups;
		W.groups++;
	} else {
		for (auto& e : W.pending)
			if (e.group < 0)
				wg_fail(w, wf, wg_who(w, wf) + ": wgmma.wait_group " + std::to_string(n) +
				                   " with a wgmma.mma_async not committed (no wgmma.commit_group since it was issued)");
		// Groups still pending, oldest first: complete them down to n.
		long long ngroups = 0, last = -1;
		for (auto& e : W.pending)
			if (e.group != last) ngroups++, last = e.group;
		bool done = false;
		while (ngroups > n) {
			const long long g0 = W.pending.front().group;
			while (!W.pending.empty() && W.pending.front().group == g0) wg_complete(w, wf, W, k), done = true;
			ngroups--;
		}
		if (done) W.fenced = false;  // the registers are the thread's again: the next MMA needs a fence
	}
}

// wg_exit: a thread of a warp with MMAs in flight exits.
void wg_exit(Worker* w, Fiber* f) {
	const WgWarp& W = w->wg->warp[(f - w->fibers) / 32];
	if (!W.pending.empty())
		wg_fail(w, f, wg_who(w, f) + ": the thread exits with " + std::to_string(W.pending.size()) +
		                  " wgmma.mma_async in flight (never retired by a wgmma.wait_group)");
}

// wg_block_end: every warp of a warpgroup did the same wgmma operations.
void wg_block_end(Worker* w) {
	WgBlock& B = *w->wg;
	for (unsigned g = 0; g < g_launch.nthreads / 128; g++) {
		const WgLog& G = B.group[g];
		for (unsigned q = 1; q < 4; q++)
			if (G.cur[q] != G.cur[0]) {
				const unsigned lo = G.cur[q] < G.cur[0] ? q : 0, hi = lo == q ? 0 : q;
				Fiber* f = w->fibers + 32 * (4 * g + lo);
				wg_fail(w, f, wg_who(w, f) + " did " + std::to_string(G.cur[lo]) + " wgmma operations, warp " +
				                  std::to_string(hi) + " of its warpgroup " + std::to_string(G.cur[hi]) +
				                  ": the 4 warps of a warpgroup must issue the same ones (.aligned)");
			}
	}
}

// ---- cp.async (Ampere's asynchronous global-to-shared copy) ----
//
// A model of PTX cp.async.cg.shared.global (16 bytes, with a source size),
// cp.async.commit_group and cp.async.wait_group that fails the launch
// where the PTX ISA leaves the behaviour undefined:
//
//   - Each thread's copies are its own (not collective). A commit makes the
//     thread's uncommitted copies a group (an empty group is trivially
//     complete); a wait(n) completes the thread's oldest committed groups
//     until at most n are pending. Uncommitted copies are in no group, so
//     wait_group does not wait for them (only cp.async.wait_all, which is
//     commit_group then wait_group 0, does): they stay in flight.
//   - A copy completes at the wait that retires its group, never before. At
//     issue its 16 destination bytes are filled with kCpPoison (a NaN as
//     fp32, bf16 and fp16 alike) and its source bytes are saved; at
//     completion the destination must still hold the poison (else the
//     kernel wrote it while the copy was in flight), the source is read
//     again (as late as the hardware may read it) and must equal the saved
//     bytes (else it was modified in flight), and the data lands, zeros
//     after src_bytes. A reader of the destination before the issuing
//     thread's wait sees the poison.
//   - Visibility to the other threads of the block: a wait that has
//     copies to complete suspends its thread until no other thread of the
//     block can run (all wait at barriers, warp operations or cp.async
//     waits, or have exited; or, for a block whose threads spin, after
//     16 steps per thread); then one of the threads waiting for copies,
//     picked at random, completes them and goes on. So a thread that reads
//     another thread's copies after its own wait but without a
//     __syncthreads after theirs reads poison on every schedule (the first
//     thread released reads copies the others have not completed yet),
//     while a __syncthreads after the waits sees them all landed.
//   - At issue: dst must lie in a __shared__ variable of the kernel, all 16
//     bytes in one, 16-byte aligned (both its shared-window address and
//     the host copy, which is aligned as declared, as ptxas aligns);
//     src 16-byte aligned; src_bytes 0 to 16; and src_bytes > 0 bytes at
//     src inside one device allocation (the driver's table: reading the
//     slack after an allocation's end, which would not fault here, is an
//     error too). Two copies in flight to the same 16 bytes (of any
//     threads of the block) are an error: they are unordered.
//   - A thread that exits with copies in flight (committed or not) is an
//     error.
//   - The landing write is a generic-proxy write (the PTX ISA puts only
//     the bulk copies in the async proxy): it does not refresh the shadow
//     that wgmma checks against, so a wgmma reading cp.async data needs a
//     fence.proxy.async after the wait.

constexpr unsigned kCpPoison = 0x7fa57fa5u;  // NaN as fp32, and each half as bf16 and fp16

struct CpCopy {
	char* dst;
	unsigned win;  // dst's shared-window address
	const char* src;
	int bytes;
	long long group;  // -1: not committed
	unsigned char snap[16];
};

struct CpThread {
	std::deque<CpCopy> pending;  // in issue order
	long long groups = 0;        // commit_group calls so far
};

struct CpBlock {
	bool active = false;
	std::vector<CpThread> th;     // by linear thread index
	std::vector<unsigned> owner;  // by window address / 16: 1 + the thread whose copy is in flight there, or 0
	std::vector<unsigned> used;   // threads with copies made since the block's start
	void reset() {
		active = false;
		for (unsigned t : used) th[t] = CpThread();
		used.clear();
		std::fill(owner.begin(), owner.end(), 0u);
	}
};

CpBlock& cp_state(Worker* w) {
	if (!w->cp) w->cp = new CpBlock();
	CpBlock& C = *w->cp;
	if (!C.active) {
		C.active = true;
		if (C.th.size() < kMaxThreads) C.th.resize(kMaxThreads);
		if (C.owner.size() < g_launch.win_end / 16 + 1) C.owner.resize(g_launch.win_end / 16 + 1);
	}
	return C;
}

[[noreturn]] __attribute__((noinline, cold)) void cp_fail(Fiber* f, int rc, uintptr_t addr, const std::string& what,
                                                          int kind) {
	wg_fail(f->w, f, rc, addr, where(f) + ": " + what, kind);
}

std::string cp_thread_name(const Fiber* f) {
	return "thread (" + std::to_string(f->tid.x) + "," + std::to_string(f->tid.y) + "," + std::to_string(f->tid.z) + ")";
}

// cp_complete completes copy c of thread f.
void cp_complete(Fiber* f, CpBlock& C, const CpCopy& c) {
	unsigned char poison[16];
	for (int i = 0; i < 4; i++) memcpy(poison + 4 * i, &kCpPoison, 4);
	if (memcmp(c.dst, poison, 16) != 0)
		cp_fail(f, CUDA_ERROR_LAUNCH_FAILED, c.win,
		        "the destination of an in-flight cp.async (16 bytes) was written between its issue and the "
		        "cp.async.wait_group that completed it",
		        1);
	unsigned char now[16] = {0};
	memcpy(now, c.src, (size_t)c.bytes);
	if (memcmp(now, c.snap, (size_t)c.bytes) != 0)
		cp_fail(f, CUDA_ERROR_LAUNCH_FAILED, (uintptr_t)c.src,
		        "the source of an in-flight cp.async (" + std::to_string(c.bytes) +
		            " bytes) was modified between its issue and the cp.async.wait_group that completed it",
		        0);
	memcpy(c.dst, now, 16);  // a generic-proxy write: the wgmma shadow is left as it was
	C.owner[c.win / 16] = 0;
}

// cp_exit: thread f exits; it must have no copies in flight.
void cp_exit(Worker* w, Fiber* f) {
	const CpThread& T = w->cp->th[f->lin];
	if (T.pending.empty()) return;
	size_t unc = 0;
	for (const auto& c : T.pending) unc += c.group < 0;
	cp_fail(f, CUDA_ERROR_LAUNCH_FAILED, T.pending.front().win,
	        "cp.async still in flight at thread exit (" + std::to_string(T.pending.size()) + " copies, " +
	            std::to_string(unc) +
	            " of them never committed; every copy must be retired by a cp.async.wait_group before the thread "
	            "exits)",
	        1);
}

// schedule runs the fibers of w's block to their ends (see the file
// comment).
void schedule(Worker* w, unsigned stay, unsigned long long poison64) {
	Fiber* fs = w->fibers;
	const unsigned n = g_launch.nthreads;
	const unsigned nwarps = (n + 31) / 32;
	unsigned live_mask[kMaxWarps], run_mask[kMaxWarps], wait_mask[kMaxWarps];
	unsigned runnable = 0;  // warps with a runnable lane
	unsigned live = n, at_block = 0;
	int count = 0;  // __syncthreads_count so far
	for (unsigned k = 0; k < nwarps; k++) {
		live_mask[k] = run_mask[k] = n - 32 * k >= 32 ? 0xffffffffu : (1u << (n - 32 * k)) - 1;
		wait_mask[k] = 0;
		runnable |= 1u << k;
	}
	unsigned cpwait[kMaxWarps] = {};  // threads at a cp.async.wait_group with copies to complete
	unsigned ncpwait = 0;
	// Steps run while threads waited at cp.async waits, and how many are
	// enough: a thread spinning on a flag that a thread at a wait sets
	// after it would otherwise never let that one go.
	unsigned long long cp_steps = 0;
	const unsigned long long cp_patience = 16ull * n + 1024;
	unsigned focus = 0;
	for (;;) {
		if (ncpwait && (!runnable || ++cp_steps > cp_patience)) {
			// Nothing else can run (or has run long enough): one of the
			// threads waiting for their cp.async copies (picked at random)
			// completes them and goes on.
			cp_steps = 0;
			const unsigned long long r = next_rand(&w->rng);
			unsigned warps = 0;
			for (unsigned k = 0; k < nwarps; k++)
				if (cpwait[k]) warps |= 1u << k;
			const unsigned k = pick(warps, (unsigned)r), l = pick(cpwait[k], (unsigned)(r >> 9));
			cpwait[k] &= ~(1u << l);
			ncpwait--;
			fs[32 * k + l].state = F_RUN;
			run_mask[k] |= 1u << l;
			runnable |= 1u << k;
			continue;
		}
		if (!runnable) {
			if (live == 0) {
				if (w->wg && w->wg->active) wg_block_end(w);
				return;
			}
			// __syncthreads completes when every live thread waits at it.
			if (at_block != live) deadlock(w);
			for (unsigned i = 0; i < n; i++) {
				if (fs[i].state != F_BLOCK) continue;
				fs[i].result = (unsigned)count;
				fs[i].state = F_RUN;
				run_mask[i / 32] |= 1u << (i % 32);
				runnable |= 1u << (i / 32);
			}
			at_block = 0;
			count = 0;
			continue;
		}
		const unsigned long long r = next_rand(&w->rng);
		if (!(focus < 32 && (runnable >> focus & 1) && (r & 15) < stay)) focus = pick(runnable, (unsigned)(r >> 4));
		const unsigned k = focus, l = pick(run_mask[k], (unsigned)(r >> 9)), bit = 1u << l;
		Fiber* f = &fs[32 * k + l];
		run_mask[k] &= ~bit;
		resume(w, f);
		switch (f->state) {
		case F_RUN:  // preempted: another warp's turn, or a spinning thread would starve the one it waits for
			run_mask[k] |= bit;
			focus = 32;
			break;
		case F_DONE:
			if (w->wg && w->wg->active) wg_exit(w, f);
			if (w->cp && w->cp->active) cp_exit(w, f);
			live--;
			live_mask[k] &= ~bit;
			if (!wait_mask[k]) break;
			[[fallthrough]];  // the lanes waiting for it may go on without it
		case F_WARP: {
			if (f->state == F_WARP) wait_mask[k] |= bit;
			unsigned go = complete_warp(fs + 32 * k, wait_mask[k], live_mask[k], poison64);
			wait_mask[k] &= ~go;
			run_mask[k] |= go;
			for (unsigned g = go; g; g &= g - 1) fs[32 * k + __builtin_ctz(g)].state = F_RUN;
			break;
		}
		case F_BLOCK:
			at_block++;
			count += f->pred;
			break;
		case F_CPWAIT:
			cpwait[k] |= bit;
			ncpwait++;
			break;
		}
		if (run_mask[k])
			runnable |= 1u << k;
		else
			runnable &= ~(1u << k);
	}
}

// run_block runs block b on worker w, with the block's random numbers,
// poison and policy.
void run_block(Worker* w, unsigned long long b) {
	const Launch& L = g_launch;
	w->block = b;
	w->rng = mix(L.seed, b);
	w->poison = next_rand(&w->rng) & 1 ? 0xff : 0x7f;
	unsigned long long poison64;
	memset(&poison64, w->poison, sizeof poison64);
	static const unsigned kStay[] = {0, 8, 15, 16};  // in 16ths: how often the next step keeps to the same warp
	const unsigned stay = kStay[below(&w->rng, 4)];
	if (L.shared) poison_shared(L.shared, w->poison);
	if (w->wg && w->wg->active) w->wg->reset();
	if (w->cp && w->cp->active) w->cp->reset();
	for (unsigned i = 0; i < L.nthreads; i++) fiber_reset(&w->fibers[i]);
	if (sigsetjmp(w->jb, 1)) {
		// A fiber faulted (fault_out): the block ends here, the launch
		// with the fault.
		w->cur = nullptr;
		t_fiber = nullptr;
		return;
	}
	schedule(w, stay, poison64);
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
		if (__atomic_load_n(&L.fault, __ATOMIC_ACQUIRE)) return;  // the grid is over, as on a GPU
		unsigned long long b = __atomic_fetch_add(&L.next_block, 1, __ATOMIC_RELAXED);
		if (b >= L.nblocks) return;
		blockIdx = uint3{(unsigned)(b % L.grid[0]), (unsigned)(b / L.grid[0] % L.grid[1]), (unsigned)(b / gxy)};
		run_block(w, b);
	}
}

void* worker_main(void* arg) {
	Worker* w = static_cast<Worker*>(arg);
	w->tid = syscall(SYS_gettid);
	w->tidx = &threadIdx;
	w->tfib = &t_fiber;
	// Faults of kernel code are the kernel's (on_fault); they need a stack
	// of their own, since a fiber's may be what overflowed.
	stack_t ss;
	ss.ss_size = 64 << 10;
	ss.ss_sp = mmap(nullptr, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ss.ss_flags = 0;
	if (ss.ss_sp != MAP_FAILED) sigaltstack(&ss, nullptr);
	sigset_t faults;
	sigemptyset(&faults);
	sigaddset(&faults, SIGSEGV);
	sigaddset(&faults, SIGBUS);
	pthread_sigmask(SIG_UNBLOCK, &faults, nullptr);
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
	install_fault_handler();
	// Workers block every signal but the faults of the code they run: they
	// never run Go code, and signals meant for the process are better
	// delivered to the threads that do.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 1u << 20);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	bool ok = true;
	while (g_workers.size() < n && g_workers.size() < kMaxWorkers) {
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
		g_worker_tab[g_nworker_tab] = w;
		__atomic_store_n(&g_nworker_tab, g_nworker_tab + 1, __ATOMIC_RELEASE);
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	return ok && g_workers.size() >= n;
}

std::unordered_map<std::string, const emu_kernel_desc*>& registry() {
	static auto* m = new std::unordered_map<std::string, const emu_kernel_desc*>();
	return *m;
}

std::unordered_map<std::string, const emu_kernel_shared*>& shared_registry() {
	static auto* m = new std::unordered_map<std::string, const emu_kernel_shared*>();
	return *m;
}

// launch_seed numbers the launch in its scope and returns its seed.
unsigned long long launch_seed(const char* kernel) {
	Schedule& S = g_sched;
	S.base = env_u64("GDROTRAIN_EMU_SEED", 1);
	const char* scope = getenv("GDROTRAIN_EMU_SEED_SCOPE");
	if (!scope) scope = "";
	if (!S.started || S.scope != scope) {
		S.scope = scope;
		S.launch = 0;
		S.started = true;
	}
	const unsigned long long n = S.launch++;
	return mix(mix(mix(S.base, hash_str(S.scope.c_str())), n), hash_str(kernel));
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

size_t static_shared_bytes(const emu_kernel_desc* k) {
	auto& r = shared_registry();
	auto it = r.find(k->name);
	return it == r.end() ? 0 : it->second->bytes;
}

int launch(const emu_kernel_desc* k, const unsigned grid[3], const unsigned block[3], void** params,
           const char* packed, bool sm90a) {
	const unsigned n = block[0] * block[1] * block[2];
	const unsigned long long nblocks = (unsigned long long)grid[0] * grid[1] * grid[2];
	static const unsigned ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long long want = env_u64("GDROTRAIN_EMU_WORKERS", ncpu < 8 ? ncpu : 8);
	if (want > kMaxWorkers) want = kMaxWorkers;
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
	auto sh = shared_registry().find(k->name);
	L.shared = sh == shared_registry().end() ? nullptr : sh->second;
	L.params = params;
	L.packed = packed;
	L.sm90a = sm90a;
	for (int d = 0; d < 3; d++) {
		L.grid[d] = grid[d];
		L.block[d] = block[d];
	}
	L.nthreads = n;
	L.nworkers = nw;
	L.win_off.clear();
	L.win_end = kWinBase;
	if (L.shared)
		for (unsigned v = 0; v < L.shared->nvars; v++) {
			// 1024-aligned, with a gap after each variable (so that an
			// address past one's end is in no other).
			L.win_off.push_back((L.win_end + (v ? 16 : 0) + 1023) & ~1023u);
			L.win_end = L.win_off.back() + (unsigned)L.shared->vars[v].size;
		}
	L.nblocks = nblocks;
	L.next_block = 0;
	L.seed = launch_seed(k->name);
	L.remaining = (int)nw;
	L.done = 0;
	L.fault = 0;
	blockDim = dim3(block[0], block[1], block[2]);
	gridDim = dim3(grid[0], grid[1], grid[2]);
	for (unsigned i = 0; i < nw; i++) {
		Worker* w = g_workers[i];
		__atomic_add_fetch(&w->go, 1, __ATOMIC_RELEASE);
		futex(&w->go, FUTEX_WAKE_PRIVATE, 1, nullptr);
	}
	while (load_acq(&L.done) == 0) futex(&L.done, FUTEX_WAIT_PRIVATE, 0, nullptr);
	g_kernel_name = "";
	if (L.fault) {
		const uint3 t = L.fault_thread;
		const unsigned long long gx = L.grid[0], gxy = gx * L.grid[1], b = L.fault_block;
		char at[64] = "";
		if (L.fault_addr_kind == 0)
			snprintf(at, sizeof at, " at %#llx", (unsigned long long)L.fault_addr);
		else if (L.fault_addr_kind == 1)
			snprintf(at, sizeof at, " at shared window address %#llx", (unsigned long long)L.fault_addr);
		std::string addr = L.fault_addr_kind ? "" : describe_address(L.fault_addr);
		fprintf(stderr,
		        "gdrotrain CUDA emulator: kernel %s: %s%s%s%s, block (%llu,%llu,%llu) thread (%u,%u,%u); "
		        "the launch fails with %s (GDROTRAIN_EMU_SEED=%llu, GDROTRAIN_EMU_SEED_SCOPE=\"%s\", launch %llu)\n",
		        k->name, L.fault_what, at, addr.empty() ? "" : ": ", addr.c_str(), b % gx,
		        b / gx % L.grid[1], b / gxy, t.x, t.y, t.z,
		        L.fault == CUDA_ERROR_ILLEGAL_ADDRESS    ? "CUDA_ERROR_ILLEGAL_ADDRESS"
		        : L.fault == CUDA_ERROR_MISALIGNED_ADDRESS ? "CUDA_ERROR_MISALIGNED_ADDRESS"
		                                                   : "CUDA_ERROR_LAUNCH_FAILED",
		        g_sched.base, g_sched.scope.c_str(), g_sched.launch - 1);
		fflush(stderr);
		return L.fault;
	}
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

namespace {
[[noreturn]] __attribute__((noinline, cold)) void not_in_mask(Fiber* f, unsigned mask, const char* op) {
	char msg[200];
	snprintf(msg, sizeof msg, "%s calls %s with mask %08x, which leaves its lane (%u) out: undefined in CUDA",
	         where(f).c_str(), op, mask, f->lin & 31);
	die(msg);
}
// check_in_mask checks what CUDA requires of every warp operation: the
// calling lane in its mask.
inline void check_in_mask(Fiber* f, unsigned mask, const char* op) {
	if (!(mask >> (f->lin & 31) & 1)) not_in_mask(f, mask, op);
}
}  // namespace

extern "C" {

void emu_register_kernel(const emu_kernel_desc* k) { registry().emplace(k->name, k); }

void emu_register_shared(const emu_kernel_shared* s) { shared_registry().emplace(s->kernel, s); }

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
	check_in_mask(f, mask, "__syncwarp");
	f->op = OP_SYNC;
	f->mask = mask;
	f->state = F_WARP;
	suspend(f);
}

unsigned long long emu_shfl(unsigned long long v, int mode, int b, int width, unsigned mask) {
	Fiber* f = t_fiber;
	check_in_mask(f, mask, "a shuffle");
	if (width < 1 || width > 32 || (width & (width - 1))) {
		char msg[200];
		snprintf(msg, sizeof msg, "%s shuffles with width %d, not a power of two up to 32: undefined in CUDA",
		         where(f).c_str(), width);
		die(msg);
	}
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

// whole_warp_op posts an operation every lane of the warp takes part in
// (val: what the lane posts; b: an operand) and waits for the warp.
static void whole_warp_op(int op, unsigned long long val = 0, int b = 0) {
	Fiber* f = t_fiber;
	f->op = op;
	f->val = val;
	f->b = b;
	f->mask = 0xffffffffu;
	f->state = F_WARP;
	suspend(f);
}

void emu_mma_bf16_16816(float* c, const unsigned* a, const unsigned* b) {
	MmaFrags m{c, a, b};
	whole_warp_op(OP_MMA, (unsigned long long)(uintptr_t)&m);
}

// wg_need_sm90a fails a warpgroup-MMA instruction in a kernel whose module
// was not compiled for sm_90a (PTX for compute_90 the driver compiled for a
// newer GPU, say): wgmma exists in sm_90a code only, and wgmma.cuh's other
// builds trap.
static void wg_need_sm90a() {
	if (!g_launch.sm90a)
		cp_fail(t_fiber, CUDA_ERROR_LAUNCH_FAILED, 0,
		        "a warpgroup MMA (wgmma) in a module not compiled for sm_90a: only sm_90a code has it (other builds trap)", 2);
}

void emu_wgmma_fence(void) {
	wg_need_sm90a();
	whole_warp_op(OP_WG_FENCE);
}

void emu_wgmma_commit(void) {
	wg_need_sm90a();
	whole_warp_op(OP_WG_COMMIT);
}

void emu_wgmma_wait(int n) {
	wg_need_sm90a();
	whole_warp_op(OP_WG_WAIT, 0, n);
}

void emu_wgmma_bf16(float* d, int n, const unsigned* a, unsigned long long adesc, unsigned long long bdesc,
                    int scale_d, int tnsp_a, int tnsp_b) {
	wg_need_sm90a();
	WgPost p{d, n, a, adesc, bdesc, scale_d, tnsp_a, tnsp_b};
	whole_warp_op(OP_WG_MMA, (unsigned long long)(uintptr_t)&p);
}

// cp.async.cg.shared.global [dst], [src], 16, src_bytes (see the cp.async
// section).
void emu_cp_async16(void* dst, const void* src, int src_bytes) {
	Fiber* f = t_fiber;
	const Launch& L = g_launch;
	if (src_bytes < 0 || src_bytes > 16)
		cp_fail(f, CUDA_ERROR_LAUNCH_FAILED, 0,
		        "cp.async.cg.shared.global with src-size " + std::to_string(src_bytes) +
		            ": it must be 0 to 16 (the copy size)",
		        2);
	char* d = (char*)dst;
	int v = -1;
	char* vs = nullptr;
	if (L.shared) {
		char* a = L.shared->anchor();
		for (unsigned i = 0; i < L.shared->nvars && v < 0; i++) {
			char* s = a + L.shared->vars[i].offset;
			if (d >= s && d < s + L.shared->vars[i].size) v = (int)i, vs = s;
		}
	}
	if (v < 0)
		cp_fail(f, CUDA_ERROR_ILLEGAL_ADDRESS, (uintptr_t)dst,
		        "cp.async destination outside every __shared__ variable of the kernel", 0);
	const size_t vsize = L.shared->vars[v].size;
	const unsigned win = L.win_off[v] + (unsigned)(d - vs);
	if (win % 16 || (uintptr_t)d % 16)
		cp_fail(f, CUDA_ERROR_MISALIGNED_ADDRESS, win,
		        "cp.async destination not 16-byte aligned (offset " + std::to_string(d - vs) + " of a " +
		            std::to_string(vsize) + "-byte __shared__ variable" +
		            ((uintptr_t)vs % 16 ? ", which is not declared __align__(16)" : "") + ")",
		        1);
	if ((size_t)(d - vs) + 16 > vsize)
		cp_fail(f, CUDA_ERROR_ILLEGAL_ADDRESS, win,
		        "cp.async destination runs past the end of the " + std::to_string(vsize) +
		            "-byte __shared__ variable at window " + hex(L.win_off[v]),
		        1);
	if ((uintptr_t)src % 16)
		cp_fail(f, CUDA_ERROR_MISALIGNED_ADDRESS, (uintptr_t)src, "cp.async source not 16-byte aligned", 0);
	if (src_bytes > 0 && dev_range_check((uintptr_t)src, (size_t)src_bytes) != CUDA_SUCCESS)
		cp_fail(f, CUDA_ERROR_ILLEGAL_ADDRESS, (uintptr_t)src,
		        "cp.async source (" + std::to_string(src_bytes) + " bytes) outside device memory", 0);
	CpBlock& C = cp_state(f->w);
	if (unsigned o = C.owner[win / 16])
		cp_fail(f, CUDA_ERROR_LAUNCH_FAILED, win,
		        "cp.async to 16 bytes that a cp.async of " + cp_thread_name(&f->w->fibers[o - 1]) +
		            " still has in flight (two copies to the same bytes are unordered: undefined)",
		        1);
	CpThread& T = C.th[f->lin];
	if (T.pending.empty() && T.groups == 0) C.used.push_back(f->lin);
	T.pending.emplace_back();
	CpCopy& c = T.pending.back();
	c.dst = d;
	c.win = win;
	c.src = (const char*)src;
	c.bytes = src_bytes;
	c.group = -1;
	memset(c.snap, 0, 16);
	memcpy(c.snap, src, (size_t)src_bytes);
	for (int i = 0; i < 4; i++) memcpy(d + 4 * i, &kCpPoison, 4);
	C.owner[win / 16] = f->lin + 1;
}

void emu_cp_async_commit(void) {
	Fiber* f = t_fiber;
	CpBlock& C = cp_state(f->w);
	CpThread& T = C.th[f->lin];
	if (T.pending.empty() && T.groups == 0) C.used.push_back(f->lin);
	for (auto& c : T.pending)
		if (c.group < 0) c.group = T.groups;
	T.groups++;
}

void emu_cp_async_wait(int n) {
	Fiber* f = t_fiber;
	if (n < 0) cp_fail(f, CUDA_ERROR_LAUNCH_FAILED, 0, "cp.async.wait_group " + std::to_string(n) + ": N must be >= 0", 2);
	CpBlock& C = cp_state(f->w);
	CpThread& T = C.th[f->lin];
	// Groups are numbered in commit order; the wait retires every group
	// but the n most recent committed ones, empty ones among them (PTX: "all
	// the prior cp.async-groups ... are complete"): an empty newest group
	// still counts as one of the n.
	const long long keep = (long long)T.groups - n;
	bool due = false;
	for (const auto& c : T.pending)
		if (c.group >= 0 && c.group < keep) due = true;
	if (due) {
		// The copies complete only when every other thread of the block
		// has run as far as it can (schedule): a thread reading them
		// without a __syncthreads after this one's wait sees the poison.
		f->state = F_CPWAIT;
		suspend(f);
	}
	while (!T.pending.empty() && T.pending.front().group >= 0 && T.pending.front().group < keep) {
		cp_complete(f, C, T.pending.front());
		T.pending.pop_front();
	}
}

// The async proxy sees the block's shared memory as it is now (its shadow).
void emu_fence_proxy_async(void) {
	Fiber* f = t_fiber;
	WgBlock& B = wg_state(f->w);
	const Launch& L = g_launch;
	for (size_t v = 0; v < B.vhost.size(); v++) memcpy(B.shadow.data() + L.win_off[v], B.vhost[v], L.shared->vars[v].size);
	B.shadow_ok = true;
}

unsigned emu_cvta_shared(const void* p) {
	Fiber* f = t_fiber;
	const Launch& L = g_launch;
	const char* c = (const char*)p;
	if (L.shared) {
		// A variable's bytes, or else the end of one (one past it is a
		// valid pointer; it may be where the next variable starts).
		const char* a = L.shared->anchor();
		for (int end = 0; end < 2; end++)
			for (unsigned v = 0; v < L.shared->nvars; v++) {
				const char* s = a + L.shared->vars[v].offset;
				if (c >= s && (c < s + L.shared->vars[v].size || (end && c == s + L.shared->vars[v].size)))
					return L.win_off[v] + (unsigned)(c - s);
			}
	}
	wg_fail(f->w, f, CUDA_ERROR_ILLEGAL_ADDRESS, (uintptr_t)p,
	        "__cvta_generic_to_shared of an address outside every __shared__ variable of the kernel", 0);
}

unsigned emu_ballot(int pred, unsigned mask) {
	Fiber* f = t_fiber;
	check_in_mask(f, mask, "a vote");
	f->op = OP_BALLOT;
	f->pred = pred != 0;
	f->mask = mask;
	f->state = F_WARP;
	suspend(f);
	return (unsigned)f->result;
}

// The lanes of a warp run one at a time here, so the caller is the only
// lane active when it asks.
unsigned emu_activemask(void) { return 1u << (t_fiber->lin & 31); }

void emu_preempt(int one_in) {
	Fiber* f = t_fiber;
	if (one_in > 1 && below(&f->w->rng, (unsigned)one_in) != 0) return;
	f->state = F_RUN;
	suspend(f);
}

// g++'s -fsanitize=alignment calls these (the _abort form under
// -fno-sanitize-recover) when kernel code dereferences a pointer not
// aligned for its type: a misaligned access, which faults on a GPU. The
// data is what g++ emits for the check: the source location, the type and
// its alignment.
struct emu_ubsan_loc {
	const char* file;
	unsigned line, column;
};
struct emu_ubsan_type {
	unsigned short kind, info;
	char name[1];
};
struct emu_ubsan_mismatch {
	emu_ubsan_loc loc;
	const emu_ubsan_type* type;
	unsigned char log_align, check_kind;
};

[[noreturn]] static void misaligned(const emu_ubsan_mismatch* d, uintptr_t p) {
	char what[400];
	snprintf(what, sizeof what, "misaligned access (%s:%u: %s, aligned to %u bytes)", d->loc.file, d->loc.line,
	         d->type->name, 1u << d->log_align);
	Fiber* f = t_fiber;
	if (!f) die(what);
	fault_out(f->w, CUDA_ERROR_MISALIGNED_ADDRESS, p, what);
}
void __ubsan_handle_type_mismatch_v1(const emu_ubsan_mismatch* d, uintptr_t p) { misaligned(d, p); }
void __ubsan_handle_type_mismatch_v1_abort(const emu_ubsan_mismatch* d, uintptr_t p) { misaligned(d, p); }

}  // extern "C"
