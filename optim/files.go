package optim

// Optimizer moments on disk. One process (or rank 0 of a replicated run)
// writes optimizer.safetensors, the moments laid out like the parameters
// ("m/<name>", "v/<name>"). Under ZeRO each rank writes its own file,
// optimizer-rank-RRRRR-of-WWWWW, holding the slices it owns ("m/<name>" of
// hi−lo elements) and, in the metadata, every slice's range and parameter
// size. Reading takes either form and serves any range of any parameter,
// so a checkpoint resumes at any world size (OpenMoments + LoadMoments).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/gdrotrain/gdrotrain/model"
)

// MomentsFile is the one-process moments file's name.
const MomentsFile = "optimizer.safetensors"

// MomentShardFile is rank's moments file under ZeRO over world ranks.
func MomentShardFile(rank, world int) string {
	return fmt.Sprintf("optimizer-rank-%05d-of-%05d.safetensors", rank, world)
}

// WriteMomentShard writes rank s.Rank's slices into dir.
func WriteMomentShard(dir string, slices MomentSlices, s Shard) error {
	ranges := map[string][3]int{}
	var ts []model.NamedTensor
	for _, sl := range slices {
		ranges[sl.Name] = [3]int{sl.Lo, sl.Hi, sl.Numel}
		if sl.Hi == sl.Lo {
			continue
		}
		ts = append(ts, model.NamedTensor{Name: "m/" + sl.Name, Shape: []int{sl.Hi - sl.Lo}, Data: sl.M},
			model.NamedTensor{Name: "v/" + sl.Name, Shape: []int{sl.Hi - sl.Lo}, Data: sl.V})
	}
	raw, err := json.Marshal(ranges)
	if err != nil {
		return err
	}
	meta := map[string]string{"content": "adamw moments, ZeRO-1 shard", "rank": fmt.Sprint(s.Rank), "world": fmt.Sprint(s.World), "ranges": string(raw)}
	return model.WriteSafetensors(filepath.Join(dir, MomentShardFile(s.Rank, s.World)), ts, model.F32, meta)
}

// WriteMoments writes the whole moments of o into dir's MomentsFile
// ("m/<name>", "v/<name>" laid out like the parameters).
func (o *AdamW) WriteMoments(b model.Backend, mc *model.Config, dir string) error {
	var tensors []model.NamedTensor
	for prefix, p := range map[string]*model.Params{"m": o.M, "v": o.V} {
		for _, np := range p.Named(mc) {
			host := make([]float32, (*np.Ptr).Numel())
			b.Download(*np.Ptr, host)
			tensors = append(tensors, model.NamedTensor{Name: prefix + "/" + np.Name, Shape: np.Shape, Data: host})
		}
	}
	return model.WriteSafetensors(filepath.Join(dir, MomentsFile), tensors, model.F32, map[string]string{"content": "adamw moments"})
}

// MomentFiles reads the moments of a checkpoint folder, whichever way they
// were written.
type MomentFiles struct {
	files  []*model.SafetensorsFile
	ranges []map[string][3]int // per file: name → lo, hi, numel
}

// OpenMoments opens dir's moments: optimizer.safetensors, or the complete
// set of one world size's shard files.
func OpenMoments(dir string) (*MomentFiles, error) {
	if _, err := os.Stat(filepath.Join(dir, MomentsFile)); err == nil {
		f, err := model.OpenSafetensors(filepath.Join(dir, MomentsFile))
		if err != nil {
			return nil, err
		}
		r := map[string][3]int{}
		for name, ti := range f.Tensors {
			if len(name) > 2 && name[:2] == "m/" {
				r[name[2:]] = [3]int{0, ti.Numel(), ti.Numel()}
			}
		}
		return &MomentFiles{files: []*model.SafetensorsFile{f}, ranges: []map[string][3]int{r}}, nil
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
		f, err := model.OpenSafetensors(path)
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

// MomentSlice is the part [Lo, Hi) of one parameter's two moments.
type MomentSlice struct {
	Name   string
	Numel  int
	Lo, Hi int
	M, V   []float32
}

// MomentSource gives parts of whole-parameter moments: m and v of
// elements [lo, hi) of the parameter name of numel elements, from however
// many slices they were saved in.
type MomentSource interface {
	Moments(name string, numel, lo, hi int) (m, v []float32, err error)
}

// MomentSlices, as a MomentSource: the requested range is assembled from
// the slices of that name, which must cover it.
type MomentSlices []MomentSlice

// Moments implements MomentSource.
func (ss MomentSlices) Moments(name string, numel, lo, hi int) (m, v []float32, err error) {
	m, v = make([]float32, hi-lo), make([]float32, hi-lo)
	covered := 0
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		if s.Numel != numel || s.Lo < 0 || s.Hi > numel || s.Lo > s.Hi || len(s.M) != s.Hi-s.Lo || len(s.V) != s.Hi-s.Lo {
			return nil, nil, fmt.Errorf("moments of %s: slice [%d, %d) of %d elements does not fit a parameter of %d", name, s.Lo, s.Hi, s.Numel, numel)
		}
		a, z := max(lo, s.Lo), min(hi, s.Hi)
		if a < z {
			copy(m[a-lo:z-lo], s.M[a-s.Lo:z-s.Lo])
			copy(v[a-lo:z-lo], s.V[a-s.Lo:z-s.Lo])
			covered += z - a
		}
	}
	if covered != hi-lo {
		return nil, nil, fmt.Errorf("moments of %s: the saved slices cover %d of elements [%d, %d)", name, covered, lo, hi)
	}
	return m, v, nil
}
