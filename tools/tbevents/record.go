package tbevents

// TFRecord framing, as TensorFlow's record writer lays out each record
// (tensorflow/core/lib/io/record_writer.h):
//
//	uint64 length            (little endian)
//	uint32 masked CRC-32C of the 8 length bytes
//	byte   data[length]      (here: one serialized Event)
//	uint32 masked CRC-32C of data
//
// The mask, from crc32c.h: rotate right by 15 bits and add 0xa282ead8, so
// that a CRC stored inside CRC'd data does not make the outer CRC trivial.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const maskDelta = 0xa282ead8

// MaskedCRC is the masked CRC-32C of b.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + maskDelta
}

// AppendRecord appends data framed as one TFRecord to dst.
func AppendRecord(dst, data []byte) []byte {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], MaskedCRC(head[:8]))
	dst = append(dst, head[:]...)
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, MaskedCRC(data))
}

// ErrTorn is returned by ReadRecords for a file that ends inside a record
// (a writer killed mid-write): the records before it are good.
var ErrTorn = errors.New("event file ends inside a record")

// maxRecord bounds a record's length, so a corrupt length field is an
// error rather than a huge allocation. Our events are a few kilobytes.
const maxRecord = 1 << 30

// ReadRecords returns the data of every record in r, checking both CRCs of
// each. It stops at the first bad record and returns the good ones before
// it with the error (ErrTorn for a truncated tail).
func ReadRecords(r io.Reader) ([][]byte, error) {
	br := bufio.NewReader(r)
	var out [][]byte
	for i := 0; ; i++ {
		var head [12]byte
		n, err := io.ReadFull(br, head[:])
		if err == io.EOF && n == 0 {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("record %d: %w", i, ErrTorn)
		}
		if got, want := binary.LittleEndian.Uint32(head[8:]), MaskedCRC(head[:8]); got != want {
			return out, fmt.Errorf("record %d: length CRC %08x, want %08x", i, got, want)
		}
		size := binary.LittleEndian.Uint64(head[:8])
		if size > maxRecord {
			return out, fmt.Errorf("record %d: length %d is implausible", i, size)
		}
		data := make([]byte, size+4)
		if _, err := io.ReadFull(br, data); err != nil {
			return out, fmt.Errorf("record %d: %w", i, ErrTorn)
		}
		data, tail := data[:size], data[size:]
		if got, want := binary.LittleEndian.Uint32(tail), MaskedCRC(data); got != want {
			return out, fmt.Errorf("record %d: data CRC %08x, want %08x", i, got, want)
		}
		out = append(out, data)
	}
}
