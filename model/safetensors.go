package model

// Safetensors reading and writing.
//
// Format: an 8-byte little-endian header length N, N bytes of JSON mapping
// tensor names to {dtype, shape, data_offsets:[begin,end]} (offsets relative to
// the byte after the header), an optional "__metadata__" string map, then the
// data. The reader is strict: the header length is bounded by the file size
// before anything is allocated, every dtype must be one we decode, every
// offset pair must lie inside the data, match numel × dtype size and not
// overlap another tensor. Tensor bytes are read through io.SectionReader, so a
// shard is never loaded whole.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/gdrotrain/gdrotrain/internal/atomicfile"
)

// maxHeaderBytes bounds the JSON header; real checkpoints use well under 1 MiB.
const maxHeaderBytes = 100 << 20

// TensorInfo describes one tensor inside a safetensors file.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
	Begin int64 // byte offset of the data, relative to the data section
	End   int64
}

// Numel is the number of elements.
func (t TensorInfo) Numel() int { return numel(t.Shape) }

// SafetensorsFile is an open, validated safetensors file.
type SafetensorsFile struct {
	Path     string
	Metadata map[string]string
	Tensors  map[string]TensorInfo
	file     *os.File
	data     *io.SectionReader
}

type rawTensorHeader struct {
	DType       string  `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// OpenSafetensors opens and validates the header of a safetensors file.
func OpenSafetensors(path string) (*SafetensorsFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open safetensors: %w", err)
	}
	st, err := parseSafetensors(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return st, nil
}

func parseSafetensors(f *os.File, path string) (*SafetensorsFile, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	size := info.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: file is %d bytes, too short for a safetensors header (truncated?)", path, size)
	}
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("%s: read header length: %w", path, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > uint64(size-8) {
		return nil, fmt.Errorf("%s: header length %d exceeds the file size %d (truncated or not a safetensors file)", path, n, size)
	}
	if n > maxHeaderBytes {
		return nil, fmt.Errorf("%s: header length %d exceeds the %d-byte limit", path, n, maxHeaderBytes)
	}
	header := make([]byte, n)
	if _, err := io.ReadFull(f, header); err != nil {
		return nil, fmt.Errorf("%s: read header: %w", path, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return nil, fmt.Errorf("%s: header is not valid JSON: %w", path, err)
	}
	dataLen := size - 8 - int64(n)
	st := &SafetensorsFile{
		Path:    path,
		Tensors: make(map[string]TensorInfo, len(raw)),
		file:    f,
		data:    io.NewSectionReader(f, 8+int64(n), dataLen),
	}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &st.Metadata); err != nil {
				return nil, fmt.Errorf("%s: __metadata__ must map strings to strings: %w", path, err)
			}
			continue
		}
		ti, err := parseTensorHeader(name, msg, dataLen)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		st.Tensors[name] = ti
	}
	if err := checkOverlap(st.Tensors); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

func parseTensorHeader(name string, msg json.RawMessage, dataLen int64) (TensorInfo, error) {
	var h rawTensorHeader
	if err := json.Unmarshal(msg, &h); err != nil {
		return TensorInfo{}, fmt.Errorf("tensor %q: bad header entry: %w", name, err)
	}
	dt, err := ParseDType(h.DType)
	if err != nil || h.DType != string(dt) {
		return TensorInfo{}, fmt.Errorf("tensor %q: unsupported dtype %q (supported: F32, F16, BF16)", name, h.DType)
	}
	if len(h.DataOffsets) != 2 {
		return TensorInfo{}, fmt.Errorf("tensor %q: data_offsets must have 2 entries, got %d", name, len(h.DataOffsets))
	}
	for _, d := range h.Shape {
		if d < 0 {
			return TensorInfo{}, fmt.Errorf("tensor %q: negative dimension in shape %v", name, h.Shape)
		}
	}
	ti := TensorInfo{Name: name, DType: dt, Shape: h.Shape, Begin: h.DataOffsets[0], End: h.DataOffsets[1]}
	if ti.Begin < 0 || ti.End < ti.Begin || ti.End > dataLen {
		return TensorInfo{}, fmt.Errorf("tensor %q: data_offsets [%d, %d] outside the %d data bytes (truncated file?)", name, ti.Begin, ti.End, dataLen)
	}
	if want := int64(ti.Numel()) * int64(dt.Size()); ti.End-ti.Begin != want {
		return TensorInfo{}, fmt.Errorf("tensor %q: data_offsets span %d bytes but shape %v × %s needs %d", name, ti.End-ti.Begin, h.Shape, dt, want)
	}
	return ti, nil
}

func checkOverlap(tensors map[string]TensorInfo) error {
	list := make([]TensorInfo, 0, len(tensors))
	for _, t := range tensors {
		if t.End > t.Begin {
			list = append(list, t)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Begin < list[j].Begin })
	for i := 1; i < len(list); i++ {
		if list[i].Begin < list[i-1].End {
			return fmt.Errorf("tensors %q [%d, %d] and %q [%d, %d] overlap", list[i-1].Name, list[i-1].Begin, list[i-1].End, list[i].Name, list[i].Begin, list[i].End)
		}
	}
	return nil
}

// Close releases the file.
func (s *SafetensorsFile) Close() error { return s.file.Close() }

// ReadFloat32 reads tensor name into dst (len numel), converting to float32.
func (s *SafetensorsFile) ReadFloat32(name string, dst []float32) error {
	ti, ok := s.Tensors[name]
	if !ok {
		return fmt.Errorf("%s: no tensor %q", s.Path, name)
	}
	if len(dst) != ti.Numel() {
		return fmt.Errorf("%s: tensor %q has %d elements, destination has %d", s.Path, name, ti.Numel(), len(dst))
	}
	raw := make([]byte, ti.End-ti.Begin)
	if _, err := s.data.ReadAt(raw, ti.Begin); err != nil {
		return fmt.Errorf("%s: read tensor %q: %w", s.Path, name, err)
	}
	decodeFloats(ti.DType, raw, dst)
	return nil
}

// NamedTensor is a float32 tensor to be written under a name.
type NamedTensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// WriteSafetensors writes tensors (sorted by name, as the reference writer
// does) converted to dtype, atomically: a temporary file in the same folder
// is synced and renamed over path.
func WriteSafetensors(path string, tensors []NamedTensor, dtype DType, metadata map[string]string) error {
	sorted := append([]NamedTensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	header := make(map[string]any, len(sorted)+1)
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off int64
	for _, t := range sorted {
		if numel(t.Shape) != len(t.Data) {
			return fmt.Errorf("write %s: tensor %q has shape %v but %d values", path, t.Name, t.Shape, len(t.Data))
		}
		if _, dup := header[t.Name]; dup {
			return fmt.Errorf("write %s: duplicate tensor name %q", path, t.Name)
		}
		n := int64(len(t.Data) * dtype.Size())
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = rawTensorHeader{DType: string(dtype), Shape: shape, DataOffsets: []int64{off, off + n}}
		off += n
	}
	hdr, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	for len(hdr)%8 != 0 { // align the data section to 8 bytes, padding with spaces as the format allows
		hdr = append(hdr, ' ')
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		var lenBuf [8]byte
		binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
		if _, err := w.Write(lenBuf[:]); err != nil {
			return err
		}
		if _, err := w.Write(hdr); err != nil {
			return err
		}
		for _, t := range sorted {
			buf := make([]byte, len(t.Data)*dtype.Size())
			encodeFloats(dtype, t.Data, buf)
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
}

// WriteFileAtomic writes data to path through a temporary file and rename.
func WriteFileAtomic(path string, data []byte) error {
	return atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(data); return err })
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
