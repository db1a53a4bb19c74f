// The CUDA entry points and constants the shim (capi.go) uses, declared
// from NVIDIA's public API documentation so that the binary builds without
// CUDA headers (docs/architecture.md, decision 2).
//
// Every type is written GD_T(real, abi): a normal build sees the ABI type
// (an opaque pointer, an int for enums and status codes), and the header
// test (headers_test.go) compiles this file with GD_CHECK_HEADERS against
// NVIDIA's real cuda.h, nvrtc.h, cublas_v2.h and nccl.h, where each prototype takes
// the real types; assigning the real function to a pointer of our type then
// fails to compile if a signature drifts. The same test checks every
// constant below against the header's value and that each (real, abi) pair
// has the same size.
#ifndef GDROTRAIN_SHIM_H
#define GDROTRAIN_SHIM_H

#include <stddef.h>

#ifdef GD_CHECK_HEADERS
#define GD_T(real, abi) real
#else
#define GD_T(real, abi) abi
#endif

typedef unsigned long long devptr;
typedef void* handle;

#define GD_RESULT GD_T(CUresult, int)
#define GD_DEVICE GD_T(CUdevice, int)
#define GD_DEVPTR GD_T(CUdeviceptr, devptr)
#define GD_CONTEXT GD_T(CUcontext, handle)
#define GD_EVENT GD_T(CUevent, handle)
#define GD_STREAM GD_T(CUstream, handle)
#define GD_MODULE GD_T(CUmodule, handle)
#define GD_FUNCTION GD_T(CUfunction, handle)
#define GD_GRAPH GD_T(CUgraph, handle)
#define GD_GRAPH_EXEC GD_T(CUgraphExec, handle)
#define GD_NVRTC_RESULT GD_T(nvrtcResult, int)
#define GD_PROGRAM GD_T(nvrtcProgram, handle)
#define GD_BLAS_STATUS GD_T(cublasStatus_t, int)
#define GD_BLAS GD_T(cublasHandle_t, handle)

// Virtual memory management (the paged KV cache): a physical allocation's
// handle, and the two structs our calls fill, laid out as cuda.h's (the
// header test checks sizes, alignments and field offsets).
typedef unsigned long long gd_u64;
typedef struct {
	int type; // CUmemLocationType
	int id;
} gd_mem_location;
typedef struct {
	int type;                 // CUmemAllocationType
	int requestedHandleTypes; // CUmemAllocationHandleType
	gd_mem_location location;
	void* win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} gd_mem_prop;
typedef struct {
	gd_mem_location location;
	int flags; // CUmemAccess_flags
} gd_mem_access;
#define GD_MEM_HANDLE GD_T(CUmemGenericAllocationHandle, gd_u64)
#define GD_MEM_PROP GD_T(CUmemAllocationProp, gd_mem_prop)
#define GD_MEM_ACCESS GD_T(CUmemAccessDesc, gd_mem_access)
#ifdef GD_CHECK_HEADERS
_Static_assert(offsetof(CUmemAllocationProp, location) == offsetof(gd_mem_prop, location), "CUmemAllocationProp.location");
_Static_assert(offsetof(CUmemAllocationProp, win32HandleMetaData) == offsetof(gd_mem_prop, win32HandleMetaData),
               "CUmemAllocationProp.win32HandleMetaData");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) == offsetof(gd_mem_prop, allocFlags), "CUmemAllocationProp.allocFlags");
_Static_assert(sizeof(CUmemAllocationProp) == sizeof(gd_mem_prop), "CUmemAllocationProp size");
_Static_assert(offsetof(CUmemAccessDesc, flags) == offsetof(gd_mem_access, flags), "CUmemAccessDesc.flags");
_Static_assert(sizeof(CUmemAccessDesc) == sizeof(gd_mem_access), "CUmemAccessDesc size");
#endif

