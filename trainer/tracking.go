package trainer

// Experiment tracking beside metrics.jsonl: TensorBoard event files in the
// run folder's tb/, written by rank 0 only (the other ranks write no run
// files at all). The mirror sits on the writers of metrics.jsonl and
// validation.jsonl (tools/tbevents), so the event files hold exactly
// their lines, and on a resume they are cut back to the resumed step as
// the JSONL files are (docs/tracking.md).

import (
	"os"
	"path/filepath"

	"github.com/gdrotrain/gdrotrain/tools/tbevents"
)

// LogConfig says where a run's metrics go besides metrics.jsonl and
// validation.jsonl. It does not change the training trajectory, so a
// resumed run may change it.
type LogConfig struct {
	// TensorBoard writes every metrics.jsonl and validation.jsonl figure
	// as TensorBoard event files into the run folder's tb/ (scalars under
	// train/, gdro/, perf/, memory/ and validation/, per-bin curves and
	// histograms, the resolved config as text), which TensorBoard opens and
	// `wandb sync --sync-tensorboard` and MLflow import (docs/tracking.md).
	TensorBoard bool `yaml:"tensorboard" json:"tensorboard"`
}

// openTracking mirrors the per-step logs into tb/ when log.tensorboard is
// on. keep is the resumed step (-1: a run from step 0). With the option
// off, event files an earlier attempt left are still cut back to keep, so
// tb/ never holds a step the JSONL files do not.
func (t *Trainer) openTracking(keep int) error {
	dir := filepath.Join(t.Dir, tbevents.Dir)
	if !t.Cfg.Log.TensorBoard {
		if _, err := os.Stat(dir); err != nil {
			return nil
		}
		note, err := tbevents.Truncate(dir, int64(keep))
		if note != "" {
			t.Log.Printf("tensorboard (log.tensorboard is off): %s: %s", dir, note)
		}
		return err
	}
	cfg, err := t.Cfg.YAML()
	if err != nil {
		return err
	}
	tb, err := tbevents.OpenRun(dir, keep, cfg, t.Log.Printf)
	if err != nil {
		return err
	}
	t.closers = append(t.closers, tb)
	t.metrics = tb.Tee(t.metrics, tbevents.Metrics)
	t.valLog = tb.Tee(t.valLog, tbevents.Validation)
	return nil
}
