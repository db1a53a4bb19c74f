// emu_nccl.cc: NCCL's communicator and collectives for the CPU emulator,
// between processes of one machine (each one rank, as on a GPU node).
//
// The unique id carries the name of a POSIX shared-memory segment; every
// rank maps it. The segment holds a header (each rank's pid, a barrier
// counter per rank, each rank's current collective) and one slot per rank.
// A collective runs synchronously in the call, chunk by chunk: every rank
// copies its chunk into its slot, waits until all have, computes its output
// from the slots, and waits again before the slots are reused. Reductions
// add slot 0 + slot 1 + … in rank order, so every rank gets bitwise the same
// result and a test can compute it on the host.
//
// Waits poll the other ranks' counters. A rank that does not arrive within
// GDROTRAIN_EMU_NCCL_TIMEOUT_MS (default 60000) makes the call fail with
// ncclSystemError, one whose process has exited with ncclRemoteError, and
// ncclCommAbort from another thread with ncclSystemError at once; each
// names the missing ranks in ncclGetLastError. GDROTRAIN_EMU_NCCL_SLOT_BYTES
// (default 4 MiB, read by the first rank to join) sets the slot size, so
// tests can make small collectives cross chunk boundaries. Up to 64 ranks.
// Reductions cover the integer types, float32 and float64; copies (all-gather,
// broadcast) any type. Calls made by the ranks must match (same collective,
// count, type, op, root), or they fail with ncclInvalidUsage.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "emu_internal.h"

namespace emu {
namespace {

// ncclResult_t, ncclDataType_t and ncclRedOp_t values (nccl.h).
enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
};
enum {
	ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
	ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9, ncclFloat8e4m3 = 10, ncclFloat8e5m2 = 11,
};
enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3 };

constexpr int kMaxRanks = 64;
constexpr char kMagic[8] = {'G', 'D', 'R', 'O', 'N', 'C', 'C', 'L'};
constexpr size_t kIdBytes = 128;
constexpr int kVersion = 22900;  // reported as NCCL 2.29.0

enum Op { kAllReduce = 1, kReduceScatter, kAllGather, kBroadcast };
const char* op_name(int op) {
	switch (op) {
	case kAllReduce: return "all_reduce";
	case kReduceScatter: return "reduce_scatter";
	case kAllGather: return "all_gather";
	case kBroadcast: return "broadcast";
	}
	return "?";
}

// Desc is one rank's current collective, compared across ranks.
struct Desc {
	int32_t op, type, redop, root;
	uint64_t count, index;
};

// Segment is the head of the shared memory; the slots follow at slotOffset.
// A fresh segment is zero-filled, which is every field's initial state.
struct Segment {
	std::atomic<int32_t> nranks;
	std::atomic<uint64_t> slot_bytes;
	std::atomic<int32_t> pid[kMaxRanks];       // 0 until the rank joins
	std::atomic<uint64_t> arrived[kMaxRanks];  // barriers each rank has reached
	Desc desc[kMaxRanks];
};
constexpr size_t kSlotOffset = (sizeof(Segment) + 4095) / 4096 * 4096;

struct Comm {
	int rank = 0, nranks = 0;
	std::string name;
	Segment* seg = nullptr;
	size_t map_bytes = 0;
	char* slots = nullptr;
	uint64_t slot_bytes = 0;
	uint64_t barriers = 0, ops = 0;
	std::atomic<int> inflight{0};
	std::atomic<bool> aborted{false};
	std::atomic<int> async{ncclSuccess};
};

thread_local char t_last[1024];

// fail records the message for ncclGetLastError and returns code.
int fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
int fail(int code, const char* fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t_last, sizeof t_last, fmt, ap);
	va_end(ap);
	return code;
}

