r"""A one-node SLURM cluster in one folder, for trying `hydra/launcher=slurm` on this machine.

    python scripts/slurm_cluster.py start <dir>    # install what is missing, start, wait
    python scripts/slurm_cluster.py status <dir>   # which daemons run, and sinfo
    python scripts/slurm_cluster.py stop <dir>     # cancel its jobs, stop every daemon

`start` installs Debian's SLURM 22.05 with its accounting (slurm-wlm munge slurmdbd
mariadb-server-core mariadb-client-core, with apt-get, only where a program is missing; as
root), writes a munge key, slurm.conf and slurmdbd.conf (mode 600, beside slurm.conf, where
slurmdbd reads it) into <dir>/etc, and starts, each in the foreground of a process of its own:
a MariaDB server on its own data dir (the accounting database: submitit reads a job's state
with sacct, and never sees a cancelled job end without it), munged with its socket in <dir>,
slurmdbd, slurmctld (the cluster registered with sacctmgr first) and slurmd. One node, this
machine, with CPUs=2, in partition `cpu`; no cgroups (proctrack/linuxproc, task/none); every
port a free one, so clusters in other folders do not collide. It waits until sinfo shows the
node idle and prints the line the client tools need:

    export SLURM_CONF=<dir>/etc/slurm.conf

Config, state, logs (<dir>/log), pid files (<dir>/pids) and the munge socket all lie in <dir>;
nothing is written elsewhere. A dir a stopped cluster left is started afresh (its controller
state holds jobs that no longer exist). `stop` cancels the cluster's jobs, stops the daemons
it started (by their pid files) in reverse order and waits for each to end.

Any failure is one line on stderr, `error: <what failed>: <what to do>`, and exit 1; exit 3
where SLURM cannot be had here at all (not Linux, not root, no apt-get, the packages could not
be installed: tests/cli/test_slurm_cluster.py skips on it); exit 2 for a wrong command line.
Measured here (2 cores, Debian 12): the packages install in about 9 s, the cluster starts in
3-4 s, stops in 2 s.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = ["slurm-wlm", "munge", "slurmdbd", "mariadb-server-core", "mariadb-client-core"]
PROGRAMS = ["munged", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld",
            "slurmd", "sbatch", "sacct", "sacctmgr", "sinfo", "squeue", "scancel"]
SBIN = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]  # where the daemons lie, PATH or not
CLUSTER = "seqforecast"
PARTITION = "cpu"
CPUS = 2
MARKER = "cluster.json"  # what start wrote: the ports, the daemons' order; a dir of ours
ORDER = ["mariadbd", "munged", "slurmdbd", "slurmctld", "slurmd"]  # started so; stopped reversed
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class ClusterError(Exception):
    """A step that failed: str() is the one line saying what failed and what to do."""

    exit_code = 1


class Unavailable(ClusterError):
    """SLURM cannot be had on this machine (the test suite skips on it)."""

    exit_code = 3


def program(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in SBIN:
        if os.access(Path(folder) / name, os.X_OK):
            return str(Path(folder) / name)
    return None


def install() -> None:
    """apt-get install the packages, where a program is missing: one line saying so."""
    missing = [p for p in PROGRAMS if program(p) is None]
    if not missing:
        return
    if not sys.platform.startswith("linux"):
        raise Unavailable(f"SLURM is not installed ({', '.join(missing)} missing) and this "
                          f"script installs it on Debian/Ubuntu only")
    if os.geteuid() != 0:
        raise Unavailable(f"SLURM is not installed ({', '.join(missing)} missing) and "
                          f"installing it needs root: run as root, or apt-get install -y "
                          f"--no-install-recommends {' '.join(PACKAGES)}")
    if program("apt-get") is None:
        raise Unavailable(f"SLURM is not installed ({', '.join(missing)} missing) and there is "
                          f"no apt-get: install {' '.join(PACKAGES)} (or their equivalents)")
    print(f"[slurm] installing {' '.join(PACKAGES)} with apt-get ({', '.join(missing)} "
          f"missing)", file=sys.stderr, flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:  # the package lists may be stale or absent: update them, once
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True)
        proc = subprocess.run(command, env=env, capture_output=True, text=True)
    still = [p for p in PROGRAMS if program(p) is None]
    if proc.returncode != 0 or still:
        raise Unavailable(f"apt-get install {' '.join(PACKAGES)} failed "
                          f"({_last_line(proc.stderr or proc.stdout)}): install them by hand")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory_mb() -> int:
    """The node's RealMemory: below what the machine has (slurmd drains a node that has
    less than its RealMemory), what its jobs' mem_gb may ask in all."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return max(1024, int(line.split()[1]) // 1024 - 512)
    return 1024


