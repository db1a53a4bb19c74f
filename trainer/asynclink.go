package trainer

// The weights' device link to the generation ranks (Dist.NewWeightLink;
// cuda.WeightLink over NCCL, docs/data-parallel.md "Generation ranks").
// Without one (the CPU backend) the weights travel in the rollout
// exchange through the control plane as float32 (async.go). With one, the
// rollout exchange carries the version and hash only, and right after it
// training rank 0 broadcasts the weights on the device: the trainable
// parameters (a LoRA run's adapters alone) in model.Params.Named order,
// each as the generation ranks' products read it — bf16 for every matrix
// but the input embedding under bf16 products (optim.MasterSharded's
// rule), float32 otherwise. A generation rank under bf16 products holds
// those matrices as bf16 storage alone (model.HalfPrecision), which is all
// its products read; its embedding and norms stay float32, their bf16
// copies refreshed after every write.
//
// The hash is SHA-256 of the payload, the bytes as they travel: training
// rank 0 reads them back from its device to hash them (and keeps them for a
// checkpoint of rollouts in flight), each generation rank reads back what
// it received and hashes it, so the check covers the transfer end to end.
// It costs a device-to-host copy of the payload on both sides and SHA-256
// on the host (about 2 GB/s).

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
)

// WeightLink carries the weights from training rank 0 to the generation
// ranks on their devices (cuda.WeightLink: an NCCL communicator of their
// own). Tensors travel as bf16 where half[i], else float32.
type WeightLink interface {
	// HalfProducts reports whether products read bf16 weights (matrices
	// then travel as bf16).
	HalfProducts() bool
	// Payload reads ts as they travel: little-endian bf16 or float32, in
	// order.
	Payload(ts []*model.Tensor, half []bool) ([]byte, error)
	// Send broadcasts ts's payload (training rank 0): from ts, or from a
	// payload read earlier when from is not nil.
	Send(ts []*model.Tensor, half []bool, from []byte) error
	// Receive writes the broadcast into ts (a generation rank); the half
	// ones are bf16-only weights.
	Receive(ts []*model.Tensor, half []bool) error
	Close() error
}

// linkTensors are the tensors a sync sends (m's trainable parameters in
// Named order) and which of them travel as bf16.
func linkTensors(m *model.Model, halfProducts bool) ([]*model.Tensor, []bool) {
	named := m.Trainable().Named(m.Cfg)
	ts, half := make([]*model.Tensor, len(named)), make([]bool, len(named))
	for i, np := range named {
		ts[i], half[i] = *np.Ptr, halfProducts && optim.MasterSharded(np)
	}
	return ts, half
}

// payloadSize is the bytes of ts's payload.
func payloadSize(ts []*model.Tensor, half []bool) int {
	n := 0
	for i, t := range ts {
		w := 4
		if half[i] {
			w = 2
		}
		n += w * t.Numel()
	}
	return n
}

// holdHalf makes m's trainable matrices that travel as bf16 bf16-only
// weights (a generation rank under bf16 products), with the fused storages
// they are views of, so the rank holds them as its products read them and
// the link writes them in place.
func holdHalf(m *model.Model) error {
	hw := model.TrainerCapsOf(m.B).Half
	if hw == nil {
		return fmt.Errorf("backend %s cannot hold bf16-only weights", m.B.Name())
	}
	p := m.Trainable()
	var fused []*model.Tensor
	if p.LoRA != nil {
		for i := range p.Adapters {
			fused = append(fused, p.Adapters[i].QKVA, p.Adapters[i].GateUpA)
		}
	} else {
		for i := range p.Layers {
			fused = append(fused, p.Layers[i].QKV, p.Layers[i].GateUp)
		}
	}
	for _, t := range fused {
		if t == nil {
			continue
		}
		if err := hw.HalfOnly(t, 0); err != nil {
			return fmt.Errorf("bf16-only weight %v: %w", t.Shape, err)
		}
	}
	ts, half := linkTensors(m, true)
	named := p.Named(m.Cfg)
	for i, t := range ts {
		if !half[i] {
			continue
		}
		if err := hw.HalfOnly(t, 0); err != nil {
			return fmt.Errorf("bf16-only weight %s: %w", named[i].Name, err)
		}
	}
	return nil
}

// sendWeights broadcasts the weights of version v over the link (training
// rank 0, right after the exchange that announced them): from the policy
// when it holds v, else from the payload kept (a checkpoint's).
func (a *asyncState) sendWeights(v int, during bool) error {
	t := a.t
	held := t.step
	if during {
		held--
	}
	if a.bytesVersion != v {
		return fmt.Errorf("step %d: the weights of version %d to send are not at hand (version %d kept)", t.step, v, a.bytesVersion)
	}
	var from []byte
	if v != held {
		from = a.bytes
	}
	ts, half := linkTensors(t.Policy, a.link.HalfProducts())
	if err := a.link.Send(ts, half, from); err != nil {
		return fmt.Errorf("step %d: send the weights of version %d to the generation ranks: %w", t.step, v, err)
	}
	return nil
}