// ncclUniqueId is passed by value: our copy has the same 128 bytes.
typedef struct {
	char internal[128];
} gd_nccl_id;
#define GD_NCCL_RESULT GD_T(ncclResult_t, int)
#define GD_NCCL_COMM GD_T(ncclComm_t, handle)
#define GD_NCCL_ID GD_T(ncclUniqueId, gd_nccl_id)
#define GD_NCCL_TYPE GD_T(ncclDataType_t, int)
#define GD_NCCL_OP GD_T(ncclRedOp_t, int)
#define GD_CUDART_STREAM GD_T(cudaStream_t, handle)

// ---- driver API (libcuda) ----
typedef GD_RESULT (*pf_cuInit)(unsigned int flags);
typedef GD_RESULT (*pf_cuDriverGetVersion)(int* version);
typedef GD_RESULT (*pf_cuDeviceGetCount)(int* count);
typedef GD_RESULT (*pf_cuDeviceGet)(GD_DEVICE* device, int ordinal);
typedef GD_RESULT (*pf_cuDeviceGetName)(char* name, int len, GD_DEVICE dev);
typedef GD_RESULT (*pf_cuDeviceGetAttribute)(int* pi, GD_T(CUdevice_attribute, int) attrib, GD_DEVICE dev);
typedef GD_RESULT (*pf_cuDeviceTotalMem_v2)(size_t* bytes, GD_DEVICE dev);
typedef GD_RESULT (*pf_cuDevicePrimaryCtxRetain)(GD_CONTEXT* pctx, GD_DEVICE dev);
typedef GD_RESULT (*pf_cuDevicePrimaryCtxRelease_v2)(GD_DEVICE dev);
typedef GD_RESULT (*pf_cuCtxSetCurrent)(GD_CONTEXT ctx);
typedef GD_RESULT (*pf_cuCtxSynchronize)(void);
typedef GD_RESULT (*pf_cuMemAlloc_v2)(GD_DEVPTR* dptr, size_t bytesize);
typedef GD_RESULT (*pf_cuMemFree_v2)(GD_DEVPTR dptr);
typedef GD_RESULT (*pf_cuMemGetInfo_v2)(size_t* free, size_t* total);
typedef GD_RESULT (*pf_cuMemcpyHtoD_v2)(GD_DEVPTR dst, const void* src, size_t bytes);
typedef GD_RESULT (*pf_cuMemcpyDtoH_v2)(void* dst, GD_DEVPTR src, size_t bytes);
typedef GD_RESULT (*pf_cuMemcpyDtoD_v2)(GD_DEVPTR dst, GD_DEVPTR src, size_t bytes);
typedef GD_RESULT (*pf_cuMemsetD32_v2)(GD_DEVPTR dst, unsigned int value, size_t n);
typedef GD_RESULT (*pf_cuMemHostAlloc)(void** pp, size_t bytes, unsigned int flags);
typedef GD_RESULT (*pf_cuMemFreeHost)(void* p);
typedef GD_RESULT (*pf_cuStreamCreate)(GD_STREAM* stream, unsigned int flags);
typedef GD_RESULT (*pf_cuStreamSynchronize)(GD_STREAM stream);
typedef GD_RESULT (*pf_cuMemcpyHtoDAsync_v2)(GD_DEVPTR dst, const void* src, size_t bytes, GD_STREAM stream);
typedef GD_RESULT (*pf_cuMemcpyDtoHAsync_v2)(void* dst, GD_DEVPTR src, size_t bytes, GD_STREAM stream);
typedef GD_RESULT (*pf_cuMemcpyDtoDAsync_v2)(GD_DEVPTR dst, GD_DEVPTR src, size_t bytes, GD_STREAM stream);
typedef GD_RESULT (*pf_cuMemsetD32Async)(GD_DEVPTR dst, unsigned int value, size_t n, GD_STREAM stream);
typedef GD_RESULT (*pf_cuEventCreate)(GD_EVENT* event, unsigned int flags);
typedef GD_RESULT (*pf_cuEventRecord)(GD_EVENT event, GD_STREAM stream);
typedef GD_RESULT (*pf_cuEventSynchronize)(GD_EVENT event);
// cuEventElapsedTime_v2 (CUDA ≥ 12.8) has the same signature; the CUDA 13
// header keeps only that name, so the shim prefers it when present.
typedef GD_RESULT (*pf_cuEventElapsedTime)(float* ms, GD_EVENT start, GD_EVENT end);
typedef GD_RESULT (*pf_cuEventDestroy_v2)(GD_EVENT event);
typedef GD_RESULT (*pf_cuModuleLoadData)(GD_MODULE* module, const void* image);
typedef GD_RESULT (*pf_cuModuleGetFunction)(GD_FUNCTION* fn, GD_MODULE module, const char* name);
typedef GD_RESULT (*pf_cuFuncSetAttribute)(GD_FUNCTION fn, GD_T(CUfunction_attribute, int) attrib, int value);
typedef GD_RESULT (*pf_cuLaunchKernel)(GD_FUNCTION f, unsigned int gx, unsigned int gy, unsigned int gz,
                                       unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem,
                                       GD_STREAM stream, void** params, void** extra);
