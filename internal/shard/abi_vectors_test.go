package shard

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math"
)

// The shards libshoal wrote on each instruction set (lib/tests/abi_shard.c, through
// scripts/abi-shards.sh): job abi-<isa>, epoch 1, rank 0 of 1, one plain region of 3
// elements of every datatype code, its id the code. Their bytes are stated here from
// the values the program stores, independently of it: integers 1, -2 and 100, logicals
// 1, 0, 1, reals 1.5, -2.25 and 1024, complex numbers 1.5-2.25i, 1024+0.5i and -1+3i.

// abiCategory is how a datatype code's values are laid out: a signed or unsigned
// integer, a logical, a real or a complex of elemSize bytes (both parts).
type abiType struct {
	code     uint16
	elemSize uint32
	cat      byte // 'i' integer, 'b' logical, 'r' real, 'c' complex
}

var abiTypes = []abiType{
	{1, 1, 'i'}, {2, 1, 'i'}, {3, 1, 'i'}, {4, 1, 'i'}, {5, 2, 'i'}, {6, 2, 'i'}, {7, 4, 'i'},
	{8, 4, 'i'}, {9, 8, 'i'}, {10, 8, 'i'}, {11, 8, 'i'}, {12, 8, 'i'}, {13, 4, 'r'},
	{14, 8, 'r'}, {15, 16, 'r'}, {16, 4, 'i'}, {17, 1, 'b'}, {18, 1, 'i'}, {19, 2, 'i'},
	{20, 4, 'i'}, {21, 8, 'i'}, {22, 1, 'i'}, {23, 2, 'i'}, {24, 4, 'i'}, {25, 8, 'i'},
	{26, 8, 'c'}, {27, 16, 'c'}, {28, 32, 'c'}, {29, 8, 'i'}, {30, 8, 'i'}, {31, 8, 'i'},
	{32, 4, 'i'}, {33, 4, 'r'}, {34, 8, 'r'}, {35, 8, 'c'}, {36, 16, 'c'}, {37, 4, 'b'},
	{38, 1, 'i'}, {39, 1, 'i'}, {40, 2, 'i'}, {41, 4, 'i'}, {42, 8, 'i'}, {43, 4, 'r'},
	{44, 8, 'r'}, {45, 8, 'c'}, {46, 16, 'c'},
}

// longDouble lays out v, a normal float64, as a 16-byte long double of isa: x87's
// 80-bit extended format (64-bit significand with its integer bit, 15-bit exponent,
// 6 bytes of padding, 0 as the program leaves them) on amd64, IEEE binary128 on arm64.
func longDouble(isa string, v float64) []byte {
	bits := math.Float64bits(v)
	sign, exp, frac := bits>>63, (bits>>52)&0x7ff, bits&(1<<52-1)
	e := exp - 1023 + 16383
	b := make([]byte, 16)
	le := binary.LittleEndian
	if isa == "amd64" {
		le.PutUint64(b, 1<<63|frac<<11)
		le.PutUint16(b[8:], uint16(sign<<15|e))
	} else {
		le.PutUint64(b, frac<<60)
		le.PutUint64(b[8:], sign<<63|e<<48|frac>>4)
	}
	return b
}

func realBytes(isa string, size uint32, v float64) []byte {
	le := binary.LittleEndian
	switch size {
	case 4:
		return le.AppendUint32(nil, math.Float32bits(float32(v)))
	case 8:
		return le.AppendUint64(nil, math.Float64bits(v))
	}
	return longDouble(isa, v)
}

func abiPayload(isa string, t abiType) []byte {
	ints := []int64{1, -2, 100}
	bools := []int64{1, 0, 1}
	reals := []float64{1.5, -2.25, 1024}
	cplx := [][2]float64{{1.5, -2.25}, {1024, 0.5}, {-1, 3}}
	var b []byte
	for i := 0; i < 3; i++ {
		switch t.cat {
		case 'i', 'b':
			v := ints[i]
			if t.cat == 'b' {
				v = bools[i]
			}
			b = append(b, binary.LittleEndian.AppendUint64(nil, uint64(v))[:t.elemSize]...)
		case 'r':
			b = append(b, realBytes(isa, t.elemSize, reals[i])...)
		case 'c':
			b = append(b, realBytes(isa, t.elemSize/2, cplx[i][0])...)
			b = append(b, realBytes(isa, t.elemSize/2, cplx[i][1])...)
		}
	}
	return b
}

// abiShard is what the shard written on isa holds, created_ns aside.
func abiShard(isa string) rawShard {
	r := rawShard{magic: Magic, version: 3, hdrSize: HeaderSize, epoch: 1, rank: 0, nranks: 1,
		nregions: -1, job: "abi-" + isa, isa: ISAAMD64, longDouble: LongDoubleX87}
	if isa == "arm64" {
		r.isa, r.longDouble = ISAARM64, LongDoubleBinary128
	}
	for _, t := range abiTypes {
		r.regions = append(r.regions, vectorRegion{ID: int32(t.code), ElemSize: t.elemSize, Count: 3,
			Kind: "plain", Datatype: t.code, PayloadHex: hex.EncodeToString(abiPayload(isa, t))})
	}
	return r
}

// writtenAsDefined reports whether a machine-written shard is its definition but
// for created_ns and the checksum, which the writer's clock decides.
func writtenAsDefined(written, defined []byte) bool {
	if len(written) != len(defined) || len(written) < HeaderSize+TrailerSize {
		return false
	}
	n := len(written) - TrailerSize
	return bytes.Equal(written[:112], defined[:112]) && bytes.Equal(written[120:n], defined[120:n])
}