class Layout:
    """Every path of a cluster in `root`."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.etc, self.log, self.pids = self.root / "etc", self.root / "log", self.root / "pids"
        self.run, self.state = self.root / "run", self.root / "state"
        self.munge = self.root / "munge"
        self.socket = self.munge / "munge.socket"
        self.key = self.munge / "munge.key"
        self.mysql = self.state / "mysql"
        self.slurm_conf = self.etc / "slurm.conf"
        self.dbd_conf = self.etc / "slurmdbd.conf"
        self.marker = self.root / MARKER

    def pid_file(self, name: str) -> Path:
        return self.pids / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.log / f"{name}.log"


def slurm_conf(lay: Layout, host: str, ports: dict) -> str:
    settings = {
        "ClusterName": CLUSTER,
        "SlurmctldHost": f"{host}(127.0.0.1)",
        "SlurmctldPort": ports["slurmctld"],
        "SlurmdPort": ports["slurmd"],
        "SlurmUser": "root",
        "SlurmdUser": "root",
        "AuthType": "auth/munge",
        "AuthInfo": f"socket={lay.socket}",
        "CredType": "cred/munge",
        "StateSaveLocation": lay.state / "slurmctld",
        "SlurmdSpoolDir": lay.state / "slurmd",
        "SlurmctldPidFile": lay.run / "slurmctld.pid",
        "SlurmdPidFile": lay.run / "slurmd.pid",
        "SlurmctldLogFile": lay.log_file("slurmctld"),
        "SlurmdLogFile": lay.log_file("slurmd"),
        # no cgroups: processes tracked through /proc, no task confinement, no job statistics
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/none",
        "JobAcctGatherType": "jobacct_gather/none",
        "MpiDefault": "none",
        "SwitchType": "switch/none",
        "SchedulerType": "sched/backfill",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_CPU_Memory",
        "SlurmdParameters": "config_overrides",  # CPUs=2 whatever the machine has
        "ReturnToService": 2,
        "KillWait": 30,  # scancel: SIGTERM, then SIGKILL this many seconds later
        "AccountingStorageType": "accounting_storage/slurmdbd",
        "AccountingStorageHost": "127.0.0.1",
        "AccountingStoragePort": ports["slurmdbd"],
        "AccountingStoragePass": lay.socket,  # the munge socket, for sacct and sacctmgr
        "JobCompType": "jobcomp/none",
    }
    lines = [f"{k}={v}" for k, v in settings.items()]
    lines.append(f"NodeName={host} NodeAddr=127.0.0.1 CPUs={CPUS} RealMemory={memory_mb()} "
                 f"State=UNKNOWN")
    lines.append(f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP")
    return "# written by scripts/slurm_cluster.py\n" + "\n".join(lines) + "\n"


def dbd_conf(lay: Layout, host: str, ports: dict, password: str) -> str:
    settings = {
        "AuthType": "auth/munge",
        "AuthInfo": f"socket={lay.socket}",
        "DbdHost": host,
        "DbdAddr": "127.0.0.1",
        "DbdPort": ports["slurmdbd"],
        "SlurmUser": "root",
        "LogFile": lay.log_file("slurmdbd"),
        "PidFile": lay.run / "slurmdbd.pid",
        "StorageType": "accounting_storage/mysql",
        "StorageHost": "127.0.0.1",
        "StoragePort": ports["mariadbd"],
        "StorageUser": "slurm",
        "StoragePass": password,
        "StorageLoc": "slurm_acct_db",
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _error_line(text: str) -> str:
    """The first line that names an error, else the last line."""
    for line in (text or "").splitlines():
        if "error" in line.lower():
            return line.strip()
    return _last_line(text)


def _log_tail(lay: Layout, name: str) -> str:
    """What a daemon said last about an error (its log file, or its output before it opened
    one), else its last line."""
    text = ""
    for path in (lay.log / f"{name}.out", lay.log_file(name)):
        try:
            text += path.read_text(errors="replace")
        except OSError:
            pass
    errors = [line.strip() for line in text.splitlines()
              if re.search(r"\b(error|fatal)\b", line, re.IGNORECASE)]
    return errors[-1] if errors else _last_line(text) if text else "no log"


def alive(pid: int, name: str) -> bool:
    """Whether `pid` runs the daemon `name` (a zombie, ended but not yet reaped by its new
    parent, does not; nor a process that took a stale pid file's number)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z" and Path(os.fsdecode(command)).name == name


def read_pid(lay: Layout, name: str) -> int | None:
    try:
        return int(lay.pid_file(name).read_text().strip())
    except (OSError, ValueError):
        return None


def running(lay: Layout) -> dict[str, int]:
    """The daemons of the cluster in `lay` that run: name -> pid."""
    pids = {name: read_pid(lay, name) for name in ORDER}
    return {name: pid for name, pid in pids.items() if pid is not None and alive(pid, name)}


def client_env(lay: Layout) -> dict:
    return dict(os.environ, SLURM_CONF=str(lay.slurm_conf))


def spawn(lay: Layout, name: str, command: list[str]) -> subprocess.Popen:
    """Start a daemon in the foreground of a session of its own (it outlives this script),
    its output in log/<name>.out, its pid in pids/<name>.pid."""
    out = open(lay.log / f"{name}.out", "ab")  # the child holds it open; this copy closes
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                env=client_env(lay), cwd=lay.root, start_new_session=True)
    except OSError as err:
        raise ClusterError(f"{name} could not be started ({err}): is SLURM installed?") from None
    finally:
        out.close()
    lay.pid_file(name).write_text(f"{proc.pid}\n")
    return proc


