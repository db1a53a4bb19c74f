package main

// Data-parallel training from the command line: the flags that place this
// process in the job (launch.Place) and how its group forms.

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/launch"
)

// addDistFlags adds --rank, --world-size, --local-rank, --master-addr,
// --master-port, --bind-addr and --insecure-dist, into c.
func addDistFlags(cmd *cobra.Command, c *launch.Command) {
	p := &c.Launch.Place
	cmd.Flags().IntVar(&p.Size, "world-size", 0, "number of data-parallel ranks (processes); unset: Slurm's SLURM_NTASKS under srun, else 1")
	cmd.Flags().IntVar(&p.Rank, "rank", 0, "this process's rank, 0 … world-size−1 (with --world-size)")
	cmd.Flags().IntVar(&p.LocalRank, "local-rank", -1, "this process's rank on its node, which picks its GPU (default: --rank, one node)")
	cmd.Flags().StringVar(&p.Addr, "master-addr", "", "host of rank 0 (default: MASTER_ADDR, else 127.0.0.1)")
	cmd.Flags().IntVar(&p.Port, "master-port", 0, fmt.Sprintf("TCP port of rank 0 (default: MASTER_PORT, else %d)", dist.DefaultPort))
	cmd.Flags().StringVar(&c.Bind, "bind-addr", "", "address rank 0 listens on (sets dist.bind; default: the address of rank 0 the others dial, not every interface)")
	cmd.Flags().BoolVar(&c.Launch.Insecure, "insecure-dist", false, "form the ranks' group without "+dist.TokenEnv+": any process that reaches rank 0's port can join it (give it to every rank)")
}
