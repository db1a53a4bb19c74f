package model

// Optimizer moments on disk. One process writes optimizer.safetensors, the
// moments laid out like the parameters ("m/<name>", "v/<name>"). Under
// ZeRO-1 each rank writes its own file, optimizer-rank-RRRRR-of-WWWWW,
// holding the slices it owns ("m/<name>" of hi−lo elements) and, in the
// metadata, every slice's range and parameter size. Reading takes either
// form and serves any range of any parameter, so a checkpoint resumes at
// any world size (OpenMoments + Optimizer.LoadMoments).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// MomentsFile is the one-process moments file's name.
const MomentsFile = "optimizer.safetensors"

// MomentShardFile is rank's moments file under ZeRO-1 over world ranks.
func MomentShardFile(rank, world int) string {
	return fmt.Sprintf("optimizer-rank-%05d-of-%05d.safetensors", rank, world)
}

// WriteMomentShard writes rank s.Rank's slices into dir.
func WriteMomentShard(dir string, slices MomentSlices, s Shard) error {
	ranges := map[string][3]int{}
	var ts []NamedTensor
	for _, sl := range slices {
		ranges[sl.Name] = [3]int{sl.Lo, sl.Hi, sl.Numel}
		if sl.Hi == sl.Lo {
			continue
		}
		ts = append(ts, NamedTensor{Name: "m/" + sl.Name, Shape: []int{sl.Hi - sl.Lo}, Data: sl.M},
			NamedTensor{Name: "v/" + sl.Name, Shape: []int{sl.Hi - sl.Lo}, Data: sl.V})
	}
	raw, err := json.Marshal(ranges)
	if err != nil {
		return err
	}
	meta := map[string]string{"content": "adamw moments, ZeRO-1 shard", "rank": fmt.Sprint(s.Rank), "world": fmt.Sprint(s.World), "ranges": string(raw)}
	return WriteSafetensors(filepath.Join(dir, MomentShardFile(s.Rank, s.World)), ts, F32, meta)
}

// MomentFiles reads the moments of a checkpoint folder, whichever way they
// were written.
type MomentFiles struct {
	files  []*SafetensorsFile
	ranges []map[string][3]int // per file: name → lo, hi, numel
}

// OpenMoments opens dir's moments: optimizer.safetensors, or the complete
// set of one world size's shard files.
func OpenMoments(dir string) (*MomentFiles, error) {
	if _, err := os.Stat(filepath.Join(dir, MomentsFile)); err == nil {
		f, err := OpenSafetensors(filepath.Join(dir, MomentsFile))
		if err != nil {
			return nil, err
		}
		r := map[string][3]int{}
		for name, ti := range f.Tensors {
			if len(name) > 2 && name[:2] == "m/" {
				r[name[2:]] = [3]int{0, ti.Numel(), ti.Numel()}
			}
		}
		return &MomentFiles{files: []*SafetensorsFile{f}, ranges: []map[string][3]int{r}}, nil
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "optimizer-rank-*-of-*.safetensors"))
	sort.Strings(paths)
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no %s and no optimizer-rank-*-of-*.safetensors", dir, MomentsFile)
	}
	mf := &MomentFiles{}
	var world int
	if _, err := fmt.Sscanf(filepath.Base(paths[0]), "optimizer-rank-%05d-of-%05d.safetensors", new(int), &world); err != nil {
		return nil, fmt.Errorf("%s: %w", paths[0], err)
	}
	for r := 0; r < world; r++ {
		path := filepath.Join(dir, MomentShardFile(r, world))
		f, err := OpenSafetensors(path)
		if err != nil {
			mf.Close()
			return nil, fmt.Errorf("moments of rank %d of %d: %w", r, world, err)
		}
		var rg map[string][3]int
		if err := json.Unmarshal([]byte(f.Metadata["ranges"]), &rg); err != nil {
			f.Close()
			mf.Close()
			return nil, fmt.Errorf("%s: metadata \"ranges\": %w", path, err)
		}
		mf.files, mf.ranges = append(mf.files, f), append(mf.ranges, rg)
	}
	if len(paths) != world {
		mf.Close()
		return nil, fmt.Errorf("%s: %d moment shard files, but they say the world had %d ranks", dir, len(paths), world)
	}
	return mf, nil
}

// Close closes the files.
func (mf *MomentFiles) Close() {
	for _, f := range mf.files {
		f.Close()
	}
}

// Moments implements MomentSource: it reads every saved slice of name that
// overlaps [lo, hi).
func (mf *MomentFiles) Moments(name string, numel, lo, hi int) (m, v []float32, err error) {
	m, v = make([]float32, hi-lo), make([]float32, hi-lo)
	covered := 0
	for i, f := range mf.files {
		r, ok := mf.ranges[i][name]
		if !ok {
			continue
		}
		if r[2] != numel {
			return nil, nil, fmt.Errorf("%s: moments of %s are for %d elements, the parameter has %d", f.Path, name, r[2], numel)
		}
		a, z := max(lo, r[0]), min(hi, r[1])
		if a >= z {
			continue
		}
		sm, sv := make([]float32, r[1]-r[0]), make([]float32, r[1]-r[0])
		if err := f.ReadFloat32("m/"+name, sm); err != nil {
			return nil, nil, err
		}
		if err := f.ReadFloat32("v/"+name, sv); err != nil {
			return nil, nil, err
		}
		copy(m[a-lo:z-lo], sm[a-r[0]:z-r[0]])
		copy(v[a-lo:z-lo], sv[a-r[0]:z-r[0]])
		covered += z - a
	}
	if covered != hi-lo {
		return nil, nil, fmt.Errorf("moments of %s: the checkpoint's files cover %d of elements [%d, %d)", name, covered, lo, hi)
	}
	return m, v, nil
}