def wait_for(what: str, ready, proc: subprocess.Popen | None, lay: Layout, name: str,
             timeout: float = START_TIMEOUT_S) -> None:
    """Poll `ready()` until true; one line naming the daemon and its log's last error if it
    exits first or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if proc is not None and proc.poll() is not None:
            raise ClusterError(f"{name} exited at start (code {proc.returncode}): "
                               f"{_log_tail(lay, name)} (see {lay.log})")
        time.sleep(0.2)
    raise ClusterError(f"{what} not within {timeout:.0f} s: {_log_tail(lay, name)} "
                       f"(see {lay.log})")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def sinfo_state(lay: Layout) -> str:
    proc = subprocess.run([program("sinfo") or "sinfo", "-h", "-N", "-o", "%t"],
                          env=client_env(lay), capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def prepare(lay: Layout) -> None:
    """An empty dir, or one a stopped cluster of ours left: made afresh (config, state, logs);
    anything else is refused rather than written into."""
    if lay.root.exists() and any(lay.root.iterdir()):
        if not lay.marker.is_file():
            raise ClusterError(f"{lay.root} is not empty and holds no cluster of this script: "
                               f"give an empty or new dir")
        if running(lay):
            raise ClusterError(f"a cluster runs in {lay.root} "
                               f"({', '.join(running(lay))}): stop it first "
                               f"(python scripts/slurm_cluster.py stop {lay.root})")
        for sub in (lay.etc, lay.log, lay.pids, lay.run, lay.state, lay.munge):
            shutil.rmtree(sub, ignore_errors=True)
        lay.marker.unlink()
    for sub in (lay.etc, lay.log, lay.pids, lay.run, lay.state / "slurmctld",
                lay.state / "slurmd", lay.munge):
        sub.mkdir(parents=True, exist_ok=True)
    os.chmod(lay.munge, 0o755)  # munged wants its socket's folder reachable by all


def start(root: Path) -> str:
    if not sys.platform.startswith("linux"):
        raise Unavailable("this one-node cluster runs on Linux only")
    install()
    if os.geteuid() != 0:
        raise Unavailable("the daemons run as root here (SlurmUser=root): run as root")
    lay = Layout(root)
    prepare(lay)
    host = socket.gethostname().split(".")[0]
    ports = {name: free_port() for name in ("mariadbd", "slurmdbd", "slurmctld", "slurmd")}
    password = secrets.token_hex(12)
    lay.marker.write_text(json.dumps({"host": host, "ports": ports, "order": ORDER}) + "\n")
    lay.slurm_conf.write_text(slurm_conf(lay, host, ports))
    fd = os.open(lay.dbd_conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(dbd_conf(lay, host, ports, password))
    os.chmod(lay.dbd_conf, 0o600)
    fd = os.open(lay.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(1024))
    try:
        _start_daemons(lay, host, ports, password)
    except BaseException:
        stop(root, quiet=True)  # leave no daemon of a half-started cluster behind
        raise
    return f"export SLURM_CONF={lay.slurm_conf}"


def _start_daemons(lay: Layout, host: str, ports: dict, password: str) -> None:
    # the accounting database: a data dir of its own, the slurm user on 127.0.0.1 only
    proc = subprocess.run(
        [program("mariadb-install-db"), "--no-defaults", f"--datadir={lay.mysql}",
         "--user=root", "--auth-root-authentication-method=socket", "--skip-test-db",
         "--skip-name-resolve"], capture_output=True, text=True, cwd=lay.root)
    if proc.returncode != 0:
        raise ClusterError(f"mariadb-install-db failed: {_error_line(proc.stdout + proc.stderr)}"
                           f" (is mariadb-server-core installed?)")
    maria = spawn(lay, "mariadbd", [
        program("mariadbd"), "--no-defaults", f"--datadir={lay.mysql}", "--user=root",
        f"--socket={lay.run / 'mariadbd.sock'}", f"--pid-file={lay.run / 'mariadbd.pid'}",
        f"--port={ports['mariadbd']}", "--bind-address=127.0.0.1", "--skip-name-resolve",
        f"--log-error={lay.log_file('mariadbd')}", "--innodb-buffer-pool-size=64M",
        "--innodb-lock-wait-timeout=900"])
    # --force: munged refuses a socket whose every parent folder is not executable by all
    # (a pytest tmp dir's are 0700); the clients here all run as root, which passes anyway
    munge = spawn(lay, "munged", [
        program("munged"), "--foreground", "--force", f"--socket={lay.socket}",
        f"--key-file={lay.key}", f"--pid-file={lay.run / 'munged.pid'}",
        f"--log-file={lay.log_file('munged')}", f"--seed-file={lay.munge / 'munged.seed'}"])
    wait_for("munged listening", lay.socket.exists, munge, lay, "munged")
    wait_for("mariadbd accepting connections", lambda: port_open(ports["mariadbd"]), maria,
             lay, "mariadbd")
    grants = (f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
              f"GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';")
    proc = subprocess.run([program("mariadb") or "mariadb", "--no-defaults",
                           f"--socket={lay.run / 'mariadbd.sock'}", "-u", "root", "-e", grants],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"creating the accounting database's user failed: "
                           f"{_error_line(proc.stderr or proc.stdout)} (see {lay.log})")
    dbd = spawn(lay, "slurmdbd", [program("slurmdbd"), "-D"])
    wait_for("slurmdbd accepting connections", lambda: port_open(ports["slurmdbd"]), dbd, lay,
             "slurmdbd")
    _register(lay)
    ctld = spawn(lay, "slurmctld", [program("slurmctld"), "-D", "-c", "-f", str(lay.slurm_conf)])
    wait_for("slurmctld accepting connections", lambda: port_open(ports["slurmctld"]), ctld,
             lay, "slurmctld")
    slurmd = spawn(lay, "slurmd", [program("slurmd"), "-D", "-N", host, "-f",
                                   str(lay.slurm_conf)])
    wait_for("the node idle in sinfo", lambda: sinfo_state(lay) == "idle", slurmd, lay, "slurmd")


def _register(lay: Layout) -> None:
    """The cluster in the accounting database, before its controller first reports to it."""
    sacctmgr = program("sacctmgr")
    shown = subprocess.run([sacctmgr, "-n", "-P", "show", "cluster", "format=cluster"],
                           env=client_env(lay), capture_output=True, text=True)
    if CLUSTER in shown.stdout.split():
        return
    proc = subprocess.run([sacctmgr, "-i", "add", "cluster", CLUSTER], env=client_env(lay),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"sacctmgr add cluster {CLUSTER} failed: "
                           f"{_last_line(proc.stderr or proc.stdout)} (see {lay.log})")


def stop(root: Path, quiet: bool = False) -> str:
    lay = Layout(root)
    if not lay.marker.is_file() and not quiet:
        raise ClusterError(f"{lay.root} holds no cluster of this script (no {MARKER})")
    up = running(lay)
    if "slurmctld" in up and "slurmd" in up:
        _cancel_jobs(lay)
    left = []
    for name in reversed(ORDER):
        pid = read_pid(lay, name)
        if pid is None or not alive(pid, name):
            continue
        _end(pid, name)
        if alive(pid, name):
            left.append(f"{name} (pid {pid})")
    if left and not quiet:
        raise ClusterError(f"{', '.join(left)} still running after SIGKILL: end it by its pid")
    return f"stopped the cluster in {lay.root}"


def _end(pid: int, name: str) -> None:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; wait for the process to be gone."""
    for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not alive(pid, name):
                return
            time.sleep(0.1)


