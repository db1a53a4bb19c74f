#!/usr/bin/env bash
# Runs the shipped batch scripts on a real Slurm started on this machine:
# Debian's munged, slurmctld and four slurmd (nodes n1…n4 on 127.0.0.1,
# ports 17001-17004; 96 CPUs and 8 GPUs each, the GPUs GRES on character
# devices, so the scripts' #SBATCH lines schedule unchanged). The scripts
# run as shipped, but for the device (--device cpu, DEVICE=cpu), on a tiny
# model, a few a+b= rows and 0.1 s steps:
#   a. gdrotrain.sbatch runs to the end: COMPLETED;
#   b. gdrotrain-2node.sbatch (16 ranks on 2 nodes) with a 1-minute limit
#      and --signal=B:USR1@45: the warning reaches every rank, they
#      checkpoint, the job requeues itself and resumes: COMPLETED,
#      Restarts=1;
#   c. gdrotrain-8gpu.sbatch requeued by `scontrol requeue`: resumed,
#      COMPLETED, Restarts=1;
#   d. a plain `scancel` of gdrotrain.sbatch and of gdrotrain-8gpu.sbatch:
#      a checkpoint, and the job stays CANCELLED (Restarts=0);
#   e. a rank that fails at start-up (a wrapper exits 1 for rank 3): the
#      step and the job end within seconds, not after dist.timeout_s;
#   f. the pre-emption warning by hand (`scancel --batch --signal=USR1`) to
#      gdrotrain.sbatch submitted with --no-requeue: the checkpoint is
#      written, `scontrol requeue` fails and the job FAILS with exit 3;
# and in every run folder metrics.jsonl holds each step exactly once, from
# 1 to the last.
#
# It installs nothing (.ci/run installs slurmctld, slurmd, munge and
# slurm-client). Without them, or not as root, it skips with a message;
# GDROTRAIN_REQUIRE_SLURM=1 (set by .ci/run) makes that a failure. It adds
# "127.0.0.1 n1 n2 n3 n4" to /etc/hosts while it runs (the nodes' names
# must resolve: the ranks reach rank 0 at the first node of the job), and
# stops every daemon it started on exit (GDROTRAIN_SLURM_KEEP=1 keeps its
# folder: the jobs' logs, the run folders, the daemons' logs). About 2
# minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=/usr/local/go/bin:$PATH

# Nothing of a cluster this may run on: its slurm.conf, a job's variables,
# sbatch's defaults from the environment.
unset $(compgen -e | grep -E '^(SLURM|SBATCH|SRUN|SALLOC)_') || true

skip() {
	if [ "${GDROTRAIN_REQUIRE_SLURM:-}" = 1 ]; then
		echo "test_real_slurm: FAIL: $* (GDROTRAIN_REQUIRE_SLURM=1)" >&2
		exit 1
	fi
	echo "test_real_slurm: skipped: $*"
	exit 0
}
export PATH=$PATH:/usr/sbin:/sbin
for c in munged slurmctld slurmd sbatch scontrol scancel sinfo squeue; do
	command -v "$c" >/dev/null || skip "no $c (Debian: apt-get install slurmctld slurmd munge slurm-client)"
done
[ "$(id -u)" = 0 ] || skip "not root (slurmd runs the jobs' processes as their user)"
for p in 17000 17001 17002 17003 17004; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then skip "port $p is in use"; fi
done
for n in n1 n2 n3 n4; do
	a=$(getent hosts "$n" | awk '{print $1; exit}') || true
	[ -z "$a" ] || [ "$a" = 127.0.0.1 ] || skip "host name $n is $a here, not 127.0.0.1"
done