double now_s() {
	return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string rank_list(Comm* c, uint64_t target) {
	std::string s;
	for (int i = 0; i < c->nranks; i++) {
		if (c->seg->arrived[i].load(std::memory_order_acquire) < target) {
			if (!s.empty()) s += ", ";
			s += std::to_string(i);
		}
	}
	return s;
}

// barrier marks this rank's arrival at the next barrier and waits for the
// others (see the file comment for how a wait ends early).
int barrier(Comm* c, const char* what) {
	uint64_t target = ++c->barriers;
	Segment* s = c->seg;
	s->arrived[c->rank].store(target, std::memory_order_release);
	double start = now_s(), next_check = start + 0.05;
	double limit = (double)env_u64("GDROTRAIN_EMU_NCCL_TIMEOUT_MS", 60000) / 1000;
	for (int spins = 0;; spins++) {
		bool all = true;
		for (int i = 0; i < c->nranks && all; i++) all = s->arrived[i].load(std::memory_order_acquire) >= target;
		if (all) return ncclSuccess;
		if (c->aborted.load()) {
			return fail(ncclSystemError, "rank %d of %d: %s: communicator aborted while waiting for rank(s) %s",
			            c->rank, c->nranks, what, rank_list(c, target).c_str());
		}
		double t = now_s();
		if (t >= next_check) {
			next_check = t + 0.05;
			for (int i = 0; i < c->nranks; i++) {
				int pid = s->pid[i].load();
				if (s->arrived[i].load(std::memory_order_acquire) < target && pid > 0 && kill(pid, 0) != 0 &&
				    errno == ESRCH) {
					return fail(ncclRemoteError, "rank %d of %d: %s: rank %d (pid %d) has exited", c->rank, c->nranks,
					            what, i, pid);
				}
			}
		}
		if (t - start > limit) {
			return fail(ncclSystemError,
			            "rank %d of %d: %s: rank(s) %s did not arrive within %.1f s (GDROTRAIN_EMU_NCCL_TIMEOUT_MS)",
			            c->rank, c->nranks, what, rank_list(c, target).c_str(), limit);
		}
		if (spins < 200) {
			sched_yield();
		} else {
			struct timespec ts = {0, spins < 2000 ? 20000 : 500000};
			nanosleep(&ts, nullptr);
		}
	}
}

void unmap(Comm* c) {
	if (c->seg) munmap(c->seg, c->map_bytes);
	c->seg = nullptr;
}

size_t type_size(int t) {
	switch (t) {
	case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
	case ncclFloat16: case ncclBfloat16: return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
	}
	return 0;
}

// reduceT sets out[j] = s_0[j] ∘ s_1[j] ∘ … in rank order, where s_i is the
// c-element run at offset off of rank i's slot.
template <typename T>
void reduceT(Comm* c, int redop, size_t off, size_t n, void* out) {
	T* o = (T*)out;
	for (size_t j = 0; j < n; j++) {
		T acc = ((const T*)c->slots)[off + j];
		for (int i = 1; i < c->nranks; i++) {
			T v = ((const T*)(c->slots + i * c->slot_bytes))[off + j];
			switch (redop) {
			case ncclSum: acc = acc + v; break;
			case ncclProd: acc = acc * v; break;
			case ncclMax: acc = v > acc ? v : acc; break;
			case ncclMin: acc = v < acc ? v : acc; break;
			}
		}
		o[j] = acc;
	}
}

bool reducible(int t) {
	return t == ncclInt8 || t == ncclUint8 || t == ncclInt32 || t == ncclUint32 || t == ncclInt64 ||
	       t == ncclUint64 || t == ncclFloat32 || t == ncclFloat64;
}

void reduce(Comm* c, int type, int redop, size_t off, size_t n, void* out) {
	switch (type) {
	case ncclInt8: reduceT<int8_t>(c, redop, off, n, out); break;
	case ncclUint8: reduceT<uint8_t>(c, redop, off, n, out); break;
	case ncclInt32: reduceT<int32_t>(c, redop, off, n, out); break;
	case ncclUint32: reduceT<uint32_t>(c, redop, off, n, out); break;
	case ncclInt64: reduceT<int64_t>(c, redop, off, n, out); break;
	case ncclUint64: reduceT<uint64_t>(c, redop, off, n, out); break;
	case ncclFloat32: reduceT<float>(c, redop, off, n, out); break;
	case ncclFloat64: reduceT<double>(c, redop, off, n, out); break;
	}
}

char* slot(Comm* c, int i) { return c->slots + (size_t)i * c->slot_bytes; }

// collective checks the arguments, checks that every rank called the same
// collective, and runs it (count: elements per rank for all-gather and
// reduce-scatter, the buffer's elements otherwise).
int collective(int op, const void* send, void* recv, size_t count, int type, int redop, int root, void* vcomm,
               void* stream) {
	Comm* c = (Comm*)vcomm;
	const char* name = op_name(op);
	if (!c || !c->seg) return fail(ncclInvalidArgument, "nccl %s: NULL or destroyed communicator", name);
	size_t el = type_size(type);
	if (el == 0) return fail(ncclInvalidArgument, "nccl %s: unknown data type %d", name, type);
	bool reduces = op == kAllReduce || op == kReduceScatter;
	if (reduces && !reducible(type)) {
		return fail(ncclInvalidArgument, "nccl %s: the emulator does not reduce data type %d (fp16/bf16/fp8)", name,
		            type);
	}
	if (reduces && (redop < ncclSum || redop > ncclMin)) {
		return fail(ncclInvalidArgument, "nccl %s: the emulator supports ncclSum, ncclProd, ncclMax and ncclMin, not op %d",
		            name, redop);
	}
	if (op == kBroadcast && (root < 0 || root >= c->nranks)) {
		return fail(ncclInvalidArgument, "nccl %s: root %d is not a rank of %d", name, root, c->nranks);
	}
	size_t n = (size_t)c->nranks;
	size_t sendN = op == kReduceScatter ? count * n : count, recvN = op == kAllGather ? count * n : count;
	if (count > (SIZE_MAX / el) / n) return fail(ncclInvalidArgument, "nccl %s: count %zu overflows", name, count);
	{
		std::lock_guard<std::mutex> lock(api_mutex());
		bool sendUsed = !(op == kBroadcast && c->rank != root);
		if (sendUsed && !dev_range_ok((uintptr_t)send, sendN * el)) {
			return fail(ncclInvalidArgument, "nccl %s: sendbuff %p (%zu bytes) is not device memory", name, send,
			            sendN * el);
		}
		if (!dev_range_ok((uintptr_t)recv, recvN * el)) {
			return fail(ncclInvalidArgument, "nccl %s: recvbuff %p (%zu bytes) is not device memory", name, recv,
			            recvN * el);
		}
		if (!stream_ok(stream)) return fail(ncclInvalidArgument, "nccl %s: invalid stream", name);
	}
	if (c->async.load() != ncclSuccess) {
		return fail(ncclInvalidUsage, "rank %d of %d: nccl %s on a communicator that has failed", c->rank, c->nranks,
		            name);
	}
	c->inflight++;
	struct Leave {
		Comm* c;
		~Leave() { c->inflight--; }
	} leave{c};

	uint64_t index = ++c->ops;
	char what[128];
	snprintf(what, sizeof what, "%s #%llu (%zu elements of type %d)", name, (unsigned long long)index, count, type);
	Segment* s = c->seg;
	Desc mine = {op, type, reduces ? redop : 0, op == kBroadcast ? root : 0, (uint64_t)count, index};
	s->desc[c->rank] = mine;
	auto failed = [&](int rc) {
		c->async.store(rc);
		return rc;
	};
	if (int rc = barrier(c, what)) return failed(rc);
	for (int i = 0; i < c->nranks; i++) {
		const Desc& d = s->desc[i];
		if (memcmp(&d, &mine, sizeof d) != 0) {
			return failed(fail(ncclInvalidUsage,
			                   "rank %d of %d: %s does not match rank %d's call #%llu: %s of %llu elements, type %d, op %d, root %d",
			                   c->rank, c->nranks, what, i, (unsigned long long)d.index, op_name(d.op),
			                   (unsigned long long)d.count, d.type, d.redop, d.root));
		}
	}

	size_t per = c->slot_bytes / el;  // elements per slot
	if (op == kReduceScatter) per /= n;
	if (per == 0) return failed(fail(ncclInternalError, "nccl %s: slot of %llu bytes too small", name, (unsigned long long)c->slot_bytes));
	const char* in = (const char*)send;
	char* out = (char*)recv;
	size_t off = 0;
	do {
		size_t k = count - off < per ? count - off : per;  // elements this round (per rank for RS/AG)
		switch (op) {
		case kAllReduce:
		case kAllGather:
			memcpy(slot(c, c->rank), in + off * el, k * el);
			break;
		case kReduceScatter:
			for (size_t b = 0; b < n; b++) memcpy(slot(c, c->rank) + b * k * el, in + (b * count + off) * el, k * el);
			break;
		case kBroadcast:
			if (c->rank == root) memcpy(slot(c, root), in + off * el, k * el);
			break;
		}
		if (int rc = barrier(c, what)) return failed(rc);
		switch (op) {
		case kAllReduce:
			reduce(c, type, redop, 0, k, out + off * el);
			break;
		case kReduceScatter:
			reduce(c, type, redop, (size_t)c->rank * k, k, out + off * el);
			break;
		case kAllGather:
			for (size_t i = 0; i < n; i++) memcpy(out + (i * count + off) * el, slot(c, (int)i), k * el);
			break;
		case kBroadcast:
			memcpy(out + off * el, slot(c, root), k * el);
			break;
		}
		if (int rc = barrier(c, what)) return failed(rc);
		off += k;
	} while (off < count);
	return ncclSuccess;
}

const char* result_string(int r) {
	switch (r) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	}
	return "unknown result code";
}

}  // namespace
}  // namespace emu

