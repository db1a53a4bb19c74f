package bench

// The PyTorch baseline of the CPU benchmark: a Python process running
// scripts/bench_torch.py, kept alive so its measurements interleave with
// ours. It reads the shapes as one JSON line on stdin and answers with an
// info line (torchInfo); then, for each shape name it reads, one result
// line (torchResult).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// torchInfo is the first line the PyTorch script prints: which BLAS its
// process really calls and with how many threads.
type torchInfo struct {
	Torch       string `json:"torch"`
	Threads     int    `json:"threads"`
	Parallel    string `json:"parallel"`
	BuildBLAS   string `json:"build_blas"`
	BLAS        string `json:"blas"`
	BLASKind    string `json:"blas_kind"`
	BLASConfig  string `json:"blas_config"`
	BLASThreads int    `json:"blas_threads"`
	BLASCore    string `json:"blas_core"`
}

type torchResult struct {
	Name      string  `json:"name"`
	FwdTokS   float64 `json:"fwd_tok_s"`
	TrainTokS float64 `json:"train_tok_s"`
}

// torchProc is the PyTorch baseline script, kept running so its
// measurements interleave with ours.
type torchProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *bytes.Buffer
	info   torchInfo
}

// startTorch starts the PyTorch script on the shapes with threads threads
// for torch and its BLAS, and OPENBLAS_CORETYPE=core unless core is ""
// (then the caller's environment, with the user's own setting if any); a
// missing torch is a note, not an error, so `make bench` works everywhere.
func startTorch(shapes []Shape, py, script string, threads int, core string) (*torchProc, string) {
	if py == "" {
		return nil, "PyTorch baseline skipped (--torch-python empty)"
	}
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Sprintf("PyTorch baseline skipped: %v", err)
	}
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		return nil, fmt.Sprintf("PyTorch baseline skipped: %s cannot import torch (apt-get install python3-torch libopenblas0-pthread, "+
			"or PyTorch 2.14 from a Debian sid chroot: bash scripts/sid_chroot.sh, then --torch-python scripts/sid_python.sh)", py)
	}
	in, err := json.Marshal(shapes)
	if err != nil {
		return nil, err.Error()
	}
	t := &torchProc{cmd: exec.Command(py, script, "--threads", strconv.Itoa(threads)), stderr: &bytes.Buffer{}}
	n := strconv.Itoa(threads)
	t.cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+n, "OPENBLAS_NUM_THREADS="+n, "MKL_NUM_THREADS="+n)
	if core != "" {
		t.cmd.Env = append(t.cmd.Env, cblasCoreEnv+"="+core)
	}
	t.cmd.Stderr = t.stderr
	if t.in, err = t.cmd.StdinPipe(); err != nil {
		return nil, err.Error()
	}
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err.Error()
	}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Sprintf("PyTorch baseline: %v", err)
	}
	t.out = bufio.NewScanner(stdout)
	t.out.Buffer(make([]byte, 1<<16), 1<<20)
	var first struct {
		Info *torchInfo `json:"info"`
	}
	if _, err := t.in.Write(append(in, '\n')); err != nil || !t.out.Scan() || json.Unmarshal(t.out.Bytes(), &first) != nil || first.Info == nil {
		t.close()
		return nil, fmt.Sprintf("PyTorch baseline failed to start: %s", t.stderr.String())
	}
	t.info = *first.Info
	return t, ""
}

// measure asks the script to time one shape. The pause before it lets this
// process's goroutines settle; the one after lets PyTorch's BLAS threads,
// which busy-wait for a while after their last call, go to sleep before
// gdrotrain measures again.
func (t *torchProc) measure(name string) (torchResult, error) {
	time.Sleep(300 * time.Millisecond)
	defer time.Sleep(300 * time.Millisecond)
	if _, err := fmt.Fprintln(t.in, name); err != nil {
		return torchResult{}, err
	}
	if !t.out.Scan() {
		return torchResult{}, fmt.Errorf("no result for %s: %s", name, t.stderr.String())
	}
	var r torchResult
	if err := json.Unmarshal(t.out.Bytes(), &r); err != nil || r.Name != name {
		return torchResult{}, fmt.Errorf("bad result for %s: %q", name, t.out.Text())
	}
	return r, nil
}

func (t *torchProc) close() {
	t.in.Close()
	_ = t.cmd.Wait()
}
