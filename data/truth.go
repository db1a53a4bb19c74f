package data

// Ground truths: one function turns a dataset row's ground truth into the
// verifier's input, for the trainer (through ReadFile) and for
// `gdrotrain verify` alike, so a truth scores the same in both.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ErrNoGroundTruth is returned by GroundTruth for a missing (nil) truth.
var ErrNoGroundTruth = errors.New("no ground truth")

// GroundTruth turns a ground truth as decoded from a JSONL row (with
// json.Decoder.UseNumber) or a Parquet column into the string the verifier
// compares with, as the reference's preprocessors do (docs/algorithm.md §2.5): a string as
// it is; a number without a trailing ".0" (the source's float answers such as
// 27.0 are integers); a list as its first element; a bool as "true" or
// "false". With multipleChoice, an integer 0–3 is an option index and becomes
// its letter A–D, as gpqa_mc.py reads an int ground truth (docs/algorithm.md §3.4); a
// string "2" or a float 2.0 stays as it is. A nil truth is ErrNoGroundTruth.
func GroundTruth(v any, multipleChoice bool) (string, error) {
	if multipleChoice {
		if i, ok := integerValue(v); ok {
			if i >= 0 && i <= 3 {
				return string(rune('A' + i)), nil
			}
		}
	}
	switch x := v.(type) {
	case nil:
		return "", ErrNoGroundTruth
	case string:
		return x, nil
	case json.Number:
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1e15 {
			return strconv.FormatInt(int64(f), 10), nil
		}
		return x.String(), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10), nil
		}
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case float32:
		return GroundTruth(float64(x), false)
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int:
		return strconv.Itoa(x), nil
	case bool:
		return strconv.FormatBool(x), nil
	case []any:
		if len(x) == 0 {
			return "", errors.New("empty list")
		}
		if x[0] == nil {
			return "", errors.New("list starts with null")
		}
		return GroundTruth(x[0], multipleChoice)
	}
	return "", fmt.Errorf("unsupported type %T", v)
}

// integerValue returns an integer truth: a JSON number written without a
// fraction or exponent, or a Go integer (Parquet int columns).
func integerValue(v any) (int, bool) {
	switch x := v.(type) {
	case json.Number:
		i, err := strconv.Atoi(x.String())
		return i, err == nil
	case int64:
		return int(x), x == int64(int(x))
	case int32:
		return int(x), true
	case int:
		return x, true
	}
	return 0, false
}

// GPQASource is the data_source the reference scores with the GPQA letter
// scorer (reward.ReferenceMode's ModeGPQA; TestMultipleChoiceAgreesWithReward
// keeps the two in step). Named here, not asked of reward, so that data
// does not import reward (docs/architecture.md, the layers).
const GPQASource = "Idavidrein/gpqa"

// MultipleChoice reports a row whose integer ground truth is an option index
// (GroundTruth's multipleChoice): it has choices, or its data_source is the
// one the reference scores with the GPQA letter scorer.
func MultipleChoice(dataSource string, choices []string) bool {
	return len(choices) > 0 || dataSource == GPQASource
}