using namespace emu;

typedef struct {
	char internal[kIdBytes];
} ncclUniqueId;

EMU_API int ncclGetVersion(int* v) {
	if (!v) return fail(ncclInvalidArgument, "ncclGetVersion: NULL");
	*v = kVersion;
	return ncclSuccess;
}

// The id is the magic, then the NUL-terminated segment name.
EMU_API int ncclGetUniqueId(ncclUniqueId* id) {
	if (!id) return fail(ncclInvalidArgument, "ncclGetUniqueId: NULL");
	static std::atomic<unsigned> counter{0};
	memset(id, 0, sizeof *id);
	memcpy(id->internal, kMagic, sizeof kMagic);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(id->internal + sizeof kMagic, kIdBytes - sizeof kMagic, "/gdrotrain-nccl-%d-%llx-%u", (int)getpid(),
	         (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec, counter++);
	return ncclSuccess;
}

EMU_API int ncclCommInitRank(void** out, int nranks, ncclUniqueId id, int rank) {
	if (!out) return fail(ncclInvalidArgument, "ncclCommInitRank: NULL comm");
	*out = nullptr;
	if (nranks < 1 || nranks > kMaxRanks) {
		return fail(ncclInvalidArgument, "ncclCommInitRank: %d ranks (the emulator takes 1 to %d)", nranks, kMaxRanks);
	}
	if (rank < 0 || rank >= nranks) return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
	if (memcmp(id.internal, kMagic, sizeof kMagic) != 0 || id.internal[kIdBytes - 1] != 0 ||
	    id.internal[sizeof kMagic] != '/') {
		return fail(ncclInvalidArgument, "ncclCommInitRank: the unique id was not made by the emulator's ncclGetUniqueId");
	}
	Comm* c = new Comm;
	c->rank = rank;
	c->nranks = nranks;
	c->name = id.internal + sizeof kMagic;
	auto bail = [&](int rc) {
		unmap(c);
		shm_unlink(c->name.c_str());
		delete c;
		return rc;
	};
	int fd = shm_open(c->name.c_str(), O_RDWR | O_CREAT, 0600);
	if (fd < 0) return bail(fail(ncclSystemError, "ncclCommInitRank: shm_open %s: %s", c->name.c_str(), strerror(errno)));
	// Grow the segment to the size this rank needs, never shrinking it.
	auto grow = [&](size_t want) {
		struct stat st;
		if (fstat(fd, &st) != 0) return false;
		return (size_t)st.st_size >= want || ftruncate(fd, (off_t)want) == 0;
	};
	void* p = grow(kSlotOffset) ? mmap(nullptr, kSlotOffset, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
	if (p == MAP_FAILED) {
		close(fd);
		return bail(fail(ncclSystemError, "ncclCommInitRank: mapping %s: %s", c->name.c_str(), strerror(errno)));
	}
	Segment* s = (Segment*)p;
	int32_t zero = 0;
	s->nranks.compare_exchange_strong(zero, nranks);
	uint64_t none = 0;
	s->slot_bytes.compare_exchange_strong(none, (env_u64("GDROTRAIN_EMU_NCCL_SLOT_BYTES", 4 << 20) + 63) / 64 * 64);
	c->slot_bytes = s->slot_bytes.load();
	int32_t seen = s->nranks.load();
	munmap(p, kSlotOffset);
	if (seen != nranks) {
		close(fd);
		return bail(fail(ncclInvalidUsage, "ncclCommInitRank: rank %d was told %d ranks, another rank %d", rank, nranks, seen));
	}
	c->map_bytes = kSlotOffset + (size_t)nranks * c->slot_bytes;
	p = grow(c->map_bytes) ? mmap(nullptr, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
	close(fd);
	if (p == MAP_FAILED) {
		return bail(fail(ncclSystemError, "ncclCommInitRank: mapping %s: %s", c->name.c_str(), strerror(errno)));
	}
	c->seg = (Segment*)p;
	c->slots = (char*)p + kSlotOffset;
	int32_t nopid = 0;
	if (!c->seg->pid[rank].compare_exchange_strong(nopid, (int32_t)getpid())) {
		return bail(fail(ncclInvalidUsage, "ncclCommInitRank: rank %d of %d joined twice (pids %d and %d)", rank, nranks,
		                 nopid, (int)getpid()));
	}
	if (int rc = barrier(c, "ncclCommInitRank")) return bail(rc);
	if (rank == 0) shm_unlink(c->name.c_str());  // every rank has it mapped
	*out = c;
	return ncclSuccess;
}

EMU_API int ncclCommDestroy(void* comm) {
	Comm* c = (Comm*)comm;
	if (!c) return fail(ncclInvalidArgument, "ncclCommDestroy: NULL comm");
	unmap(c);
	delete c;
	return ncclSuccess;
}

// ncclCommAbort may come from another thread while a call waits: that call
// sees the flag, fails, and leaves before the communicator is freed.
EMU_API int ncclCommAbort(void* comm) {
	Comm* c = (Comm*)comm;
	if (!c) return ncclSuccess;
	c->aborted.store(true);
	for (int i = 0; c->inflight.load() > 0; i++) {
		if (i > 100000) return fail(ncclInternalError, "ncclCommAbort: a call did not return");
		struct timespec ts = {0, 100000};
		nanosleep(&ts, nullptr);
	}
	unmap(c);
	delete c;
	return ncclSuccess;
}

EMU_API int ncclCommGetAsyncError(void* comm, int* err) {
	Comm* c = (Comm*)comm;
	if (!c || !err) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
	*err = c->async.load();
	return ncclSuccess;
}

EMU_API int ncclCommCount(const void* comm, int* count) {
	if (!comm || !count) return fail(ncclInvalidArgument, "ncclCommCount: NULL argument");
	*count = ((const Comm*)comm)->nranks;
	return ncclSuccess;
}

EMU_API int ncclCommUserRank(const void* comm, int* rank) {
	if (!comm || !rank) return fail(ncclInvalidArgument, "ncclCommUserRank: NULL argument");
	*rank = ((const Comm*)comm)->rank;
	return ncclSuccess;
}

EMU_API const char* ncclGetErrorString(int r) { return result_string(r); }

EMU_API const char* ncclGetLastError(void*) { return t_last; }

EMU_API int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, void* comm, void* stream) {
	return collective(kAllReduce, send, recv, count, type, op, 0, comm, stream);
}

EMU_API int ncclReduceScatter(const void* send, void* recv, size_t recvcount, int type, int op, void* comm,
                              void* stream) {
	return collective(kReduceScatter, send, recv, recvcount, type, op, 0, comm, stream);
}

EMU_API int ncclAllGather(const void* send, void* recv, size_t sendcount, int type, void* comm, void* stream) {
	return collective(kAllGather, send, recv, sendcount, type, 0, 0, comm, stream);
}

EMU_API int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, void* comm, void* stream) {
	return collective(kBroadcast, send, recv, count, type, 0, root, comm, stream);
}
