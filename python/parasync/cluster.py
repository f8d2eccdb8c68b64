"""Which cluster a Python worker joins, and how it talks to it.

The same ways as `parasync-node` takes them, with the same precedence: the
command line (--ps_hosts/--worker_hosts), else a cluster file as the app saves
it (--cluster_file), else TF_CONFIG; the task from --job_name/--task_index,
else TF_CONFIG's "task". The cluster token from --cluster_token_file or
PARASYNC_CLUSTER_TOKEN; TLS from --tls_cert/--tls_key/--tls_ca. The
variables' partitioning from --min_slice_bytes, else the cluster file's
"training" "min_slice_bytes": it is part of the signature, so every worker
of a cluster must be given the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import stat
from typing import Any, Mapping, Optional, Sequence

from parasync.placement import DEFAULT_MIN_SLICE_BYTES

TOKEN_METADATA_KEY = "parasync-cluster-token"
TOKEN_ENVIRONMENT_VARIABLE = "PARASYNC_CLUSTER_TOKEN"

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")


class ClusterError(ValueError):
    """The cluster, the task or the security settings cannot be used as given;
    the message says what to change."""


@dataclasses.dataclass
class ClusterConfig:
    ps: list[str]  # "host:port" of each ps task
    workers: list[str]  # "host:port" of each worker task; worker 0 is the chief
    task_index: int
    # The backup of each ps task (--ps_backup_hosts), in ps order, or none:
    # the other process of its pair, which takes over when it dies.
    ps_backups: list[str] = dataclasses.field(default_factory=list)
    token: str = ""
    tls_cert: bytes = b""
    tls_key: bytes = b""
    tls_ca: bytes = b""
    heartbeat_ms: int = 1000
    # With ps_backups: how long the chief's vote in a pair's lease lasts, as
    # parasync-node's --ps_lease_ms (parasync.lease).
    ps_lease_ms: int = 1000
    max_message_bytes: int = 64 << 20
    # True: a ps task's join is offered a data link when this worker's
    # variables on it come to 64 KiB or more (as parasync-node's --data_link).
    data_link: bool = True
    # The run directory, where the chief keeps its checkpoints and restores
    # from (empty: none), as parasync-node's --logdir.
    logdir: str = ""
    save_checkpoint_secs: int = 50  # also one at the end; 0: only at the end
    max_to_keep: int = 5  # newest checkpoints kept; 0 keeps all
    # A variable larger than this is partitioned over the ps tasks along its
    # rows (parasync.placement); 0 keeps every variable whole.
    min_slice_bytes: int = DEFAULT_MIN_SLICE_BYTES

    @property
    def is_chief(self) -> bool:
        return self.task_index == 0

    @property
    def uses_tls(self) -> bool:
        return bool(self.tls_ca)

    def ps_pair(self, k: int) -> list[str]:
        """ps task k's processes: its address, then its backup's (if any)."""
        return [self.ps[k]] + ([self.ps_backups[k]] if self.ps_backups else [])

    def describe(self) -> str:
        backups = f", backups {','.join(self.ps_backups)}" if self.ps_backups else ""
        return f"worker:{self.task_index} of {len(self.workers)}, ps tasks {','.join(self.ps)}{backups}"


BOOLEAN_WORDS = {"true": True, "1": True, "false": False, "0": False}


class _BooleanFlag(argparse.Action):
    """--name, --noname and --name=true|false|1|0, as TensorFlow's flags and
    parasync-node take a boolean (core/config/flag_values.h,
    spellBooleanFlags): a cluster's command line can then be handed to a
    Python worker and to parasync-node alike."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        name = self.dest
        if option_string == f"--no{name}":
            if values is not None:
                parser.error(f"--no{name}={values}: --no{name} takes no value; give --no{name} or --{name}=false "
                             f"to turn it off, --{name} or --{name}=true to turn it on")
            setattr(namespace, self.dest, False)
            return
        if values is None:
            setattr(namespace, self.dest, True)
            return
        if values not in BOOLEAN_WORDS:
            parser.error(f"--{name}={values}: must be 1 or 0, or true or false (or give --{name} or --no{name})")
        setattr(namespace, self.dest, BOOLEAN_WORDS[values])


