package cuda

// Exact mode (precision.exact_logprobs, docs/algorithm.md §5.10): every op
// on the path from a token to its log-probability computes a row with the
// same order and roundings whatever rows share the op, so a cached decode
// step's logits equal a training forward's bit for bit. The products and
// attention take their batch-invariant kernels when b.exact is set.

import "github.com/gdrotrain/gdrotrain/model"

// SetBatchInvariant turns exact mode on or off (model.BatchInvariant).
func (b *Backend) SetBatchInvariant(on bool) { b.exact = on }

// IsBatchInvariant reports whether exact mode is on (model.BatchInvariant).
func (b *Backend) IsBatchInvariant() bool { return b.exact }

var _ model.BatchInvariant = (*Backend)(nil)
