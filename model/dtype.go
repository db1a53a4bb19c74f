package model

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DType names a safetensors storage dtype. Computation is always float32 on
// the CPU; these only say how bytes on disk map to float32 values.
type DType string

const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
)

// Size is the byte width of one element.
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case F16, BF16:
		return 2
	}
	return 0
}

// ParseDType maps safetensors dtype strings and transformers' torch dtype
// names ("bfloat16") to a DType.
func ParseDType(s string) (DType, error) {
	switch s {
	case "F32", "float32", "fp32":
		return F32, nil
	case "F16", "float16", "fp16":
		return F16, nil
	case "BF16", "bfloat16", "bf16":
		return BF16, nil
	}
	return "", fmt.Errorf("unsupported dtype %q (supported: F32, F16, BF16)", s)
}

// TorchName is the dtype name transformers writes in config.json.
func (d DType) TorchName() string {
	switch d {
	case F16:
		return "float16"
	case BF16:
		return "bfloat16"
	}
	return "float32"
}

// decodeFloats converts little-endian raw bytes of dtype d into float32.
func decodeFloats(d DType, raw []byte, out []float32) {
	switch d {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case F16:
		for i := range out {
			out[i] = F16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	}
}

// encodeFloats converts float32 values to little-endian bytes of dtype d.
func encodeFloats(d DType, in []float32, raw []byte) {
	switch d {
	case F32:
		for i, v := range in {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
	case BF16:
		for i, v := range in {
			binary.LittleEndian.PutUint16(raw[2*i:], F32ToBF16(v))
		}
	case F16:
		for i, v := range in {
			binary.LittleEndian.PutUint16(raw[2*i:], F32ToF16(v))
		}
	}
}

// BF16ToF32 widens a bfloat16 bit pattern exactly.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds to nearest even, as torch's .to(torch.bfloat16) does; NaN
// stays NaN (quiet) instead of rounding into Inf.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToF32 widens an IEEE half bit pattern exactly, subnormals included.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: value = man · 2^-24
		f := float32(man) * float32(1.0/16777216.0)
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// F32ToF16 rounds to nearest even with overflow to Inf and gradual underflow.
func F32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	abs := u & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00
	case abs >= 0x477ff000: // rounds to ≥ 65520: Inf
		return sign | 0x7c00
	case abs < 0x38800000: // below the smallest normal half (2^-14): subnormal or zero
		// value·2^24 rounded to nearest even gives the subnormal mantissa.
		v := float64(math.Float32frombits(abs)) * 16777216.0
		return sign | uint16(math.RoundToEven(v))
	}
	// Normal: rebias exponent (127 → 15) and round the 13 dropped bits.
	h := abs - 0x38000000
	h += 0xfff + (h>>13)&1
	return sign | uint16(h>>13)
}