def add_boolean_argument(parser: Any, name: str, default: bool, help: str) -> None:
    """Adds a boolean flag --name to an argparse parser or argument group,
    taking the forms parasync-node's booleans take: --name, --noname and
    --name=true|false|1|0. Any other value exits 2 naming those forms."""
    parser.add_argument(f"--{name}", dest=name, action=_BooleanFlag, default=default, metavar="true|false",
                        help=f"{help}; --no{name} is --{name}=false")
    # Listed once in --help, under --name; SUPPRESS keeps it from resetting
    # the default the first one set.
    parser.add_argument(f"--no{name}", dest=name, action=_BooleanFlag, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Adds parasync-node's cluster and security flags to an argparse parser."""
    group = parser.add_argument_group("the cluster (as parasync-node takes it)")
    group.add_argument("--ps_hosts", help="comma-separated addresses of the ps tasks")
    group.add_argument("--worker_hosts", help="comma-separated addresses of the worker tasks; worker:0 is the chief")
    group.add_argument("--ps_backup_hosts",
                       help="comma-separated addresses of each ps task's backup, in --ps_hosts' order: a worker "
                            "turns to it when its ps task dies")
    group.add_argument("--job_name", help="this task's job: worker (a Python task is a worker)")
    group.add_argument("--task_index", type=int, help="this task's index within its job")
    group.add_argument("--cluster_file", help="JSON cluster file as the app saves it")
    group.add_argument("--cluster_token_file", help="file (mode 0600) holding the cluster token")
    group.add_argument("--tls_cert", help="TLS: this task's certificate (PEM)")
    group.add_argument("--tls_key", help="TLS: the private key of --tls_cert (PEM)")
    group.add_argument("--tls_ca", help="TLS: the CA certificate (PEM) that signed the ps tasks' certificates")
    group.add_argument("--heartbeat_ms", type=int, default=1000, help="HTTP/2 keepalive interval (default 1000)")
    group.add_argument("--ps_lease_ms", type=int, default=1000,
                       help="with --ps_backup_hosts: how long the chief's vote in a pair's lease lasts "
                            "(default 1000; 0: no leases)")
    group.add_argument("--max_message_bytes", type=int, default=64 << 20,
                       help="largest message sent or accepted (default 67108864)")
    add_boolean_argument(group, "data_link", default=True,
                         help="big tensors' values go on a TCP link beside the gRPC stream (default: on)")
    group = parser.add_argument_group("the run directory (as parasync-node takes it)")
    group.add_argument("--logdir", default="",
                       help="run directory: the chief saves its checkpoints there and restores from the newest")
    group.add_argument("--save_checkpoint_secs", type=int, default=50,
                       help="the chief saves a checkpoint every N seconds and at the end; 0 is only at the end "
                            "(default 50)")
    group.add_argument("--max_to_keep", type=int, default=5, help="newest checkpoints kept; 0 keeps all (default 5)")
    group = parser.add_argument_group("the variables (as parasync-node takes them)")
    group.add_argument("--min_slice_bytes", type=int, default=None,
                       help="partition a variable larger than this over the ps tasks along its rows, at most one "
                            "slice per ps task and each at least this many bytes (TensorFlow's "
                            "min_max_variable_partitioner); 0 keeps every variable whole. Give every worker the "
                            f"same (default {DEFAULT_MIN_SLICE_BYTES})")
    return parser


def _hosts(text: Any, origin: str) -> list[str]:
    if isinstance(text, str):
        items = [h.strip() for h in text.split(",") if h.strip()]
    elif isinstance(text, list) and all(isinstance(h, str) for h in text):
        items = [h.strip() for h in text]
    else:
        raise ClusterError(f"{origin} must be a list of \"host:port\" strings")
    for host in items:
        match = _HOST_PORT.match(host)
        if not match or not 0 < int(match.group(2)) < 65536:
            raise ClusterError(f"{origin}: '{host}' is not host:port (a port from 1 to 65535), like 127.0.0.1:2222")
    return items


def _cluster_object(root: Any, origin: str) -> tuple[list[str], list[str], bool, list[str]]:
    cluster = root.get("cluster") if isinstance(root, dict) else None
    if not isinstance(cluster, dict):
        raise ClusterError(f"{origin} has no \"cluster\" object: add \"cluster\": {{\"ps\": [...], \"worker\": [...]}}")
    unknown = set(cluster) - {"ps", "worker", "chief", "ps_backup"}
    if unknown:
        raise ClusterError(f"{origin}: \"cluster\" has a job {sorted(unknown)[0]!r} that Parasync does not run: "
                           "only \"ps\", \"worker\", \"chief\" and \"ps_backup\"")
    ps = _hosts(cluster.get("ps", []), f"{origin} cluster \"ps\"")
    backups = _hosts(cluster.get("ps_backup", []), f"{origin} cluster \"ps_backup\"")
    chief = _hosts(cluster.get("chief", []), f"{origin} cluster \"chief\"")
    if len(chief) > 1:
        raise ClusterError(f"{origin}: \"chief\" lists {len(chief)} addresses; a cluster has one chief")
    # TF 2 lists the chief as its own job; Parasync's chief is worker:0.
    workers = chief + _hosts(cluster.get("worker", []), f"{origin} cluster \"worker\"")
    return ps, workers, bool(chief), backups


def _read_json(text: str | bytes, origin: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ClusterError(f"{origin} is not JSON: {e}") from None


def _training_min_slice_bytes(root: Any, origin: str) -> Optional[int]:
    """The "training" "min_slice_bytes" of a cluster file, or None."""
    training = root.get("training") if isinstance(root, dict) else None
    if not isinstance(training, dict) or "min_slice_bytes" not in training:
        return None
    value = training["min_slice_bytes"]
    shown = f"--min_slice_bytes={value} (from the \"training\" of {origin})"
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        value = int(value)
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClusterError(f"{shown}: not a whole number; give e.g. \"min_slice_bytes\": {DEFAULT_MIN_SLICE_BYTES}")
    if value < 0:
        raise ClusterError(f"{shown}: must be at least 0 (0 keeps every variable whole)")
    return value


def read_token_file(path: str) -> str:
    """The token in `path`, refusing a file others can read, as parasync-node does."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise ClusterError(f"cannot read the cluster token file {path}: {e.strerror} (make one with: "
                           f"parasync-node --generate_token --cluster_token_file={path})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ClusterError(f"the cluster token file {path} can be read by other users "
                           f"(mode {mode & 0o777:03o}): run chmod 600 {path}")
    with open(path, encoding="utf-8", errors="replace") as f:
        token = f.readline().rstrip("\r\n ")
    if len(token) < 32 or not re.fullmatch(r"[0-9A-Fa-f]+", token):
        raise ClusterError(f"the cluster token file {path} does not hold a token (at least 32 hex digits on its "
                           f"first line): make one with parasync-node --generate_token --cluster_token_file={path}")
    return token


def _read_file(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ClusterError(f"cannot read {what} {path}: {e.strerror}") from None


def from_arguments(args: argparse.Namespace, environ: Optional[Mapping[str, str]] = None) -> ClusterConfig:
    """A ClusterConfig from parsed add_arguments() flags and the environment."""
    environ = os.environ if environ is None else environ
    has_chief_job = False
    tf_task = None
    file_min_slice_bytes = None
    backups: list[str] = []
    backup_origin = "--ps_backup_hosts"
    if args.ps_hosts or args.worker_hosts:
        if not (args.ps_hosts and args.worker_hosts):
            raise ClusterError("give both --ps_hosts and --worker_hosts (or a --cluster_file, or TF_CONFIG)")
        ps = _hosts(args.ps_hosts, "--ps_hosts")
        workers = _hosts(args.worker_hosts, "--worker_hosts")
    elif args.cluster_file:
        root = _read_json(_read_file(args.cluster_file, "the cluster file"), f"cluster file {args.cluster_file}")
        ps, workers, has_chief_job, backups = _cluster_object(root, f"cluster file {args.cluster_file}")
        backup_origin = f"cluster file {args.cluster_file} \"ps_backup\""
        file_min_slice_bytes = _training_min_slice_bytes(root, f"cluster file '{args.cluster_file}'")
    elif environ.get("TF_CONFIG"):
        root = _read_json(environ["TF_CONFIG"], "TF_CONFIG")
        ps, workers, has_chief_job, backups = _cluster_object(root, "TF_CONFIG")
        backup_origin = "TF_CONFIG \"ps_backup\""
        tf_task = root.get("task")
    else:
        raise ClusterError(
            "no cluster given: pass --ps_hosts and --worker_hosts, --cluster_file, or set TF_CONFIG; the local "
            "demo cluster is --ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224"
        )
    if getattr(args, "ps_backup_hosts", None):
        backups = _hosts(args.ps_backup_hosts, "--ps_backup_hosts")
        backup_origin = "--ps_backup_hosts"
    if not ps:
        raise ClusterError("the cluster has no ps task: a worker needs at least one")
    if not workers:
        raise ClusterError("the cluster has no worker task")
    if backups and len(backups) != len(ps):
        raise ClusterError(f"{backup_origin} lists {len(backups)} backup(s) for {len(ps)} ps task(s): give one "
                           "backup per ps task, in --ps_hosts' order")
    for address in backups:
        if address in ps or address in workers:
            raise ClusterError(f"{backup_origin}: address {address} is also a ps task's or a worker's: give each "
                               "backup an address of its own")

    if args.job_name is not None or args.task_index is not None:
        if args.job_name not in (None, "worker"):
            raise ClusterError(f"--job_name={args.job_name}: a Python task is a worker; "
                               "run the ps tasks with parasync-node --job_name=ps")
        index = 0 if args.task_index is None else args.task_index
    elif isinstance(tf_task, dict):
        kind, index = tf_task.get("type"), tf_task.get("index", 0)
        if not isinstance(index, int) or index < 0:
            raise ClusterError("TF_CONFIG \"task\" \"index\" must be a whole number of at least 0")
        if kind == "chief":
            index = 0
        elif kind == "worker":
            index += 1 if has_chief_job else 0
        else:
            raise ClusterError(f"TF_CONFIG task type {kind!r}: a Python task is a worker or the chief")
    else:
        raise ClusterError("which worker is this? pass --task_index (and --job_name=worker) or TF_CONFIG's \"task\"")
    if not 0 <= index < len(workers):
        raise ClusterError(f"worker:{index} does not exist: the cluster lists {len(workers)} workers "
                           f"(valid: 0-{len(workers) - 1})")

    token = ""
    if args.cluster_token_file:
        token = read_token_file(args.cluster_token_file)
    elif environ.get(TOKEN_ENVIRONMENT_VARIABLE):
        token = environ[TOKEN_ENVIRONMENT_VARIABLE].strip()

    tls = [args.tls_cert, args.tls_key, args.tls_ca]
    if any(tls) and not args.tls_ca:
        raise ClusterError("TLS needs --tls_ca (the CA that signed the ps tasks' certificates)")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ClusterError("give --tls_cert and --tls_key together (a certificate and its private key)")
    if args.heartbeat_ms <= 0:
        raise ClusterError(f"--heartbeat_ms={args.heartbeat_ms}: give a positive number of milliseconds")
    if args.ps_lease_ms != 0 and not 100 <= args.ps_lease_ms <= 60000:
        raise ClusterError(f"--ps_lease_ms={args.ps_lease_ms}: give 100 to 60000 milliseconds (0 turns leases off)")
    if args.max_message_bytes < 1024:
        raise ClusterError(f"--max_message_bytes={args.max_message_bytes} is too small to hold a step")
    if args.save_checkpoint_secs < 0:
        raise ClusterError(f"--save_checkpoint_secs={args.save_checkpoint_secs}: give 0 (only at the end) or more")
    if args.max_to_keep < 0:
        raise ClusterError(f"--max_to_keep={args.max_to_keep}: give 0 (keep all) or more")
    # The command line over the cluster file, as parasync-node takes it.
    min_slice_bytes = getattr(args, "min_slice_bytes", None)
    if min_slice_bytes is None:
        min_slice_bytes = DEFAULT_MIN_SLICE_BYTES if file_min_slice_bytes is None else file_min_slice_bytes
    elif min_slice_bytes < 0:
        raise ClusterError(f"--min_slice_bytes={min_slice_bytes}: give 0 (every variable whole) or a number of "
                           f"bytes (default {DEFAULT_MIN_SLICE_BYTES})")
    return ClusterConfig(
        ps=ps, workers=workers, task_index=index, ps_backups=backups, token=token,
        tls_cert=_read_file(args.tls_cert, "--tls_cert") if args.tls_cert else b"",
        tls_key=_read_file(args.tls_key, "--tls_key") if args.tls_key else b"",
        tls_ca=_read_file(args.tls_ca, "--tls_ca") if args.tls_ca else b"",
        heartbeat_ms=args.heartbeat_ms, ps_lease_ms=args.ps_lease_ms, max_message_bytes=args.max_message_bytes,
        data_link=bool(getattr(args, "data_link", True)), logdir=args.logdir,
        save_checkpoint_secs=args.save_checkpoint_secs, max_to_keep=args.max_to_keep,
        min_slice_bytes=min_slice_bytes)


def parse_cluster(argv: Optional[Sequence[str]] = None, parser: Optional[argparse.ArgumentParser] = None
                  ) -> tuple[ClusterConfig, argparse.Namespace]:
    """Parses the command line (argv, default sys.argv[1:]) with the cluster
    flags added to `parser` (or a new one); returns (ClusterConfig, the parsed
    namespace, which holds the parser's own flags too). Exits 2 with the
    message on a cluster that cannot be used, as parasync-node does."""
    parser = parser or argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return from_arguments(args), args
    except ClusterError as e:
        parser.exit(2, f"{parser.prog}: {e}\n")
