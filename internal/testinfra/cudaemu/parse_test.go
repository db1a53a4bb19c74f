package cudaemu

import (
	"reflect"
	"testing"
)

func TestFindKernels(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // qualified names
	}{
		{"simple", `extern "C" __global__ void add(const float* __restrict__ a, float* b, int n) { b[0] = a[0]; }`, []string{"add"}},
		{"multiline and launch bounds", `
extern "C" __global__ void __launch_bounds__(256, 2)
k1(const float* a,
   unsigned short* b,
   long long n, size_t m)
{
	if (n) { b[0] = 1; }
}
extern "C" __launch_bounds__(128) __global__ void k2(float* x) {}
extern "C"
__global__
void
k3 ( int x ) { }`, []string{"k1", "k2", "k3"}},
		{"extern C block and namespaces", `
namespace a { namespace b {
extern "C" {
__global__ void inner(int* x) { x[0] = 0; }
struct S { __device__ void f(); };
}
} }
namespace c::d { extern "C" __global__ void deep() {} }
namespace { extern "C" __global__ void anon() {} }`, []string{"a::b::inner", "c::d::deep", "anon"}},
		{"not kernels", `
__global__ void mangled(int* x) {}
extern "C" __global__ void decl(int* x);
template <typename T> __global__ void tmpl(T* x) {}
extern "C" __device__ void helper(int* x) {}
struct K { extern "C" __global__ void inside(); };
// extern "C" __global__ void commented(int* x) {}
/* extern "C" __global__ void block_commented() {} */
#define K(name) extern "C" __global__ void name() {}
const char* s = "extern \"C\" __global__ void in_string() {}";
extern "C" __global__ void decl(int* x) { x[0] = 1; }`, []string{"decl"}},
		{"body with braces and lambdas", `
extern "C" __global__ void outer(int* x) {
	auto f = [&](int i) { return i + 1; };
	for (int i = 0; i < 3; i++) { x[i] = f(i); }
	{ __global__ void* p; }
}
extern "C" __global__ void after() {}`, []string{"outer", "after"}},
		{"attributes and defaults", `
extern "C" __global__ void __attribute__((noinline)) [[maybe_unused]] attr(float* __restrict__ x) {}
extern "C" __global__ void arr(float x[], const int n) {}`, []string{"attr", "arr"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ks, err := findKernels(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range ks {
				got = append(got, k.Qualified())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFindKernelsErrors(t *testing.T) {
	for _, src := range []string{
		`extern "C" __global__ void k(int* x) {`,
		`extern "C" __global__ void k(int* x }`,
		`/* unterminated`,
		`extern "C" __global__ (int* x) {}`,
	} {
		if _, err := findKernels(src); err == nil {
			t.Errorf("no error for %q", src)
		}
	}
}
