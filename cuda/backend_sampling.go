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
	// The maxima, then the sums, in one buffer and one download.
	buf, err := b.allocBytes(R*(1+chunks), 8)
	if !b.keep(err) {
		return nil, nil
	}
	defer b.free(buf)
	b.launch("chunk_sums", [3]int{R}, 256, buf.ptr, buf.ptr+uint64(8*R), p[0], int32(V), temperature, int32(chunk))
	host := make([]float64, R*(1+chunks))
	if R > 0 {
		b.keep(b.d.copyOut(unsafe.Pointer(&host[0]), buf.ptr, int64(len(host))*8))
	}
	out := make([][]float64, R)
	for r := range out {
		out[r] = host[R+r*chunks : R+(r+1)*chunks]
	}
	return host[:R], out
}

// Chunks gathers each requested chunk of logits on the device and brings
// them all back in one download.
func (b *Backend) Chunks(logits *model.Tensor, rows, chunks []int32, chunk int) [][]float32 {
	p, ok := b.ptrs("chunks", logits)
	if !ok {
		return nil
	}
	R, V := model.Matrix(logits)
	if len(rows) != len(chunks) || chunk < 1 {
		b.keep(fmt.Errorf("chunks: %d rows, %d chunks of %d", len(rows), len(chunks), chunk))
		return nil
	}
	for k := range rows {
		if rows[k] < 0 || int(rows[k]) >= R || chunks[k] < 0 || int(chunks[k])*chunk >= V {
			b.keep(fmt.Errorf("chunks: request %d (row %d, chunk %d) outside logits (%d, %d)", k, rows[k], chunks[k], R, V))
			return nil
		}
	}
	K := len(rows)
	if K == 0 {
		return nil
	}
	dst, err := b.alloc(K * chunk)
	if !b.keep(err) {
		return nil
	}
	defer b.free(dst)
	addr, ok := b.upload("chunks", rows, chunks)
	if !ok {
		return nil
	}
	b.kernelCost(0, 8*K*chunk)
	b.launch("gather_chunks", [3]int{K}, 256, dst.ptr, p[0], addr[0], addr[1], int32(V), int32(chunk))
	host := make([]float32, K*chunk)
	if !b.keep(b.d.copyOut(unsafe.Pointer(&host[0]), dst.ptr, int64(len(host))*4)) {
		return nil
	}
	out := make([][]float32, K)
	for k := range out {
		lo := int(chunks[k]) * chunk
		out[k] = host[k*chunk : k*chunk+min(chunk, V-lo)]
	}
	return out
}

var _ model.DeviceSampler = (*Backend)(nil)

// DeviceSamples reports whether SampleTokens supports p: greedy, unfiltered,
// or top-k (with or without top-p); top-p alone would need a sort of the
// whole vocabulary.
func (b *Backend) DeviceSamples(p model.SampleParams) bool {
	return p.Temperature == 0 || p.TopP >= 1 || p.TopK > 0
}

// SampleTokens draws each row's token on the device (model.DeviceSampler):
// sample_rows for greedy and unfiltered draws, topk_rows then sample_topk
// for top-k and top-p.
func (b *Backend) SampleTokens(out, logits *model.Tensor, draws []model.Draw, p model.SampleParams) {
	ps, ok := b.ptrs("sample tokens", out, logits)
	if !ok {
		return
	}
	R, V := model.Matrix(logits)
	if out.Numel() != 2*R || len(draws) != R || !b.DeviceSamples(p) || p.Temperature < 0 || V == 0 {
		b.keep(fmt.Errorf("sample tokens: out %v, logits %v, %d draws, %+v", out.Shape, logits.Shape, len(draws), p))
		return
	}
	if R == 0 {
		return
	}
	tab := make([]int32, 4*R)
	for r, d := range draws {
		tab[4*r], tab[4*r+1] = int32(uint32(d.Key)), int32(uint32(d.Key>>32))
		tab[4*r+2], tab[4*r+3] = int32(uint32(d.Counter)), int32(uint32(d.Counter>>32))
	}
	addr, ok := b.upload("draws", tab)
	if !ok {
		return
	}
	if p.Temperature == 0 || (p.TopP >= 1 && (p.TopK == 0 || p.TopK >= V)) {
		b.kernelCost(3*R*V, 8*R*V) // the row read twice (max, sums), a range once more
		b.launch("sample_rows", [3]int{R}, 256, ps[0], ps[1], addr[0], int32(V), p.Temperature)
		return
	}
	k := min(p.TopK, V)
	ids, err := b.alloc(R * k)
	if !b.keep(err) {
		return
	}
	defer b.free(ids)
	vals, err := b.alloc(R * k)
	if !b.keep(err) {
		return
	}
	defer b.free(vals)
	b.kernelCost(R*V*k, 4*R*V*k)
	b.launch("topk_rows", [3]int{R}, 256, ids.ptr, vals.ptr, ps[1], int32(V), int32(k))
	b.launch("sample_topk", [3]int{(R + 127) / 128}, 128, ps[0], ids.ptr, vals.ptr, addr[0], int32(R), int32(k), p.Temperature, p.TopP)
}
