"""The lease supervisor: hold a lease around one command and release it only when the command is gone.

Order of events (each step completes before the next starts):
  1. take the lease (record written with status "starting");
  2. spawn a gate process in a new process group; it waits on a pipe, so COMMAND has not started;
  3. rewrite the record with the child's pid/process group (status "running");
  4. open the gate: it execs COMMAND with CUDA_VISIBLE_DEVICES=<UUIDs> and RL_BENCH_LEASE_RECORD;
  5. forward SIGINT/SIGTERM/SIGHUP to the group while waiting (the exited child is kept as a
     zombie until the end, so its process-group id cannot be reused by someone else's process);
  6. wait, bounded, until no process of the group or descendant is left, then remove the
     record and release the locks; otherwise keep the record and exit EXIT_CLEANUP_UNCONFIRMED.
If the supervisor dies before step 4 the gate reads end-of-file and exits without running COMMAND.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from ..host import slurm
from . import procs
from .acquire import Lease, LeaseRefused, choose_gpu_set, utc_now

#: Exit code when no lease was granted (the message names GPU, reason and record).
EXIT_REFUSED = 75
#: Exit code when the command ended but owned processes outlived the cleanup timeout (record kept).
EXIT_CLEANUP_UNCONFIRMED = 76
#: Exit code of the gate when the supervisor went away before starting COMMAND.
EXIT_GATE_ABORTED = 125
#: Environment variable, set in COMMAND's environment, naming the reservation record.
RECORD_ENV = "RL_BENCH_LEASE_RECORD"

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_GATE = r"""
import os, sys
fd = int(sys.argv[1])
go = os.read(fd, 1)
os.close(fd)
if go != b"1":
    sys.exit(125)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write("bench lease: cannot start %r: %s\n" % (sys.argv[2], exc))
    sys.exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""