// Stream capture and graphs (the CUDA 12 names cuda.h maps cuStreamBeginCapture
// and cuGraphInstantiate to).
typedef GD_RESULT (*pf_cuStreamBeginCapture_v2)(GD_STREAM stream, GD_T(CUstreamCaptureMode, int) mode);
typedef GD_RESULT (*pf_cuStreamEndCapture)(GD_STREAM stream, GD_GRAPH* graph);
typedef GD_RESULT (*pf_cuStreamIsCapturing)(GD_STREAM stream, GD_T(CUstreamCaptureStatus, int) * status);
typedef GD_RESULT (*pf_cuGraphInstantiateWithFlags)(GD_GRAPH_EXEC* exec, GD_GRAPH graph, unsigned long long flags);
typedef GD_RESULT (*pf_cuGraphLaunch)(GD_GRAPH_EXEC exec, GD_STREAM stream);
typedef GD_RESULT (*pf_cuGraphExecDestroy)(GD_GRAPH_EXEC exec);
typedef GD_RESULT (*pf_cuGraphDestroy)(GD_GRAPH graph);
// Virtual memory management (CUDA ≥ 10.2): reserved address ranges with
// physical pages mapped into them on demand.
typedef GD_RESULT (*pf_cuMemAddressReserve)(GD_DEVPTR* ptr, size_t size, size_t alignment, GD_DEVPTR addr,
                                            unsigned long long flags);
typedef GD_RESULT (*pf_cuMemAddressFree)(GD_DEVPTR ptr, size_t size);
typedef GD_RESULT (*pf_cuMemCreate)(GD_MEM_HANDLE* handle, size_t size, const GD_MEM_PROP* prop,
                                    unsigned long long flags);
typedef GD_RESULT (*pf_cuMemRelease)(GD_MEM_HANDLE handle);
typedef GD_RESULT (*pf_cuMemMap)(GD_DEVPTR ptr, size_t size, size_t offset, GD_MEM_HANDLE handle,
                                 unsigned long long flags);
typedef GD_RESULT (*pf_cuMemUnmap)(GD_DEVPTR ptr, size_t size);
typedef GD_RESULT (*pf_cuMemSetAccess)(GD_DEVPTR ptr, size_t size, const GD_MEM_ACCESS* desc, size_t count);
typedef GD_RESULT (*pf_cuMemGetAllocationGranularity)(size_t* granularity, const GD_MEM_PROP* prop,
                                                      GD_T(CUmemAllocationGranularity_flags, int) option);
typedef GD_RESULT (*pf_cuGetErrorName)(GD_RESULT error, const char** str);
typedef GD_RESULT (*pf_cuGetErrorString)(GD_RESULT error, const char** str);