tmp=$(mktemp -d /tmp/gdrotrain-slurm.XXXXXX)
chmod 711 "$tmp" # munged's socket must be reachable by path
hosts_marker="# gdrotrain test_real_slurm $$"
cleanup() {
	set +e
	# The jobs first (their processes are not the daemons' children), then
	# the daemons, by the pids they wrote.
	if [ -n "${ours:-}" ]; then
		scancel --quiet --user=root 2>/dev/null
		for _ in $(seq 20); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.5; done
	fi
	for f in "$tmp"/slurmd-*.pid "$tmp"/slurmctld.pid "$tmp"/munged.pid; do
		[ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	sleep 0.5
	for f in "$tmp"/slurmd-*.pid "$tmp"/slurmctld.pid "$tmp"/munged.pid; do
		[ -s "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
	done
	sed -i "\|$hosts_marker|d" /etc/hosts
	if [ -n "${GDROTRAIN_SLURM_KEEP:-}" ]; then echo "test_real_slurm: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

fail() {
	echo "test_real_slurm: FAIL: $*" >&2
	for f in "$tmp"/submit/logs/*.out; do
		[ -f "$f" ] && { echo "--- $f"; grep -v '| acc ' "$f" | tail -25; } >&2
	done
	echo "--- slurmctld.log" >&2
	tail -30 "$tmp/log/slurmctld.log" >&2
	exit 1
}
t0=$SECONDS
say() { printf 'test_real_slurm: [%3ds] %s\n' $((SECONDS - t0)) "$*"; }

# --- the binary and the task -------------------------------------------
(cd "$root" && go build -o "$tmp/gdrotrain" ./cmd/gdrotrain)
g=$tmp/gdrotrain
mkdir -p "$tmp/task"
"$g" init-tiny --out "$tmp/task/model" --vocab 512 >"$tmp/init-tiny.log" 2>&1 || fail "init-tiny: $(cat "$tmp/init-tiny.log")"
cp "$root"/tokenizer/testdata/tiny512/tokenizer*.json "$tmp/task/model/"
for a in $(seq 1 40); do echo "{\"problem\": \"$a+$((a % 7))=\", \"answer\": \"$((a + a % 7))\"}"; done >"$tmp/task/train.jsonl"
# One resolved config; each job gets a copy whose train.steps the test
# edits while the job waits to be requeued (free to change on resume).
"$g" train --config demo --print-config --set model.path="$tmp/task/model" --set "data.train=[$tmp/task/train.jsonl]" \
	--set run.out_dir="$tmp/runs" --set validation.every=0 --set validation.before_training=false \
	--set train.prompts_per_step=4 --set train.mini_batch_prompts=2 --set train.log_every=1 \
	--set checkpoint.every=1000 --set train.steps=100000 >"$tmp/task/base.yaml" 2>/dev/null
grep -q '^    steps: 100000$' "$tmp/task/base.yaml" || fail "no train.steps line in the printed config"
# A rank that fails at start-up (case e): rank 3 exits 1 once rank 0
# waits for the ranks to join; the others run the binary.
cat >"$tmp/failing-rank" <<EOF
#!/usr/bin/env bash
if [ "\$SLURM_PROCID" = 3 ]; then
	for _ in \$(seq 100); do grep -qs "listens on" "logs/e-\$SLURM_JOB_ID-rank0.out" && break; sleep 0.1; done
	echo "rank 3: failing at start-up"
	exit 1
fi
exec "$g" "\$@"
EOF
chmod +x "$tmp/failing-rank"

# --- the cluster ----------------------------------------------------------
mkdir -p "$tmp/state" "$tmp/log" "$tmp/dev" "$tmp/submit/logs"
# The GPUs: character devices with /dev/null's numbers (slurmd counts a
# GPU only by its device file).
for i in 0 1 2 3 4 5 6 7; do
	mknod "$tmp/dev/gpu$i" c 1 3 2>/dev/null || skip "mknod is not allowed here (the GPUs are declared as character devices)"
done
for n in n1 n2 n3 n4; do mkdir -p "$tmp/spool/$n"; done
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge.key"
echo "127.0.0.1 n1 n2 n3 n4 $hosts_marker" >>/etc/hosts
cat >"$tmp/slurm.conf" <<EOF
ClusterName=gdrotrain-ci
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=17000
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start again once the launch credentials of its last
# start expire: 10 s here, 120 s by default.
AuthInfo=socket=$tmp/munge.sock,cred_expire=10
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd-%n.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
JobRequeue=1
SchedulerParameters=sched_interval=2
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=30
MinJobAge=600
NodeName=n[1-4] NodeAddr=127.0.0.1 Port=[17001-17004] CPUs=96 RealMemory=1000000 Gres=gpu:8 State=UNKNOWN
PartitionName=ci Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP
EOF
echo "NodeName=n[1-4] Name=gpu File=$tmp/dev/gpu[0-7]" >"$tmp/gres.conf"
export SLURM_CONF=$tmp/slurm.conf
ours=1
munged --force --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" --pid-file="$tmp/munged.pid" \
	--seed-file="$tmp/munge.seed" --log-file="$tmp/log/munged.log"
slurmctld -f "$SLURM_CONF" -i
for n in n1 n2 n3 n4; do slurmd -f "$SLURM_CONF" -N "$n"; done
for _ in $(seq 100); do
	[ "$(sinfo -h -o '%T %D' 2>/dev/null)" = "idle 4" ] && break
	sleep 0.2
done
[ "$(sinfo -h -o '%T %D' 2>/dev/null)" = "idle 4" ] || fail "the nodes did not come up: $(sinfo 2>&1)"
say "slurm $(sinfo -V | awk '{print $2}') up: $(sinfo -h -o '%D nodes %T')"

# --- helpers --------------------------------------------------------------
# field JOB KEY: KEY's value in `scontrol show job`.
field() { scontrol show job -o "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# wait_for WHAT SECONDS CMD...: until CMD succeeds.
wait_for() {
	local what=$1 limit=$2
	shift 2
	local end=$((SECONDS + limit))
	until "$@"; do
		[ $SECONDS -lt $end ] || fail "$what: not after ${limit}s"
		sleep 0.5
	done
}
state_is() { [ "$(field "$1" JobState)" = "$2" ]; }
ended() { case "$(field "$1" JobState)" in COMPLETED | CANCELLED | FAILED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) return 0 ;; esac; return 1; }
pending_again() { [ "$(field "$1" JobState)" = PENDING ] && [ "$(field "$1" Restarts)" -ge 1 ]; }
# steps RUN: the number of metrics lines of run RUN.
steps() { [ -f "$tmp/runs/$1/metrics.jsonl" ] && wc -l <"$tmp/runs/$1/metrics.jsonl" || echo 0; }
has_steps() { [ "$(steps "$1")" -ge "$2" ]; }
# submit NAME SCRIPT [SBATCH OPTIONS]: submits scripts/slurm/SCRIPT from
# the submit folder (scripts/ a link to the repository's) for run NAME with
# its own copy of the config (ending at step $STEPS when set); prints the
# job id.
submit() {
	local name=$1 script=$2
	shift 2
	cp "$tmp/task/base.yaml" "$tmp/cfg-$name.yaml"
	[ -z "${STEPS:-}" ] || set_steps "$name" "$STEPS"
	(cd "$tmp/submit" && CONFIG="$tmp/cfg-$name.yaml" GDROTRAIN=${GDROTRAIN:-$g} DEVICE=cpu \
		sbatch --parsable --job-name="$name" "$@" "scripts/slurm/$script" --device cpu --set run.name="$name")
}
# set_steps NAME N: the run ends at step N on its next start.
set_steps() { sed -i "s/^    steps: .*/    steps: $2/" "$tmp/cfg-$1.yaml"; }
# check_run NAME N: metrics.jsonl holds steps 1…N, each once, in order.
check_run() {
	local got
	got=$(grep -o '"step":[0-9]*' "$tmp/runs/$1/metrics.jsonl" | cut -d: -f2 | tr '\n' ' ')
	[ "$got" = "$(seq -s ' ' 1 "$2") " ] || fail "run $1: metrics steps are [$got], want 1…$2 once each"
}
# expect JOB STATE EXIT RESTARTS
expect() {
	local s e r
	s=$(field "$1" JobState) e=$(field "$1" ExitCode) r=$(field "$1" Restarts)
	[ "$s $e $r" = "$2 $3 $4" ] || fail "job $1: $s, exit $e, restarts $r; want $2, exit $3, restarts $4"
}
log_has() { grep -qF -- "$2" "$tmp/submit/logs/$1" || fail "logs/$1 lacks: $2"; }

ln -s "$root/scripts" "$tmp/submit/scripts"
mkdir -p "$tmp/runs"

# --- b: the 2-node script pre-empted by its warning (the longest; first) ---
# The warning is due 45 s before the 1-minute limit; slurmctld sends it at
# its next time-limit check (every 30 s), so 15 to 45 s after the start.
jb=$(submit b gdrotrain-2node.sbatch --time=1 --signal=B:USR1@45)
# --- a: to the end; d: a plain scancel; f: a requeue that fails ---------
ja=$(STEPS=4 submit a gdrotrain.sbatch)
jd=$(submit d gdrotrain.sbatch)
jf=$(submit f gdrotrain.sbatch --no-requeue)
say "submitted b=$jb a=$ja d=$jd f=$jf"

wait_for "run d to step 3" 60 has_steps d 3
scancel "$jd"
wait_for "run f to step 3" 60 has_steps f 3
scancel --batch --signal=USR1 "$jf"
wait_for "job $ja (a) to end" 60 ended "$ja"
expect "$ja" COMPLETED 0:0 0
check_run a 4
wait_for "job $jd (d) to end" 60 ended "$jd"
expect "$jd" CANCELLED 3:0 0
log_has "d-$jd.out" "not requeueing"
[ -d "$tmp/runs/d/checkpoints/step_$(printf %08d "$(steps d)")" ] || fail "run d: no checkpoint of its last step $(steps d)"
check_run d "$(steps d)"
wait_for "job $jf (f) to end" 60 ended "$jf"
expect "$jf" FAILED 3:0 0
log_has "f-$jf.out" "scontrol requeue $jf failed"
check_run f "$(steps f)"
say "a: COMPLETED; d: scancel → CANCELLED at step $(steps d); f: failed requeue → FAILED, exit 3"

# --- c: scontrol requeue of the 8-GPU script; e: a rank failing at start-up
jc=$(submit c gdrotrain-8gpu.sbatch)
je=$(GDROTRAIN=$tmp/failing-rank submit e gdrotrain-8gpu.sbatch)
say "submitted c=$jc e=$je"
wait_for "job $je (e) to end after its rank 3 failed" 60 ended "$je"
state_is "$je" FAILED || fail "job $je (e): $(field "$je" JobState), want FAILED"
# srun ends the step on rank 3's exit; the others, waiting to join, stop
# on its SIGTERM at once: well before KillWait (30 s) brings SIGKILL.
elapsed=$(($(date -d "$(field "$je" EndTime)" +%s) - $(date -d "$(field "$je" StartTime)" +%s)))
[ "$elapsed" -lt 20 ] || fail "job $je (e) took ${elapsed}s to end after its rank 3 failed"
log_has "e-$je-rank0.out" "stopped while waiting for rank(s)"
say "e: rank 3 failed at start-up → the job FAILED after ${elapsed}s"
wait_for "run c to step 3" 90 has_steps c 3
scontrol requeue "$jc"
wait_for "job $jc (c) to wait again" 60 pending_again "$jc"
scontrol hold "$jc"
cstop=$(steps c)
set_steps c $((cstop + 3))
scontrol release "$jc"
say "c: requeued at step $cstop"
wait_for "job $jc (c) to end" 90 ended "$jc"
expect "$jc" COMPLETED 0:0 1
check_run c $((cstop + 3))
log_has "c-$jc-rank0.out" "resumed from $tmp/runs/c/checkpoints/step_$(printf %08d "$cstop")"

# --- d, 8 ranks: a plain scancel ------------------------------------------
jd8=$(submit d8 gdrotrain-8gpu.sbatch)
wait_for "run d8 to step 3" 90 has_steps d8 3
scancel "$jd8"
wait_for "job $jd8 (d8) to end" 60 ended "$jd8"
expect "$jd8" CANCELLED 3:0 0
log_has "d8-$jd8.out" "not requeueing"
[ -d "$tmp/runs/d8/checkpoints/step_$(printf %08d "$(steps d8)")" ] || fail "run d8: no checkpoint of its last step $(steps d8)"
check_run d8 "$(steps d8)"
say "d8: scancel → CANCELLED at step $(steps d8)"

# --- b: requeued by its warning, then to the end --------------------------
wait_for "job $jb (b) to be requeued by its warning" 150 pending_again "$jb"
scontrol hold "$jb"
bstop=$(steps b)
[ "$bstop" -ge 1 ] || fail "run b: the warning came before its first step"
set_steps b $((bstop + 3))
scontrol update JobId="$jb" TimeLimit=10 # no second warning
scontrol release "$jb"
say "b: pre-empted at step $bstop, requeued"
wait_for "job $jb (b) to end" 90 ended "$jb"
expect "$jb" COMPLETED 0:0 1
check_run b $((bstop + 3))
log_has "b-$jb.out" "signal USR1 (pre-emption warning)"
for r in $(seq 0 15); do
	log_has "b-$jb-rank$r.out" "resumed from $tmp/runs/b/checkpoints/step_$(printf %08d "$bstop")"
done
say "ok: every job ended as it should and every step is in metrics.jsonl once"
