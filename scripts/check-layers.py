#!/usr/bin/env python3
"""Fails when an include crosses a layer the wrong way.

CMake's link graph keeps most of the layering (a library cannot call what it
does not link), but a header needs no link to be included. This check reads
every quoted include of the project's sources and holds it to the table
below, the same table as docs/development.md's "Architecture" picture:

- each include is qualified by its folder ("engine/model.h", not "model.h");
- a folder includes only from the folders it may use;
- the engine, the formats, the configuration and the tasks (core/node)
  reach no gRPC header: gRPC is core/wire's alone; and
  ui/ (widgets and view models) reaches no gRPC or socket header, directly
  or through another project header;
- ui/ includes no protobuf header by name: protobuf messages reach it as
  data, inside the orchestration and configuration types it is given (a
  ModeConfig, a ClusterStatusResponse), which is allowed.

Usage: scripts/check-layers.py [project root]. Prints each violation as
file:line: what, and exits 1 if there is any.
"""

import os
import re
import sys

# folder -> the folders its files may include (besides itself).
MAY_USE = {
    "core/base": set(),
    "core/config": {"core/base", "core/proto"},
    "core/engine": {"core/base", "core/proto"},
    "core/formats": {"core/base", "core/config", "core/proto"},
    "core/kubeflow": {"core/base", "core/config"},
    "core/slurm": {"core/base", "core/config"},
    "core/wire": {"core/base", "core/config", "core/formats", "core/proto"},
    "core/node": {"core/base", "core/config", "core/engine", "core/formats", "core/wire", "core/proto"},
    "core/orchestration": {"core/base", "core/config", "core/engine", "core/formats", "core/slurm", "core/wire",
                           "core/proto"},
    "ui/models": {"core/base", "core/config", "core/formats", "core/orchestration", "core/slurm"},
    "ui/charts": {"core/base", "core/config", "core/formats", "core/orchestration", "core/slurm", "ui/models"},
    # The designer lists the engine's model and optimizer names.
    "ui/dialogs": {"core/base", "core/config", "core/engine", "core/formats", "core/kubeflow", "core/orchestration",
                   "core/slurm", "ui/models"},
    "ui/windows": {"core/base", "core/config", "core/formats", "core/kubeflow", "core/orchestration", "core/slurm",
                   "ui/models", "ui/charts", "ui/dialogs"},
    "ui/headless": {"core/base", "core/config", "core/engine", "core/formats", "core/orchestration", "core/slurm",
                    "ui/models", "ui/charts"},
    # The app's command line and process set-up: a window or a headless run.
    "ui": {"core/base", "core/config", "core/formats", "core/orchestration", "core/slurm", "ui/models",
           "ui/charts", "ui/dialogs", "ui/windows", "ui/headless"},
}
# The rooms of ui/, each a library of its own (ui/CMakeLists.txt).
UI_ROOMS = ("models", "charts", "dialogs", "windows", "headless")
# Where a qualified include points: "engine/model.h" -> core/engine.
INCLUDE_ROOTS = {"base", "config", "engine", "formats", "kubeflow", "slurm", "wire", "node", "orchestration", "proto"}

# System headers a folder must not reach, even through a project header.
FORBIDDEN = {
    "core/base": [r"^grpcpp/", r"^grpc/", r"^google/protobuf/"],
    "core/config": [r"^grpcpp/", r"^grpc/"],
    "core/engine": [r"^grpcpp/", r"^grpc/"],
    "core/formats": [r"^grpcpp/", r"^grpc/"],
    "core/slurm": [r"^grpcpp/", r"^grpc/"],
    # What parasync-node runs, gRPC-free: the ps task answers
    # wire/ps_calls.h's PsHandler and is given its server in a
    # wire/ps_transport.h; the worker and the chief reach their ps tasks
    # through wire/ps_client.h and serve through wire/task_control.h.
    "core/node": [r"^grpcpp/", r"^grpc/", r"grpc\.pb\.h$"],
    # The app's calls reach a cluster through wire/cluster_client.h and
    # wire/cluster_control.h, which keep gRPC's types behind them.
    "core/orchestration": [r"^grpcpp/", r"^grpc/", r"grpc\.pb\.h$"],
    **{folder: [r"^grpcpp/", r"^grpc/", r"^sys/socket\.h$", r"^netinet/", r"^arpa/"]
       for folder in ("ui", "ui/models", "ui/charts", "ui/dialogs", "ui/windows", "ui/headless")},
}
# Files held to more than their folder: the ps task's logic does not build
# its own server (parasync-node wires wire/ps_server.h's around it, and the
# tests and the fuzzer call it in-process), and the two headers of wire/ that
# it reaches stay free of gRPC.
PS_TASK_FILES = ("core/node/ps_task.h", "core/node/ps_task.cpp", "core/node/ps_task_membership.cpp",
                 "core/node/ps_task_pushes.cpp", "core/node/ps_task_status.cpp", "core/node/ps_task_replication.cpp")
