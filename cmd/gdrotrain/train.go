package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/configs"
	"github.com/gdrotrain/gdrotrain/launch"
)

func newTrainCmd() *cobra.Command {
	var c launch.Command
	o := &c.Launch.Trainer
	cmd := &cobra.Command{
		Use:   "train --config FILE|NAME [--set section.key=value]...",
		Short: "Train with GRPO, Prompt-GDRO or Rollout-GDRO from a YAML config",
		Long: `train runs the RL loop described by a YAML config (a file, or the name of a
built-in config: ` + fmt.Sprint(configs.Names()) + `).
Unknown keys are errors; --set overrides any key, e.g.
  --set optim.lr=1e-6 --set train.method=prompt_gdro --set data.train=[a.parquet,b.parquet]
The run folder (run.out_dir/run.name) receives config.yaml (fully resolved),
metrics.jsonl (one line per step), validation.jsonl, train.log and
checkpoints/step_NNNNNNNN (complete, verified checkpoints; the newest
checkpoint.keep are kept). A run folder that already holds a run is refused
unless --resume auto continues it or --overwrite clears it; a resume refuses
config changes that alter the training (seed, lr, method, data, …) unless
--allow-config-change. SIGTERM, SIGUSR1 (Slurm's pre-emption warning),
SIGHUP (a closed SSH session) and SIGINT at any moment checkpoint the last
complete step (a step still generating is abandoned, an update or
checkpoint write finishes, a validation is redone on resume) and exit with
status 3, which the Slurm scripts requeue; --resume auto continues exactly.
Later signals never cut that checkpoint short (a second Ctrl-C outside it
exits at once); only SIGKILL does (docs/checkpoints.md).

Several GPUs (data parallel, one process per GPU): under srun the rank,
world size and GPU come from Slurm's variables; elsewhere start one process
per rank with --rank R --world-size W (and --local-rank, --master-addr,
--master-port across nodes; or MASTER_ADDR/MASTER_PORT). The ranks prove to
each other that they hold the job's secret, GDROTRAIN_DIST_TOKEN (the Slurm
scripts generate it; by hand: export GDROTRAIN_DIST_TOKEN=$(openssl rand
-hex 32) before starting the ranks), so no other process can join the job;
--insecure-dist opts out. Every rank holds
the whole state and only rank 0 writes the run folder; a signal on any rank
stops all at the next step boundary with one checkpoint (exit status 3),
which resumes at any world size.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Stdout, c.Launch.Log = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return launch.Train(cmd.Context(), c)
		},
	}
	cmd.Flags().StringVar(&c.Config, "config", "", "YAML config file, or a built-in config name")
	cmd.Flags().StringArrayVar(&c.Sets, "set", nil, "override a config key: section.key=value (repeatable)")
	cmd.Flags().BoolVar(&c.PrintConfig, "print-config", false, "print the resolved config and exit")
	cmd.Flags().BoolVar(&c.DryRun, "dry-run", false, "print the memory the run needs on its device, allocate nothing, exit 1 if it will not fit")
	cmd.Flags().StringVar(&c.Device, "device", "", "cpu, cuda, cuda:N or auto (overrides run.device)")
	cmd.Flags().Float64Var(&c.AssumeGiB, "assume-memory-gib", 0, "with --dry-run: plan against this much device memory instead of opening the device (e.g. 80 for an H100 seen from a login node)")
	addSelfTestFlag(cmd, &c.Launch.SkipSelfTest)
	addDistFlags(cmd, &c)
	cmd.Flags().StringVar(&o.Resume, "resume", "", "auto (the newest complete checkpoint in the run folder; a fresh start when it has none) or a checkpoint folder")
	cmd.Flags().BoolVar(&o.Overwrite, "overwrite", false, "start afresh in a run folder that holds an earlier run, deleting its checkpoints, logs, metrics and plots")
	cmd.Flags().BoolVar(&o.AllowConfigChange, "allow-config-change", false, "resume even though config keys that alter the training (seed, lr, method, data, …) differ from the checkpoint's")
	cmd.Flags().BoolVar(&o.RepairMetrics, "repair-metrics", false, "resume past a damaged metrics.jsonl or validation.jsonl: keep the valid lines, drop the others and log which steps have no line (without it such a resume is refused)")
	return cmd
}