// ---- NVRTC (libnvrtc) ----
typedef GD_NVRTC_RESULT (*pf_nvrtcVersion)(int* major, int* minor);
typedef const char* (*pf_nvrtcGetErrorString)(GD_NVRTC_RESULT result);
typedef GD_NVRTC_RESULT (*pf_nvrtcCreateProgram)(GD_PROGRAM* prog, const char* src, const char* name, int numHeaders,
                                                 const char* const* headers, const char* const* includeNames);
typedef GD_NVRTC_RESULT (*pf_nvrtcCompileProgram)(GD_PROGRAM prog, int numOptions, const char* const* options);
typedef GD_NVRTC_RESULT (*pf_nvrtcDestroyProgram)(GD_PROGRAM* prog);
typedef GD_NVRTC_RESULT (*pf_nvrtcGetSize)(GD_PROGRAM prog, size_t* size); // log, PTX and CUBIN sizes
typedef GD_NVRTC_RESULT (*pf_nvrtcGetText)(GD_PROGRAM prog, char* out);    // log, PTX and CUBIN
// NVRTC 11.2 and later: the architectures --gpu-architecture accepts.
typedef GD_NVRTC_RESULT (*pf_nvrtcGetNumSupportedArchs)(int* numArchs);
typedef GD_NVRTC_RESULT (*pf_nvrtcGetSupportedArchs)(int* supportedArchs);

// ---- cuBLAS (libcublas) ----
typedef GD_BLAS_STATUS (*pf_cublasCreate_v2)(GD_BLAS* h);
typedef GD_BLAS_STATUS (*pf_cublasDestroy_v2)(GD_BLAS h);
typedef GD_BLAS_STATUS (*pf_cublasSetStream_v2)(GD_BLAS h, GD_T(cudaStream_t, handle) stream);
typedef GD_BLAS_STATUS (*pf_cublasSetMathMode)(GD_BLAS h, GD_T(cublasMath_t, int) mode);
typedef GD_BLAS_STATUS (*pf_cublasGetVersion_v2)(GD_BLAS h, int* version);
typedef GD_BLAS_STATUS (*pf_cublasGemmEx)(GD_BLAS h, GD_T(cublasOperation_t, int) transa,
                                          GD_T(cublasOperation_t, int) transb, int m, int n, int k,
                                          const void* alpha, const void* A, GD_T(cudaDataType, int) Atype, int lda,
                                          const void* B, GD_T(cudaDataType, int) Btype, int ldb, const void* beta,
                                          void* C, GD_T(cudaDataType, int) Ctype, int ldc,
                                          GD_T(cublasComputeType_t, int) computeType,
                                          GD_T(cublasGemmAlgo_t, int) algo);
typedef GD_BLAS_STATUS (*pf_cublasGemmStridedBatchedEx)(
    GD_BLAS h, GD_T(cublasOperation_t, int) transa, GD_T(cublasOperation_t, int) transb, int m, int n, int k,
    const void* alpha, const void* A, GD_T(cudaDataType, int) Atype, int lda, long long strideA, const void* B,
    GD_T(cudaDataType, int) Btype, int ldb, long long strideB, const void* beta, void* C, GD_T(cudaDataType, int) Ctype,
    int ldc, long long strideC, int batchCount, GD_T(cublasComputeType_t, int) computeType,
    GD_T(cublasGemmAlgo_t, int) algo);