class Supervisor:
    def __init__(
        self,
        specs: Sequence[str],
        count: int,
        command: Sequence[str],
        *,
        run_id: str,
        lock_dir=None,
        memory_threshold_mib: int | None = None,
        cleanup_timeout_s: float = 60.0,
        err: TextIO | None = None,
    ):
        self.specs, self.count, self.command = list(specs), count, list(command)
        self.run_id, self.lock_dir = run_id, lock_dir
        self.memory_threshold_mib = memory_threshold_mib
        self.cleanup_timeout_s = cleanup_timeout_s
        self.err = err or sys.stderr
        self.signals: list[int] = []
        self.pgid: int | None = None
        self.child: subprocess.Popen | None = None
        self.forwarding = False
        self.slurm_job: slurm.SlurmJob | None = None

    def say(self, msg: str) -> None:
        print(f"bench lease: {msg}", file=self.err, flush=True)

    # signals -------------------------------------------------------------
    def _on_signal(self, signum, _frame) -> None:
        self.signals.append(signum)
        if self.forwarding:
            self._forward(signum)

    def _forward(self, signum: int) -> None:
        if self.pgid is not None:
            try:
                os.killpg(self.pgid, signum)
            except (ProcessLookupError, PermissionError):
                pass
        # Descendants that left the group (setsid) are still ours: psutil checks start times.
        for p in procs.running_descendants(os.getpid()):
            try:
                if os.getpgid(p.pid) != self.pgid:
                    p.send_signal(signum)
            except (OSError, procs.psutil.Error):
                continue

    # main ----------------------------------------------------------------
    def run(self) -> int:
        if not self.command:
            self.say("refused: no COMMAND given after `--`")
            return EXIT_REFUSED
        previous = {s: signal.signal(s, self._on_signal) for s in FORWARDED_SIGNALS}
        try:
            return self._run()
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def _slurm_specs(self) -> list[str]:
        """Inside a SLURM job: exactly the allocated GPUs replace the configured SPECs."""
        job = slurm.current_job()
        if job is None:
            return self.specs
        untrusted = slurm.unverified_reason(job)
        if untrusted is not None:  # a stray SLURM environment: never let it pick the GPUs
            if job.gpus and ",".join(map(str, job.gpus)) not in self.specs:
                raise slurm.SlurmAllocationError(
                    f"the environment names {job.describe()} with GPUs {job.gpu_source}="
                    f"{','.join(map(str, job.gpus))}, not the configured SPEC(s) {' | '.join(self.specs)}, but "
                    f"{untrusted}; unset the SLURM_* variables or run inside that job")
            self.say(f"ignoring the SLURM environment ({job.describe()}): {untrusted}")
            return self.specs
        self.slurm_job = job
        spec = slurm.allocated_gpu_spec(self.slurm_job, self.count)
        self.say(f"inside {self.slurm_job.describe()}: leasing the allocated GPU(s) {spec} "
                 f"({self.slurm_job.gpu_source}) instead of the configured SPEC(s) {' | '.join(self.specs)}")
        return [spec]

    def _run(self) -> int:
        try:
            specs = self._slurm_specs()
        except slurm.SlurmAllocationError as exc:
            self.say(f"lease refused: {exc}")
            return EXIT_REFUSED
        try:
            lease = choose_gpu_set(
                specs, self.count, run_id=self.run_id, command=self.command, lock_dir=self.lock_dir,
                memory_threshold_mib=self.memory_threshold_mib, should_abort=lambda: bool(self.signals),
            )
        except LeaseRefused as exc:
            self.say(str(exc))
            return 128 + self.signals[0] if self.signals else EXIT_REFUSED
        if self.signals:
            return self._abort(lease, None, None, f"signal {self.signals[0]} before the command started")
        self._report_grant(lease)
        subreaper = procs.become_subreaper()
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=lease.cuda_visible_devices, **{RECORD_ENV: str(lease.record_path)})
        r, w = os.pipe()
        try:
            self.child = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _GATE, str(r), *self.command],
                pass_fds=(r,), env=env, process_group=0,
            )
        except OSError as exc:
            os.close(r)
            os.close(w)
            return self._abort(lease, None, None, f"cannot spawn the command: {exc}")
        os.close(r)
        self.pgid = self.child.pid
        try:
            lease.update(status="running", child=procs.identity(self.child.pid), process_group=self.pgid,
                         subreaper=subreaper, slurm=self.slurm_job.to_dict() if self.slurm_job else None)
        except OSError as exc:
            return self._abort(lease, w, self.child, f"cannot update the reservation record: {exc.strerror or exc}")
        if self.signals:
            return self._abort(lease, w, self.child, f"signal {self.signals[0]} before the command started")
        self.forwarding = True
        os.write(w, b"1")
        os.close(w)
        os.waitid(os.P_PID, self.child.pid, os.WEXITED | os.WNOWAIT)  # keeps the zombie: pgid stays ours
        return self._finish(lease)

    def _report_grant(self, lease: Lease) -> None:
        d = lease.data
        which = f"set {d['gpu_set_index'] + 1} of {len(d['gpu_specs'])} ({d['gpu_spec']!r})"
        self.say(f"run {lease.run_id} leased {which} via {d['inventory_source']}; record {lease.record_path}")
        for g in lease.devices:
            self.say(f"  GPU {g.index} {g.uuid} {g.name} driver {g.driver}: {g.memory_used_mib}/{g.memory_total_mib} MiB used, "
                     f"{len(g.processes)} compute process(es) per NVML")

    def _abort(self, lease: Lease, gate_w: int | None, child: subprocess.Popen | None, why: str) -> int:
        """Undo a lease whose command never started: close the gate, reap it, remove record and locks."""
        if gate_w is not None:
            os.close(gate_w)  # gate reads EOF and exits without exec
        if child is not None:
            child.wait()
        signals_before = len(self.signals)
        try:
            lease.release(should_abort=lambda: len(self.signals) > signals_before)
        except (OSError, TimeoutError) as exc:
            self.say(f"command not started ({why}); could not remove record {lease.record_path}: {exc}")
            return EXIT_CLEANUP_UNCONFIRMED
        self.say(f"command not started ({why}); record and locks removed")
        return 128 + self.signals[0] if self.signals else EXIT_REFUSED

    def _survivors(self) -> list:
        found = {p.pid: p for p in procs.group_members(self.pgid, exclude={os.getpid()})}
        for p in procs.running_descendants(os.getpid()):
            found[p.pid] = p
        found.pop(self.child.pid, None)
        return list(found.values())

    def _finish(self, lease: Lease) -> int:
        deadline = time.monotonic() + max(0.0, self.cleanup_timeout_s)
        announced = False
        while True:
            procs.reap_zombie_children(keep=self.child.pid)
            survivors = self._survivors()
            if not survivors or time.monotonic() >= deadline:
                break
            if not announced:
                listed = ", ".join(str(p.pid) for p in survivors)
                self.say(f"command exited; waiting up to {self.cleanup_timeout_s:g} s for {len(survivors)} owned process(es): {listed}")
                announced = True
            time.sleep(0.1)
        code = self.child.wait()
        code = 128 - code if code < 0 else code
        if survivors:
            described = [procs.describe(p) for p in survivors]
            try:
                lease.update(status="cleanup_unconfirmed", ended_at=utc_now(), exit_code=code, survivors=described)
            except OSError as exc:
                self.say(f"could not update record {lease.record_path}: {exc}")
            lease.drop_locks()
            lines = "; ".join(f"pid {d['pid']} ({d.get('cmdline', '?')})" for d in described)
            self.say(f"cleanup unconfirmed: {len(described)} owned process(es) still alive after "
                     f"{self.cleanup_timeout_s:g} s: {lines}. Record {lease.record_path} kept; it blocks "
                     f"{lease.cuda_visible_devices} until a person clears it (command exit code {code})")
            return EXIT_CLEANUP_UNCONFIRMED
        signals_before = len(self.signals)
        try:
            lease.release(should_abort=lambda: len(self.signals) > signals_before)
        except (OSError, TimeoutError) as exc:
            if lease.record_path.exists():
                try:
                    lease.update(status="cleanup_unconfirmed", ended_at=utc_now(), exit_code=code, cleanup_error=str(exc))
                except OSError:
                    pass
            lease.drop_locks()
            self.say(f"command exited {code} but record {lease.record_path} could not be removed ({exc}); "
                     f"it is kept and blocks {lease.cuda_visible_devices} until a person clears it")
            return EXIT_CLEANUP_UNCONFIRMED
        self.say(f"run {lease.run_id} released {lease.cuda_visible_devices} (command exit code {code})")
        return code


def supervise(specs: Sequence[str], count: int, command: Sequence[str], **kwargs) -> int:
    """Run COMMAND under a lease; returns its exit code or EXIT_REFUSED / EXIT_CLEANUP_UNCONFIRMED."""
    return Supervisor(specs, count, command, **kwargs).run()
