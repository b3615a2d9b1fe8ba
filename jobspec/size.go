package jobspec

import (
	"errors"
	"math"
	"math/big"
	"strings"
)

// sizeUnits are the multipliers ParseSize knows: SI units are powers of
// 1000, IEC units (with "i") powers of 1024. Lookups are lower case.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1e6, "mb": 1e6, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1e9, "gb": 1e9, "gi": 1 << 30, "gib": 1 << 30,
	"t": 1e12, "tb": 1e12, "ti": 1 << 40, "tib": 1 << 40,
	"p": 1e15, "pb": 1e15, "pi": 1 << 50, "pib": 1 << 50,
	"e": 1e18, "eb": 1e18, "ei": 1 << 60, "eib": 1 << 60,
}

// ParseSize parses a size in bytes: a number, optionally with a fraction,
// then an optional unit, e.g. "1024", "500MB", "10GiB", "1.5 TiB". Units
// are case-insensitive; "MB" is 10^6 bytes and "MiB" 2^20. The result
// must be a whole number of bytes that fits an int64.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	if num == "" || num == "." || strings.Count(num, ".") > 1 {
		return 0, errors.New("want a number, then an optional unit")
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, errors.New("unknown unit: want B, KB, KiB, MB, MiB, GB, GiB, TB, TiB, PB, PiB, EB or EiB")
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, errors.New("want a number, then an optional unit")
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, errors.New("want a whole number of bytes")
	}
	n := r.Num()
	if !n.IsInt64() || n.Int64() > math.MaxInt64 {
		return 0, errors.New("size is too large")
	}
	return n.Int64(), nil
}