def _cancel_jobs(lay: Layout) -> None:
    """Cancel every job of the cluster and wait (KillWait at most) for them to go: a job's
    processes are not the daemons' and would outlive them."""
    env = client_env(lay)
    squeue = [program("squeue") or "squeue", "-h", "-o", "%A"]
    jobs = subprocess.run(squeue, env=env, capture_output=True, text=True).stdout.split()
    if not jobs:
        return
    subprocess.run([program("scancel") or "scancel", *jobs], env=env, capture_output=True)
    deadline = time.monotonic() + 40.0
    while time.monotonic() < deadline:
        if not subprocess.run(squeue, env=env, capture_output=True, text=True).stdout.split():
            return
        time.sleep(0.5)


def status(root: Path) -> str:
    lay = Layout(root)
    if not lay.marker.is_file():
        raise ClusterError(f"{lay.root} holds no cluster of this script (no {MARKER}): "
                           f"python scripts/slurm_cluster.py start {lay.root}")
    up = running(lay)
    lines = [f"{name}: " + (f"running (pid {up[name]})" if name in up else "stopped")
             for name in ORDER]
    if "slurmctld" in up:
        lines.append(f"node: {sinfo_state(lay) or 'unknown'}")
    lines.append(f"export SLURM_CONF={lay.slurm_conf}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    usage = "usage: python scripts/slurm_cluster.py start|status|stop <dir>"
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    if len(argv) != 2 or argv[0] not in ("start", "status", "stop"):
        print(f"error: {usage}", file=sys.stderr)
        return 2
    action = {"start": start, "status": status, "stop": stop}[argv[0]]
    try:
        print(action(Path(argv[1])))
    except ClusterError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as err:  # a dir that cannot be written, a program that cannot be run
        print(f"error: {argv[0]} {argv[1]}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