FORBIDDEN_IN_FILE = {
    **{path: [r"^wire/ps_server\.h$"] for path in PS_TASK_FILES},
    **{path: [r"^grpcpp/", r"^grpc/", r"grpc\.pb\.h$"] for path in ("core/wire/ps_calls.h", "core/wire/ps_transport.h")},
}
# Headers a folder must not include by name (they are reachable through
# another layer's types, but not to be used directly).
FORBIDDEN_DIRECT = {
    **{folder: [r"^proto/", r"^wire/", r"^node/", r"^google/protobuf/"]
       for folder in ("ui", "ui/models", "ui/charts", "ui/dialogs", "ui/windows", "ui/headless")},
}
# Generated headers: what they pull in, for the transitive check.
GENERATED = {
    "proto/parasync.pb.h": ["google/protobuf/message.h"],
    "proto/tensorboard.pb.h": ["google/protobuf/message.h"],
    "proto/parasync.grpc.pb.h": ["grpcpp/grpcpp.h", "proto/parasync.pb.h"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(relpath):
    parts = relpath.split("/")
    if parts[0] == "core" and len(parts) > 2:
        return "core/" + parts[1]
    if parts[0] == "ui":
        return f"ui/{parts[1]}" if len(parts) > 2 and parts[1] in UI_ROOMS else "ui"
    return parts[0]


def resolve(root, name):
    """A quoted include's file, relative to the root, or None (generated, Qt moc)."""
    for base in ("core", "."):
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def includes_of(root, relpath, cache={}):
    if relpath not in cache:
        found = []
        with open(os.path.join(root, relpath), encoding="utf-8") as source:
            for number, line in enumerate(source, 1):
                match = INCLUDE.match(line)
                if match:
                    found.append((number, match.group(1), match.group(2)))
        cache[relpath] = found
    return cache[relpath]


def reaches(root, name, pattern, seen):
    """Whether a project header `name` (as included) reaches a header matching `pattern`."""
    if name in seen:
        return None
    seen.add(name)
    if name in GENERATED:
        for inner in GENERATED[name]:
            if re.search(pattern, inner):
                return [name, inner]
            chain = reaches(root, inner, pattern, seen)
            if chain:
                return [name] + chain
        return None
    path = resolve(root, name)
    if path is None:
        return None
    for _, kind, inner in includes_of(root, path):
        if re.search(pattern, inner):
            return [name, inner]
        if kind == '"':
            chain = reaches(root, inner, pattern, seen)
            if chain:
                return [name] + chain
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    for top in ("core", "ui"):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for file in sorted(files):
                if not file.endswith((".h", ".cpp")):
                    continue
                relpath = os.path.relpath(os.path.join(directory, file), root)
                folder = folder_of(relpath)
                if folder not in MAY_USE:
                    continue
                for number, kind, name in includes_of(root, relpath):
                    where = f"{relpath}:{number}"
                    for pattern in FORBIDDEN_DIRECT.get(folder, []):
                        if re.search(pattern, name):
                            problems.append(f"{where}: {folder} includes {name} directly")
                    for pattern in FORBIDDEN.get(folder, []) + FORBIDDEN_IN_FILE.get(relpath, []):
                        if re.search(pattern, name):
                            problems.append(f"{where}: {folder} includes {name}")
                        elif kind == '"':
                            chain = reaches(root, name, pattern, set())
                            if chain:
                                problems.append(f"{where}: {folder} reaches {chain[-1]} through "
                                                + " -> ".join(chain[:-1]))
                    if kind != '"' or name.endswith(".moc"):
                        continue
                    head = name.split("/")[0]
                    if "/" not in name:
                        problems.append(f'{where}: unqualified include "{name}": name its folder, '
                                        f'e.g. "{folder.split("/")[-1]}/{name}"')
                        continue
                    target = folder_of(name) if head == "ui" else (
                        f"core/{head}" if head in INCLUDE_ROOTS else head)
                    if target != folder and target not in MAY_USE[folder]:
                        problems.append(f"{where}: {folder} may not include {name} ({target} is not below it)")
    # The mains, the tests, the benchmarks and the fuzzers use every layer, but
    # name each header's folder too (their own helpers beside them excepted).
    for top in ("app", "tests", "bench", "fuzz"):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for file in sorted(files):
                if not file.endswith((".h", ".cpp")):
                    continue
                relpath = os.path.relpath(os.path.join(directory, file), root)
                for number, kind, name in includes_of(root, relpath):
                    if kind != '"' or "/" in name or name.endswith(".moc"):
                        continue
                    if os.path.isfile(os.path.join(directory, name)) or name.endswith(".pb.h"):
                        continue  # a helper of its own folder, or its generated protocol
                    problems.append(f'{relpath}:{number}: unqualified include "{name}": name its folder')
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-layers: {len(problems)} include(s) cross a layer the wrong way "
              "(docs/development.md, Architecture, says which folder may use which)", file=sys.stderr)
        return 1
    print("check-layers: every include keeps to its layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
