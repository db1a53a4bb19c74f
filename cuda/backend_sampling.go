package cuda

// Device-side reductions of next-token logits for the sampler.

import (
	"fmt"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

// TopK returns each row's k largest logits (descending, ties by lower id)
// and their ids; the sampler's top-k and greedy paths download only these.
func (b *Backend) TopK(logits *model.Tensor, k int) ([][]int32, [][]float32) {
	p, ok := b.ptrs("topk", logits)
	if !ok {
		return nil, nil
	}
	R, V := model.Matrix(logits)
	if k < 1 || k > V {
		b.keep(fmt.Errorf("topk: k = %d for rows of %d", k, V))
		return nil, nil
	}
	ids, err := b.alloc(R * k)
	if !b.keep(err) {
		return nil, nil
	}
	defer b.free(ids)
	vals, err := b.alloc(R * k)
	if !b.keep(err) {
		return nil, nil
	}
	defer b.free(vals)
	b.launch("topk_rows", [3]int{R}, 256, ids.ptr, vals.ptr, p[0], int32(V), int32(k))
	hostIDs, hostVals := make([]int32, R*k), make([]float32, R*k)
	if R*k > 0 {
		b.keep(b.d.copyOut(unsafe.Pointer(&hostIDs[0]), ids.ptr, int64(R*k)*4))
		b.keep(b.d.copyOut(unsafe.Pointer(&hostVals[0]), vals.ptr, int64(R*k)*4))
	}
	outIDs, outVals := make([][]int32, R), make([][]float32, R)
	for r := range outIDs {
		outIDs[r], outVals[r] = hostIDs[r*k:(r+1)*k], hostVals[r*k:(r+1)*k]
	}
	return outIDs, outVals
}

// ChunkSums returns each row's max of logits/temperature and the float64
// sums of exp(logit/temperature − max) over consecutive chunks of ids.
func (b *Backend) ChunkSums(logits *model.Tensor, temperature float64, chunk int) ([]float64, [][]float64) {
	p, ok := b.ptrs("chunk sums", logits)
	if !ok {
		return nil, nil
	}
	R, V := model.Matrix(logits)
	if chunk < 1 || temperature <= 0 {
		b.keep(fmt.Errorf("chunk sums: chunk %d, temperature %g", chunk, temperature))
		return nil, nil
	}
	chunks := (V + chunk - 1) / chunk
	mx, err := b.allocBytes(R, 8)
	if !b.keep(err) {
		return nil, nil
	}
	defer b.free(mx)
	sums, err := b.allocBytes(R*chunks, 8)
	if !b.keep(err) {
		return nil, nil
	}
	defer b.free(sums)
	b.launch("chunk_sums", [3]int{R}, 256, mx.ptr, sums.ptr, p[0], int32(V), temperature, int32(chunk))
	hostMx, hostSums := make([]float64, R), make([]float64, R*chunks)
	if R > 0 {
		b.keep(b.d.copyOut(unsafe.Pointer(&hostMx[0]), mx.ptr, int64(R)*8))
		b.keep(b.d.copyOut(unsafe.Pointer(&hostSums[0]), sums.ptr, int64(R*chunks)*8))
	}
	out := make([][]float64, R)
	for r := range out {
		out[r] = hostSums[r*chunks : (r+1)*chunks]
	}
	return hostMx, out
}

var _ model.RowSampler = (*Backend)(nil)