// ---- NCCL (libnccl), and the driver's stream query its watchdog polls ----
typedef GD_RESULT (*pf_cuStreamQuery)(GD_STREAM stream);
typedef GD_NCCL_RESULT (*pf_ncclGetVersion)(int* version);
typedef GD_NCCL_RESULT (*pf_ncclGetUniqueId)(GD_NCCL_ID* uniqueId);
typedef GD_NCCL_RESULT (*pf_ncclCommInitRank)(GD_NCCL_COMM* comm, int nranks, GD_NCCL_ID commId, int rank);
typedef GD_NCCL_RESULT (*pf_ncclCommDestroy)(GD_NCCL_COMM comm); // also ncclCommAbort
typedef GD_NCCL_RESULT (*pf_ncclCommGetAsyncError)(GD_NCCL_COMM comm, GD_NCCL_RESULT* asyncError);
typedef const char* (*pf_ncclGetErrorString)(GD_NCCL_RESULT result);
typedef const char* (*pf_ncclGetLastError)(GD_NCCL_COMM comm);
typedef GD_NCCL_RESULT (*pf_ncclAllReduce)(const void* sendbuff, void* recvbuff, size_t count, GD_NCCL_TYPE datatype,
                                           GD_NCCL_OP op, GD_NCCL_COMM comm, GD_CUDART_STREAM stream);
typedef GD_NCCL_RESULT (*pf_ncclReduceScatter)(const void* sendbuff, void* recvbuff, size_t recvcount,
                                               GD_NCCL_TYPE datatype, GD_NCCL_OP op, GD_NCCL_COMM comm,
                                               GD_CUDART_STREAM stream);
typedef GD_NCCL_RESULT (*pf_ncclAllGather)(const void* sendbuff, void* recvbuff, size_t sendcount,
                                           GD_NCCL_TYPE datatype, GD_NCCL_COMM comm, GD_CUDART_STREAM stream);
typedef GD_NCCL_RESULT (*pf_ncclBroadcast)(const void* sendbuff, void* recvbuff, size_t count, GD_NCCL_TYPE datatype,
                                           int root, GD_NCCL_COMM comm, GD_CUDART_STREAM stream);

// ---- constants (checked against the headers by headers_test.go) ----
enum {
	GD_CUDA_ERROR_OUT_OF_MEMORY = 2,
	GD_CUDA_ERROR_NO_DEVICE = 100,
	GD_CU_STREAM_NON_BLOCKING = 1,
	GD_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	GD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	GD_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
	GD_CUBLAS_OP_N = 0,
	GD_CUBLAS_OP_T = 1,
	GD_CUBLAS_GEMM_DEFAULT = -1,
	GD_CUDA_R_32F = 0,
	GD_CUDA_R_16BF = 14,
	GD_CUBLAS_COMPUTE_32F = 68,
	GD_CUBLAS_COMPUTE_32F_FAST_16BF = 75,
	GD_CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
	GD_CUBLAS_STATUS_NOT_INITIALIZED = 1,
	GD_CUBLAS_STATUS_ALLOC_FAILED = 3,
	GD_CUBLAS_STATUS_INVALID_VALUE = 7,
	GD_CUBLAS_STATUS_ARCH_MISMATCH = 8,
	GD_CUBLAS_STATUS_MAPPING_ERROR = 11,
	GD_CUBLAS_STATUS_EXECUTION_FAILED = 13,
	GD_CUBLAS_STATUS_INTERNAL_ERROR = 14,
	GD_CUBLAS_STATUS_NOT_SUPPORTED = 15,
	GD_CUBLAS_STATUS_LICENSE_ERROR = 16,
	GD_CUDA_ERROR_NOT_READY = 600,
	GD_CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	GD_CU_MEM_ALLOCATION_TYPE_PINNED = 1,
	GD_CU_MEM_HANDLE_TYPE_NONE = 0,
	GD_CU_MEM_LOCATION_TYPE_DEVICE = 1,
	GD_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
	GD_CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
	GD_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
	GD_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
	GD_CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
	GD_NCCL_UNIQUE_ID_BYTES = 128,
	GD_ncclSuccess = 0,
	GD_ncclUnhandledCudaError = 1,
	GD_ncclSystemError = 2,
	GD_ncclInternalError = 3,
	GD_ncclInvalidArgument = 4,
	GD_ncclInvalidUsage = 5,
	GD_ncclRemoteError = 6,
	GD_ncclInProgress = 7,
	GD_ncclSum = 0,
	GD_ncclFloat32 = 7,
	GD_ncclBfloat16 = 9,
};

#endif
